/* `cllm bench offline`: many synthetic requests straight through the engine
 * (no HTTP), for kernel and scheduler work. Reports throughput, time to first
 * token and time per output token, and the KV cache's use of memory: token
 * slots holding data over slots in allocated blocks, and blocks allocated
 * against what reserving max_model_len per running request (contiguous
 * allocation) would have taken.
 *
 * --sequential submits each request when the previous one finishes (latency,
 * or prefix-cache time to first token with --prefix-len). */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine;
    cli_spec_settings spec;
    const char *prompt;
    long num_prompts, input_len, output_len, prefix_len, seed;
    double range_ratio;
    bool sequential;
    const char *json_out;
    engine_config ec; /* from engine, once parsed */
} bench_opts;

typedef struct {
    double t_submit, t_first, t_done;
    int n_out;
    bool done;
} req_timing;

static const cli_option k_offline_options[] = {
    {.name = "--num-prompts", .kind = CLI_INT, .offset = offsetof(bench_opts, num_prompts), .metavar = "N",
     .min = 1, .max = 1 << 20, .help = "requests"},
    {.name = "--input-len", .aliases = "--random-input-len", .kind = CLI_INT, .offset = offsetof(bench_opts, input_len),
     .metavar = "N", .min = 1, .max = 1 << 20, .help = "prompt tokens"},
    {.name = "--output-len", .aliases = "--random-output-len", .kind = CLI_INT,
     .offset = offsetof(bench_opts, output_len), .metavar = "N", .min = 1, .max = 1 << 20,
     .help = "generated tokens; end-of-generation is ignored"},
    {.name = "--range-ratio", .aliases = "--random-range-ratio", .kind = CLI_FLOAT,
     .offset = offsetof(bench_opts, range_ratio), .metavar = "R", .min = 0, .max = 0.99,
     .help = "lengths uniform in [len*(1-R), len*(1+R)]"},
    {.name = "--prefix-len", .kind = CLI_INT, .offset = offsetof(bench_opts, prefix_len), .metavar = "N", .min = 0,
     .max = 1 << 20, .help = "tokens every prompt shares at its start"},
    {.name = "--sequential", .kind = CLI_FLAG, .offset = offsetof(bench_opts, sequential),
     .help = "one request at a time (latency; with --prefix-len, prefix-cached time to first token)"},
    {.name = "--seed", .aliases = "-s", .kind = CLI_INT, .offset = offsetof(bench_opts, seed), .metavar = "S", .min = 0,
     .max = 1L << 40, .help = "seeds the synthetic prompts"},
    {.name = "--prompt", .aliases = "-p", .kind = CLI_STRING, .offset = offsetof(bench_opts, prompt),
     .metavar = "TEXT",
     .help = "every request's prompt is TEXT (tokenized; --input-len and --prefix-len are ignored) instead of "
             "random tokens: a real workload, e.g. for speculative decoding"},
    {.name = "--save-result", .kind = CLI_STRING, .offset = offsetof(bench_opts, json_out), .metavar = "FILE.json",
     .help = "write the results as JSON"},
    {0}};

static const cli_section k_offline_sections[] = {
    {.group = &(const cli_group){"bench offline options", k_offline_options}},
    {.group = &cli_model_group,
     .offset = offsetof(bench_opts, model),
     .only = "--model",
     .overrides = (const cli_override[]){{.name = "--model", .required = true}, {0}}},
    {.group = &cli_engine_group,
     .offset = offsetof(bench_opts, engine),
     .overrides = (const cli_override[]){{.name = "--max-model-len", .default_text = "the longest request"}, {0}}},
    {.group = &cli_spec_group, .offset = offsetof(bench_opts, spec)},
    {0}};

static const cli_command k_offline = {
    .name = "bench offline",
    .synopsis = "-m MODEL [options]",
    .about = "Many synthetic requests straight through the engine (no HTTP): throughput, time to first token, time "
             "per output token, and how the paged KV cache uses memory compared with contiguous allocation.",
    .sections = k_offline_sections,
};

static int parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.num_prompts = 64, .input_len = 128, .output_len = 128, .engine = cli_engine_defaults()};
    o->engine.max_model_len = 0;
    const int rc = cli_parse(&k_offline, argc, argv, o);
    if (rc) return rc;
    o->ec = cli_engine_config(&o->engine);
    if (cli_spec_config(&o->spec, &o->ec.spec)) return cli_usage_error(&k_offline, "%s", err_get());
    return 0;
}

