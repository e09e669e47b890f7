/* `cllm perplexity MODEL --file TEXT`: perplexity as llama.cpp's
 * llama-perplexity computes it, so the numbers compare. The text is tokenized
 * whole (with BOS when the model adds one) and cut into chunks of n_ctx
 * tokens; each chunk starts a fresh sequence whose first token is replaced by
 * BOS, and only its second half is scored: the negative log-likelihood of
 * token j + 1 given tokens 0..j for j = n_ctx/2 .. n_ctx-2, so every scored
 * token has at least n_ctx/2 tokens of context. Prints the running perplexity
 * after each chunk ("[1]12.3456,[2]...") and the final estimate with the
 * standard error of the mean NLL carried through exp (llama.cpp's "+/-"). */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/commands.h"
#include "cli/ppl_long.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PPL_LOGIT_BATCH 64 /* scored rows per forward call: 64 x n_vocab floats */

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine; /* --max-model-len (the chunk), --threads, --kv-cache-dtype */
    const char *file;
    long max_chunks;
    long long_tokens; /* > 0: one sequence of this many tokens (ppl_long.h) */
    bool json;
} ppl_options;

static const cli_option k_ppl_options[] = {
    {.name = "--file", .aliases = "-f", .kind = CLI_STRING, .offset = offsetof(ppl_options, file), .metavar = "TEXT",
     .required = true, .help = "the text to score"},
    {.name = "--chunks", .kind = CLI_INT, .offset = offsetof(ppl_options, max_chunks), .metavar = "N", .min = 1,
     .max = 1 << 30, .help = "score at most N chunks", .default_text = "all the text holds"},
    {.name = "--tokens", .kind = CLI_INT, .offset = offsetof(ppl_options, long_tokens), .metavar = "N", .min = 2,
     .max = 1 << 26,
     .help = "score the first N tokens of the text as one sequence instead (every token after the first), the KV "
             "cache kept to --kv-budget by --kv-eviction; none keeps all of it"},
    {.name = "--json", .kind = CLI_FLAG, .offset = offsetof(ppl_options, json),
     .help = "also print a JSON summary line"},
    {0}};

static const cli_section k_ppl_sections[] = {
    {.group = &(const cli_group){"perplexity options", k_ppl_options}},
    {.group = &cli_model_group, .offset = offsetof(ppl_options, model), .only = "--model"},
    {.group = &cli_engine_group,
     .offset = offsetof(ppl_options, engine),
     .only = "--max-model-len --kv-cache-dtype --threads --kv-eviction --kv-budget --kv-sink-tokens",
     .overrides = (const cli_override[]){
         {.name = "--max-model-len", .help = "tokens per chunk; the second half of each is scored", .min = 4,
          .max = 1 << 20},
         {0}}},
    {0}};

static const cli_command k_perplexity = {
    .name = "perplexity",
    .synopsis = "MODEL --file TEXT [options]",
    .about = "Perplexity of a model on a text, as llama.cpp's llama-perplexity computes it (chunks of "
             "--max-model-len tokens, each starting with BOS, the second half scored), so the numbers compare.",
    .sections = k_ppl_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "MODEL", .offset = offsetof(ppl_options, model.path), .required = true}, {0}},
};

/* -log softmax(logits)[target], as llama.cpp's log_softmax: float max, double sum. */
static double nll_of(const float *logits, int n_vocab, int target) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += expf(logits[i] - max);
    return -((double)logits[target] - max - log(sum));
}

static void print_ppl(const char *label, double nll, double nll2, long count) {
    const double mean = nll / count, ppl = exp(mean), var = nll2 / count - mean * mean;
    const double err = var > 0 && count > 1 ? sqrt(var / (count - 1)) * ppl : 0;
    printf("%s: PPL = %.4f +/- %.5f over %ld tokens\n", label, ppl, err, count);
}

/* --tokens N: one long sequence, evicting as the engine does. */
static int run_long(const ppl_options *o, model *m, const int32_t *tokens, int n_tok, const char *file) {
    if (n_tok < o->long_tokens) {
        fprintf(stderr, "cllm perplexity: %s has %d tokens, fewer than --tokens %ld\n", file, n_tok, o->long_tokens);
        return 1;
    }
    const int n = (int)o->long_tokens;
    const kv_evict_params ev = {.policy = o->engine.kv_eviction, .budget = (int)o->engine.kv_budget,
                                .sink = (int)o->engine.kv_sink_tokens};
    fprintf(stderr, "cllm perplexity: %d tokens as one sequence, KV eviction %s, budget %d, %d sink tokens\n", n,
            kv_evict_name(ev.policy), ev.budget, ev.sink);
    ppl_long_result r;
    if (ppl_long_run(m, tokens, n, &ev, o->engine.kv_cache_dtype, (int)o->engine.threads, &r)) {
        fprintf(stderr, "cllm perplexity: %s\n", err_get());
        return 1;
    }
    print_ppl("All tokens", r.nll, r.nll2, r.count);
    if (r.count_past > 0) print_ppl("Past the budget", r.nll_past, r.nll2_past, r.count_past);
    fprintf(stderr, "cllm perplexity: %ld tokens in %.1f s (%.1f tokens/s), %ld evicted\n", r.count, r.seconds,
            r.count / r.seconds, r.evicted);
    if (o->json)
        printf("{\"ppl\": %.6f, \"scored_tokens\": %ld, \"ppl_past_budget\": %.6f, \"scored_past_budget\": %ld, "
               "\"kv_eviction\": \"%s\", \"kv_budget\": %d, \"kv_sink_tokens\": %d, \"evicted\": %ld, "
               "\"seconds\": %.3f}\n",
               exp(r.nll / r.count), r.count, r.count_past ? exp(r.nll_past / r.count_past) : 0.0, r.count_past,
               kv_evict_name(ev.policy), ev.budget, ev.sink, r.evicted, r.seconds);
    return 0;
}