static void on_output(void *user, const engine_output *out) {
    req_timing *t = user;
    if (out->n_new_tokens && t->t_first == 0) t->t_first = now_seconds();
    if (out->finished) {
        t->t_done = now_seconds();
        t->n_out = out->n_output_tokens;
        t->done = true;
    }
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static long jitter(uint64_t *rng, long len, double ratio) {
    if (ratio <= 0) return len;
    long lo = (long)floor(len * (1 - ratio)), hi = (long)ceil(len * (1 + ratio));
    if (lo < 1) lo = 1;
    return lo + (long)(lcg(rng) % (uint64_t)(hi - lo + 1));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, int n, double p) {
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double idx = p / 100.0 * (n - 1);
    int lo = (int)idx;
    return lo + 1 < n ? v[lo] + (idx - lo) * (v[lo + 1] - v[lo]) : v[lo];
}

int bench_offline(int argc, char **argv) {
    bench_opts o;
    const int parsed = parse(argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    model *m = model_load(o.model.path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    uint64_t rng = (uint64_t)o.seed * 2654435761u + 1;
    const int n = (int)o.num_prompts;
    int32_t **prompts = calloc((size_t)n, sizeof *prompts);
    int *plen = calloc((size_t)n, sizeof *plen), *olen = calloc((size_t)n, sizeof *olen);
    req_timing *tim = calloc((size_t)n, sizeof *tim);
    int32_t *prefix = malloc((size_t)(o.prefix_len + 1) * sizeof *prefix);
    /* Ordinary tokens only: skip the low ids where vocabularies keep control tokens. */
    const int lo_tok = m->hp.n_vocab > 2000 ? 1000 : 4, hi_tok = (int)(m->hp.n_vocab * 0.75);
    for (long k = 0; k < o.prefix_len; k++) prefix[k] = lo_tok + (int32_t)(lcg(&rng) % (uint64_t)(hi_tok - lo_tok));
    int max_len = 1;
    int32_t *text_ids = NULL;
    const int n_text = o.prompt ? tokenizer_encode(m->tok, o.prompt, strlen(o.prompt), true, true, &text_ids) : 0;
    if (o.prompt && n_text < 1) {
        fprintf(stderr, "cllm bench offline: --prompt: %s\n", n_text < 0 ? err_get() : "no tokens");
        model_free(m);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        plen[i] = o.prompt ? n_text : (int)(o.prefix_len + jitter(&rng, o.input_len, o.range_ratio));
        olen[i] = (int)jitter(&rng, o.output_len, o.range_ratio);
        prompts[i] = malloc((size_t)plen[i] * sizeof **prompts);
        if (o.prompt) {
            memcpy(prompts[i], text_ids, (size_t)n_text * sizeof *text_ids);
        } else {
            for (int k = 0; k < plen[i]; k++)
                prompts[i][k] =
                    k < o.prefix_len ? prefix[k] : lo_tok + (int32_t)(lcg(&rng) % (uint64_t)(hi_tok - lo_tok));
            if (tokenizer_bos(m->tok) >= 0) prompts[i][0] = tokenizer_bos(m->tok);
        }
        if (plen[i] + olen[i] > max_len) max_len = plen[i] + olen[i];
    }
    free(text_ids);
    if (o.ec.max_model_len == 0) o.ec.max_model_len = max_len;
    engine *e = engine_create(m, &o.ec);
    if (!e) {
        fprintf(stderr, "cllm: %s\n", err_get());
        model_free(m);
        return 1;
    }
    const int bs = o.ec.block_size;
    kv_cache layout;
    kv_cache_layout(&m->kv, o.ec.kv_type, bs, &layout);
    const double block_bytes = (double)kv_block_bytes(&layout);
    const double token_bytes = (double)kv_bytes_per_token(&m->kv, o.ec.kv_type);
    double util_sum = 0, alloc_sum = 0, contig_sum = 0, util_peak_blocks = 0, contig_peak = 0; /* bytes */
    long util_steps = 0;
    int next = 0, done = 0;
    const double t0 = now_seconds();
    while (done < n) {
        /* Submit: everything at once, or the next one when the engine is idle. */
        while (next < n && (!o.sequential || done == next)) {
            request_params p = request_params_defaults();
            p.max_tokens = olen[next];
            p.evict = o.ec.evict;
            p.ignore_eos = true;
            p.sampling.temperature = 0;
            tim[next].t_submit = now_seconds();
            if (engine_submit(e, prompts[next], plen[next], &p, on_output, &tim[next], NULL)) {
                fprintf(stderr, "cllm: request %d: %s\n", next, err_get());
                engine_free(e);
                model_free(m);
                return 1;
            }
            next++;
        }
        engine_step(e);
        engine_stats st;
        engine_get_stats(e, &st);
        if (st.kv_blocks_used > 0) {
            /* Contiguous allocation reserves max_model_len tokens of every layer for each
             * running request; paged allocation holds the blocks in use. In bytes. */
            const double contiguous = (double)st.n_running * o.ec.max_model_len * token_bytes;
            const double paged = (double)st.kv_blocks_used * block_bytes;
            util_sum += (double)st.kv_tokens_used / ((double)st.kv_blocks_used * bs);
            alloc_sum += paged;
            contig_sum += contiguous;
            if (paged > util_peak_blocks) util_peak_blocks = paged;
            if (contiguous > contig_peak) contig_peak = contiguous;
            util_steps++;
        }
        done = 0;
        for (int i = 0; i < n; i++) done += tim[i].done;
    }
    const double dt = now_seconds() - t0;
    long in_tok = 0, out_tok = 0;
    double *ttft = malloc((size_t)n * sizeof *ttft), *tpot = malloc((size_t)n * sizeof *tpot);
    int n_tpot = 0;
    for (int i = 0; i < n; i++) {
        in_tok += plen[i];
        out_tok += tim[i].n_out;
        ttft[i] = tim[i].t_first - tim[i].t_submit;
        if (tim[i].n_out > 1) tpot[n_tpot++] = (tim[i].t_done - tim[i].t_first) / (tim[i].n_out - 1);
    }
    engine_stats st;
    engine_get_stats(e, &st);
    double mean_ttft = 0, mean_tpot = 0;
    for (int i = 0; i < n; i++) mean_ttft += ttft[i] / n;
    for (int i = 0; i < n_tpot; i++) mean_tpot += tpot[i] / n_tpot;
    const double p50_ttft = percentile(ttft, n, 50), p99_ttft = percentile(ttft, n, 99);
    const double p50_tpot = percentile(tpot, n_tpot, 50);
    printf("requests            %d (%s)\n", n, o.sequential ? "sequential" : "all at once");
    printf("duration            %.3f s\n", dt);
    printf("input tokens        %ld (prefix cache hits %llu)\n", in_tok, (unsigned long long)st.prefix_hits);
    printf("output tokens       %ld\n", out_tok);
    printf("output throughput   %.1f tok/s\n", out_tok / dt);
    printf("total throughput    %.1f tok/s\n", (in_tok + out_tok) / dt);
    printf("TTFT                mean %.1f ms, median %.1f ms, P99 %.1f ms\n", mean_ttft * 1e3, p50_ttft * 1e3,
           p99_ttft * 1e3);
    printf("TPOT                mean %.2f ms, median %.2f ms\n", mean_tpot * 1e3, p50_tpot * 1e3);
    if (util_steps)
        printf("KV utilization      %.1f%% of the slots in allocated blocks hold tokens (mean over %ld steps)\n"
               "KV memory           paged %.1f MiB on average vs %.1f MiB for contiguous max-length allocation "
               "(%.2fx); peak %.1f vs %.1f MiB\n",
               100 * util_sum / util_steps, util_steps, alloc_sum / util_steps / 1048576,
               contig_sum / util_steps / 1048576, contig_sum / alloc_sum, util_peak_blocks / 1048576,
               contig_peak / 1048576);
    printf("preemptions         %llu\n", (unsigned long long)st.preemptions);
    if (o.ec.spec.method != SPEC_NONE) print_spec_stats(stdout, "speculative         ", &st);
    if (o.json_out) {
        json_t *j = json_pack("{s:i,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I}", "num_prompts", n,
                              "duration", dt, "total_input_tokens", (json_int_t)in_tok, "total_output_tokens",
                              (json_int_t)out_tok, "output_throughput", out_tok / dt, "total_token_throughput",
                              (in_tok + out_tok) / dt, "mean_ttft_ms", mean_ttft * 1e3, "median_ttft_ms",
                              p50_ttft * 1e3, "p99_ttft_ms", p99_ttft * 1e3, "mean_tpot_ms", mean_tpot * 1e3,
                              "kv_slot_utilization", util_steps ? util_sum / util_steps : 0.0,
                              "kv_vs_contiguous", alloc_sum > 0 ? contig_sum / alloc_sum : 0.0, "preemptions",
                              (json_int_t)st.preemptions, "prefix_cache_hits", (json_int_t)st.prefix_hits);
        json_dump_file(j, o.json_out, JSON_INDENT(2));
        json_decref(j);
    }
    free(ttft);
    free(tpot);
    for (int i = 0; i < n; i++) free(prompts[i]);
    free(prompts);
    free(plen);
    free(olen);
    free(tim);
    free(prefix);
    engine_free(e);
    model_free(m);
    return 0;
}