int cmd_perplexity(int argc, char **argv) {
    ppl_options o = {.engine = cli_engine_defaults()};
    o.engine.max_model_len = 512;
    const int parsed = cli_parse(&k_perplexity, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    const char *const file = o.file;
    const long n_ctx = o.engine.max_model_len, max_chunks = o.max_chunks;
    size_t len;
    char *text = file_read_all(file, &len);
    if (!text) {
        fprintf(stderr, "cllm perplexity: %s\n", err_get());
        return 1;
    }
    model *m = model_load(o.model.path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        free(text);
        return 1;
    }
    int rc = 1;
    int32_t *tokens = NULL;
    float *logits = NULL;
    const int n_tok = tokenizer_encode(m->tok, text, len, true, false, &tokens);
    free(text);
    if (n_tok < 0) {
        fprintf(stderr, "cllm perplexity: %s\n", err_get());
        model_free(m);
        return 1;
    }
    if (o.long_tokens > 0) {
        rc = run_long(&o, m, tokens, n_tok, file);
        free(tokens);
        model_free(m);
        return rc;
    }
    if (n_ctx > m->hp.n_ctx_train)
        fprintf(stderr, "cllm perplexity: warning: --max-model-len %ld exceeds the model's trained context %d\n", n_ctx,
                m->hp.n_ctx_train);
    long n_chunks = n_tok / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    if (n_chunks < 1) {
        fprintf(stderr, "cllm perplexity: %s has %d tokens; a chunk needs %ld (lower --max-model-len)\n", file, n_tok,
                n_ctx);
        free(tokens);
        model_free(m);
        return 1;
    }
    const int nv = m->hp.n_vocab;
    const int32_t bos = tokenizer_add_bos(m->tok) ? tokenizer_bos(m->tok) : -1;
    const int first = (int)n_ctx / 2;
    seq_runner r;
    if (seq_runner_init(&r, m, (int)n_ctx, first > PPL_LOGIT_BATCH ? first : PPL_LOGIT_BATCH, o.engine.kv_cache_dtype,
                        (int)o.engine.threads)) {
        fprintf(stderr, "cllm: %s\n", err_get());
        free(tokens);
        model_free(m);
        return 1;
    }
    logits = malloc((size_t)PPL_LOGIT_BATCH * nv * sizeof *logits);
    int32_t *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!logits || !chunk) {
        fprintf(stderr, "cllm: out of memory\n");
        goto done;
    }
    fprintf(stderr, "cllm perplexity: %d tokens, %ld chunks of %ld, scoring %ld tokens per chunk\n", n_tok, n_chunks,
            n_ctx, n_ctx - first - 1);
    double nll = 0, nll2 = 0, t_eval = 0;
    long count = 0;
    for (long c = 0; c < n_chunks; c++) {
        memcpy(chunk, tokens + c * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        const double t0 = now_seconds();
        if (seq_runner_feed(&r, chunk, first, 0, NULL, false)) goto fail;
        for (int p = first; p < n_ctx - 1; p += PPL_LOGIT_BATCH) {
            const int nb = (int)(n_ctx - 1 - p < PPL_LOGIT_BATCH ? n_ctx - 1 - p : PPL_LOGIT_BATCH);
            if (seq_runner_feed(&r, chunk + p, nb, p, logits, true)) goto fail;
            for (int k = 0; k < nb; k++) {
                const double v = nll_of(logits + (size_t)k * nv, nv, chunk[p + k + 1]);
                nll += v;
                nll2 += v * v;
            }
        }
        t_eval += now_seconds() - t0;
        count += n_ctx - first - 1;
        printf("[%ld]%.4f,", c + 1, exp(nll / count));
        fflush(stdout);
    }
    printf("\n");
    const double mean = nll / count, ppl = exp(mean);
    double var = nll2 / count - mean * mean;
    const double err = var > 0 && count > 1 ? sqrt(var / (count - 1)) * ppl : 0;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    const double tok_s = (double)(n_chunks * (n_ctx - 1)) / t_eval;
    fprintf(stderr, "cllm perplexity: %ld chunks in %.1f s (%.1f tokens/s)\n", n_chunks, t_eval, tok_s);
    if (o.json)
        printf("{\"ppl\": %.6f, \"ppl_err\": %.6f, \"mean_nll\": %.8f, \"chunks\": %ld, \"ctx\": %ld, "
               "\"scored_tokens\": %ld, \"tokens\": %d, \"seconds\": %.3f, \"tokens_per_second\": %.2f}\n",
               ppl, err, mean, n_chunks, n_ctx, count, n_tok, t_eval, tok_s);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "cllm: %s\n", err_get());
done:
    free(chunk);
    free(logits);
    seq_runner_free(&r);
    free(tokens);
    model_free(m);
    return rc;
}
