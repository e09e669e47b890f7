/* `cllm bench serve`: load on an OpenAI-compatible server (cllm's, vLLM's,
 * llama.cpp's) the way vLLM's benchmark_serving applies it, and the same
 * report. The steps: ask the server for its model and tokenizer, build the
 * dataset, draw the arrival times, run (bench/serve_http.c), summarize
 * (bench/serve_stats.c), save and plot. Also `cllm bench plot DIR FILE...`,
 * which charts saved results side by side. See bench_serve.h for the files. */
#include "loadgen/serve.h"
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "format/json_file.h"
#include "util/error.h"

#include <curl/curl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    cli_server_settings server;     /* --host, --port, --api-key: the server to load */
    cli_sampling_settings sampling; /* --temperature */
    const char *base_url, *endpoint, *model, *label;
    const char *save_result, *save_dataset, *plot_dir;
    long seed, max_concurrency, vocab_size, timeout_s, num_warmups;
    double request_rate;
    bool progress, dry_run;
    json_t *extra_body;
    bench_dataset_opts ds;
    char base_buf[1024];
} serve_opts;

/* A positive number of requests per second, or "inf" (all at once). */
static int parse_request_rate(const char *flag, const char *value, void *setting) {
    char *end;
    const double v = strtod(value, &end);
    if (!strcmp(value, "inf")) *(double *)setting = INFINITY;
    else if (end != value && !*end && v >= 1e-6 && v <= 1e9) *(double *)setting = v;
    else return err_set("%s expects requests per second in [1e-06, 1e+09] or 'inf', got '%s'", flag, value);
    return 0;
}

static json_t *request_rate_json(const void *setting) {
    const double v = *(const double *)setting;
    return isinf(v) ? json_string("inf") : json_real(v);
}

static int parse_extra_body(const char *flag, const char *value, void *setting) {
    json_error_t je;
    json_t *body = json_loads(value, 0, &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return err_set("%s expects a JSON object, got '%s'", flag, value);
    }
    json_decref(*(json_t **)setting);
    *(json_t **)setting = body;
    return 0;
}

static json_t *extra_body_json(const void *setting) { return json_incref(*(json_t *const *)setting); }

static const cli_option k_server_options[] = {
    {.name = "--base-url", .kind = CLI_STRING, .offset = offsetof(serve_opts, base_url), .metavar = "URL",
     .help = "the server (or give --host and --port)"},
    {.name = "--endpoint", .kind = CLI_STRING, .offset = offsetof(serve_opts, endpoint), .metavar = "PATH",
     .help = "/v1/completions or /v1/chat/completions"},
    {.name = "--model", .aliases = "-m", .kind = CLI_STRING, .offset = offsetof(serve_opts, model), .metavar = "NAME",
     .help = "the model name sent in requests", .default_text = "the first of GET /v1/models"},
    {0}};

static const cli_option k_load_options[] = {
    {.name = "--num-prompts", .kind = CLI_INT, .offset = offsetof(serve_opts, ds.num_prompts), .metavar = "N",
     .min = 1, .max = 1 << 24, .help = "requests", .default_text = "100; jsonl: every line"},
    {.name = "--request-rate", .kind = CLI_CUSTOM, .offset = offsetof(serve_opts, request_rate), .metavar = "R|inf",
     .help = "Poisson arrivals of R requests/s; inf sends all at once", .parse = parse_request_rate,
     .to_json = request_rate_json},
    {.name = "--max-concurrency", .kind = CLI_INT, .offset = offsetof(serve_opts, max_concurrency), .metavar = "N",
     .min = 1, .max = 1 << 20, .help = "at most N requests in flight", .default_text = "no limit"},
    {.name = "--seed", .aliases = "-s", .kind = CLI_INT, .offset = offsetof(serve_opts, seed), .metavar = "S", .min = 0,
     .max = (double)(1L << 62), .help = "seeds the dataset and the arrival times"},
    {.name = "--extra-body", .kind = CLI_CUSTOM, .offset = offsetof(serve_opts, extra_body), .metavar = "JSON",
     .help = "fields merged into every request body", .parse = parse_extra_body, .to_json = extra_body_json},
    {.name = "--timeout", .kind = CLI_INT, .offset = offsetof(serve_opts, timeout_s), .metavar = "SECONDS",
     .min = 0, .max = 1 << 24, .help = "per-request time limit; 0 = none"},
    {.name = "--num-warmups", .kind = CLI_INT, .offset = offsetof(serve_opts, num_warmups), .metavar = "N",
     .min = 0, .max = 1 << 20, .help = "first send the first N prompts one by one, unmeasured"},
    {0}};

static const cli_option k_dataset_options[] = {
    {.name = "--dataset-name", .aliases = "--dataset", .kind = CLI_STRING, .offset = offsetof(serve_opts, ds.name),
     .metavar = "NAME", .help = "random, prefix-repetition or jsonl"},
    {.name = "--random-input-len", .aliases = "--input-len", .kind = CLI_INT,
     .offset = offsetof(serve_opts, ds.input_len), .metavar = "N", .min = 1, .max = 1 << 24, .help = "prompt tokens"},
    {.name = "--random-output-len", .aliases = "--output-len", .kind = CLI_INT,
     .offset = offsetof(serve_opts, ds.output_len), .metavar = "N", .min = 1, .max = 1 << 24,
     .help = "max_tokens of each request"},
    {.name = "--random-range-ratio", .aliases = "--range-ratio", .kind = CLI_FLOAT,
     .offset = offsetof(serve_opts, ds.range_ratio), .metavar = "R", .min = 0, .max = 0.999,
     .help = "lengths uniform in len*(1-R)..len*(1+R)"},
    {.name = "--prefix-len", .kind = CLI_INT, .offset = offsetof(serve_opts, ds.prefix_len), .metavar = "N",
     .min = 1, .max = 1 << 24, .help = "prefix-repetition: tokens of each shared prefix"},
    {.name = "--suffix-len", .kind = CLI_INT, .offset = offsetof(serve_opts, ds.suffix_len), .metavar = "N",
     .min = 1, .max = 1 << 24, .help = "prefix-repetition: tokens after the prefix"},
    {.name = "--num-prefixes", .kind = CLI_INT, .offset = offsetof(serve_opts, ds.num_prefixes), .metavar = "N",
     .min = 1, .max = 1 << 20, .help = "prefix-repetition: distinct prefixes"},
    {.name = "--dataset-path", .kind = CLI_STRING, .offset = offsetof(serve_opts, ds.path), .metavar = "FILE",
     .help = "jsonl: one {\"prompt\": ...} or {\"messages\": [...]} per line, optionally with \"max_tokens\""},
    {.name = "--vocab-size", .kind = CLI_INT, .offset = offsetof(serve_opts, vocab_size), .metavar = "N", .min = 2,
     .max = 1 << 30, .help = "for random token ids when the server does not say"},
    {0}};

static const cli_option k_output_options[] = {
    {.name = "--save-result", .kind = CLI_STRING, .offset = offsetof(serve_opts, save_result), .metavar = "FILE.json",
     .help = "the summary (vLLM's field names) and per-request arrays"},
    {.name = "--save-dataset", .kind = CLI_STRING, .offset = offsetof(serve_opts, save_dataset),
     .metavar = "FILE.jsonl", .help = "the prompts sent, as a jsonl dataset"},
    {.name = "--dry-run", .kind = CLI_FLAG, .offset = offsetof(serve_opts, dry_run),
     .help = "build (and save) the dataset, send nothing"},
    {.name = "--plot", .kind = CLI_STRING, .offset = offsetof(serve_opts, plot_dir), .metavar = "DIR",
     .help = "latency charts (PNG, with gnuplot)"},
    {.name = "--label", .kind = CLI_STRING, .offset = offsetof(serve_opts, label), .metavar = "NAME",
     .help = "names the run in results and charts"},
    {.name = "--no-progress", .aliases = "--disable-tqdm", .kind = CLI_FLAG_OFF,
     .offset = offsetof(serve_opts, progress), .help = "no progress bar on stderr"},
    {0}};

static const cli_section k_serve_sections[] = {
    {.group = &(const cli_group){"server to load", k_server_options}},
    {.group = &cli_server_group,
     .title = "server to load",
     .offset = offsetof(serve_opts, server),
     .only = "--host --port --api-key",
     .overrides = (const cli_override[]){
         {.name = "--host", .help = "the server's address (instead of --base-url)", .default_text = "127.0.0.1"},
         {.name = "--port", .help = "the server's port (instead of --base-url)", .default_text = "8000"},
         {.name = "--api-key", .help = "sent as a bearer token", .default_text = "$OPENAI_API_KEY"},
         {0}}},
    {.group = &(const cli_group){"load", k_load_options}},
    {.group = &cli_sampling_group,
     .title = "load",
     .offset = offsetof(serve_opts, sampling),
     .only = "--temperature",
     .overrides = (const cli_override[]){
         {.name = "--temperature", .help = "of every request; every request streams, with ignore_eos", .min = 0,
          .max = 2},
         {0}}},
    {.group = &(const cli_group){"dataset", k_dataset_options}},
    {.group = &(const cli_group){"output", k_output_options}},
    {0}};

static const cli_command k_bench_serve = {
    .name = "bench serve",
    .synopsis = "[options]",
    .about = "Load an OpenAI-compatible server (cllm's, vLLM's, llama.cpp's) the way vLLM's benchmark_serving "
             "does, and report the same figures: throughput, time to first token, time per output token, "
             "inter-token latency, end-to-end latency.",
    .sections = k_serve_sections,
};

/* The base URL without a trailing slash (paths are appended), from --host and
 * --port when either is given. */
static void set_base_url(serve_opts *o) {
    if (o->server.host || o->server.port >= 0) {
        snprintf(o->base_buf, sizeof o->base_buf, "http://%s:%ld", o->server.host ? o->server.host : "127.0.0.1",
                 o->server.port >= 0 ? o->server.port : 8000);
    } else {
        snprintf(o->base_buf, sizeof o->base_buf, "%s", o->base_url);
        size_t l = strlen(o->base_buf);
        while (l > 0 && o->base_buf[l - 1] == '/') o->base_buf[--l] = 0;
    }
    o->base_url = o->base_buf;
}

static int parse(int argc, char **argv, serve_opts *o) {
    *o = (serve_opts){.server = {.port = -1, .api_key = getenv("OPENAI_API_KEY")},
                      .base_url = "http://127.0.0.1:8000", .endpoint = "/v1/completions", .request_rate = INFINITY,
                      .progress = true,
                      .ds = {.name = "random", .input_len = 1024, .output_len = 128, .prefix_len = 256,
                             .suffix_len = 256, .num_prefixes = 10}};
    const int rc = cli_parse(&k_bench_serve, argc, argv, o);
    if (rc) return rc;
    if (!o->ds.num_prompts && strcmp(o->ds.name, "jsonl")) o->ds.num_prompts = 100; /* jsonl: every line */
    set_base_url(o);
    if (strcmp(o->endpoint, "/v1/completions") && strcmp(o->endpoint, "/v1/chat/completions")) {
        fprintf(stderr, "cllm bench serve: --endpoint must be /v1/completions or /v1/chat/completions, got '%s'\n",
                o->endpoint);
        return -1;
    }
    o->ds.chat = !strcmp(o->endpoint, "/v1/chat/completions");
    return 0;
}

static void set_config(json_t *j, const serve_opts *o, const char *model, const char *prompt_source) {
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
    json_object_set_new(j, "date", json_string(date));
    json_object_set_new(j, "backend", json_string("openai"));
    json_object_set_new(j, "label", json_string(o->label ? o->label : ""));
    json_object_set_new(j, "base_url", json_string(o->base_url));
    json_object_set_new(j, "endpoint", json_string(o->endpoint));
    json_object_set_new(j, "model_id", json_string(model ? model : ""));
    json_object_set_new(j, "dataset_name", json_string(o->ds.name));
    json_object_set_new(j, "prompt_source", json_string(prompt_source));
    json_object_set_new(j, "num_prompts", json_integer(json_array_size(json_object_get(j, "ttfts"))));
    json_object_set_new(j, "request_rate", isinf(o->request_rate) ? json_string("inf") : json_real(o->request_rate));
    json_object_set_new(j, "max_concurrency", o->max_concurrency ? json_integer(o->max_concurrency) : json_null());
    json_object_set_new(j, "seed", json_integer(o->seed));
    json_object_set_new(j, "random_input_len", json_integer(o->ds.input_len));
    json_object_set_new(j, "random_output_len", json_integer(o->ds.output_len));
    json_object_set_new(j, "random_range_ratio", json_real(o->ds.range_ratio));
}

typedef struct {
    const char *dir;
    cli_list results;
} plot_opts;

static const cli_command k_bench_plot = {
    .name = "bench plot",
    .synopsis = "DIR RESULT.json [RESULT.json ...]",
    .about = "Charts (PNG, with gnuplot) of results saved by `cllm bench serve --save-result`, side by side, "
             "written to DIR.",
    .sections = (const cli_section[]){{0}},
    .positionals = (const cli_positional[]){{.metavar = "DIR", .offset = offsetof(plot_opts, dir), .required = true},
                                            {.metavar = "RESULT.json", .offset = offsetof(plot_opts, results),
                                             .required = true, .list = true},
                                            {0}},
};

static int plot_files(int argc, char **argv) {
    plot_opts o = {0};
    const int parsed = cli_parse(&k_bench_plot, argc, argv, &o);
    if (parsed) {
        cli_free(&k_bench_plot, &o);
        return parsed < 0 ? 1 : 0;
    }
    const int n = o.results.n;
    json_t **res = calloc((size_t)n, sizeof *res);
    int rc = res ? 0 : 1;
    for (int i = 0; !rc && i < n; i++) {
        res[i] = json_file_load(o.results.items[i], 0, NULL);
        if (!json_is_object(res[i]) || !json_is_array(json_object_get(res[i], "ttfts"))) {
            fprintf(stderr, "cllm bench plot: %s is not a result of `cllm bench serve --save-result`%s%s\n",
                    o.results.items[i], res[i] ? "" : ": ", res[i] ? "" : err_get());
            rc = 1;
        }
    }
    if (!rc) rc = bench_plot(o.dir, res, n) ? 1 : 0;
    for (int i = 0; res && i < n; i++) json_decref(res[i]);
    free(res);
    cli_free(&k_bench_plot, &o);
    return rc;
}

static int run(serve_opts *o) {
    char *model_buf = NULL;
    const char *model = o->model;
    if (!model) {
        model = model_buf = bench_first_model(o->base_url, o->server.api_key);
        if (!model)
            fprintf(stderr, "cllm bench serve: %s/v1/models did not answer; requests go without a model name\n",
                    o->base_url);
    }
    bench_tok tok = {0};
    const char *source = "jsonl file";
    if (strcmp(o->ds.name, "jsonl")) {
        bench_tok_open(&tok, o->base_url, o->server.api_key, model, o->vocab_size);
        if (tok.style == TOK_NONE) source = "word list (the server has no /tokenize and /detokenize)";
        else if (tok.n_vocab > 0) source = "random token ids through the server's /tokenize and /detokenize";
        else source = "word list, lengths fitted through the server's /tokenize and /detokenize";
        fprintf(stderr, "cllm bench serve: prompts from a %s%s", source, tok.n_vocab ? "" : "\n");
        if (tok.n_vocab) fprintf(stderr, " (vocabulary of %ld)\n", tok.n_vocab);
    }
    bench_rng rng;
    rng_seed(&rng, (uint64_t)o->seed);
    bench_item *items = NULL;
    const int n = bench_dataset_build(&o->ds, &tok, &rng, &items);
    bench_tok_close(&tok);
    if (n < 0) {
        free(model_buf);
        return 1;
    }
    int rc = 0;
    if (o->save_dataset && bench_dataset_save(o->save_dataset, items, n)) rc = 1;
    if (o->dry_run) {
        fprintf(stderr, "cllm bench serve: %d prompts built%s%s; nothing sent (--dry-run)\n", n,
                o->save_dataset ? " and saved to " : "", o->save_dataset ? o->save_dataset : "");
        bench_items_free(items, n);
        free(model_buf);
        return rc;
    }
    double *arrivals = malloc((size_t)(n + 1) * sizeof *arrivals);
    bench_stream *streams = calloc((size_t)(n + 1), sizeof *streams);
    bench_req *reqs = calloc((size_t)(n + 1), sizeof *reqs);
    if (!arrivals || !streams || !reqs) rc = 1;
    bench_rng arr_rng;
    rng_seed(&arr_rng, (uint64_t)o->seed ^ 0x5eedA77173A15ull); /* arrivals do not shift with the dataset */
    if (!rc) bench_arrivals(&arr_rng, o->request_rate, n, arrivals);

    char url[2048];
    snprintf(url, sizeof url, "%s%s", o->base_url, o->endpoint);
    const bench_run_opts ro = {.url = url, .api_key = o->server.api_key, .model = model, .chat = o->ds.chat,
                               .max_concurrency = (int)o->max_concurrency, .temperature = o->sampling.temperature,
                               .extra_body = o->extra_body, .timeout_s = o->timeout_s, .progress = o->progress};
    double duration = 0;
    if (!rc && o->num_warmups > 0) {
        /* Warm-up: the first prompts one after another, results dropped. */
        const int nw = o->num_warmups < n ? (int)o->num_warmups : n;
        bench_run_opts wo = ro;
        wo.max_concurrency = 1;
        wo.progress = false;
        fprintf(stderr, "cllm bench serve: %d warm-up request%s\n", nw, nw == 1 ? "" : "s");
        const double zero[1] = {0};
        for (int i = 0; i < nw && !rc; i++) {
            bench_stream ws;
            double wd;
            if (bench_run(&wo, &items[i], 1, zero, &ws, &wd)) rc = 1;
            else if (!bench_stream_ok(&ws))
                fprintf(stderr, "cllm bench serve: warm-up request failed: %s\n", ws.error ? ws.error : "?");
            bench_stream_free(&ws);
        }
    }
    /* Speculative decoding's counters around the run, when the server has them. */
    bench_spec_counters spec0 = {0}, spec1 = {0};
    bool spec_ok = !rc && bench_read_spec_counters(o->base_url, o->server.api_key, &spec0) == 0;
    if (!rc) {
        fprintf(stderr, "cllm bench serve: %d requests to %s, rate %s, concurrency %s\n", n, url,
                isinf(o->request_rate) ? "inf" : "Poisson", o->max_concurrency ? "limited" : "unlimited");
        if (bench_run(&ro, items, n, arrivals, streams, &duration)) {
            fprintf(stderr, "cllm bench serve: libcurl could not start\n");
            rc = 1;
        }
    }
    bench_summary s;
    if (!rc) {
        for (int i = 0; i < n; i++) {
            const bench_stream *st = &streams[i];
            bench_req *r = &reqs[i];
            r->ok = bench_stream_ok(st);
            r->error = st->error;
            r->start = st->t_start;
            r->e2el = st->t_end - st->t_start;
            r->ttft = st->n_text_chunks ? st->t_first - st->t_start : 0;
            r->itl = st->itl;
            r->n_itl = st->n_itl;
            r->input_tokens = st->prompt_tokens >= 0 ? st->prompt_tokens : items[i].input_len;
            /* Without usage, one chunk of text is taken for one token. */
            r->output_tokens = st->completion_tokens >= 0 ? st->completion_tokens : st->n_text_chunks;
        }
        if (bench_summarize(reqs, n, duration, &s)) rc = 1;
    }
    spec_ok = spec_ok && !rc && bench_read_spec_counters(o->base_url, o->server.api_key, &spec1) == 0;
    const double d_drafts = spec1.drafts - spec0.drafts, d_tokens = spec1.draft_tokens - spec0.draft_tokens,
                 d_accepted = spec1.accepted_tokens - spec0.accepted_tokens;
    spec_ok = spec_ok && d_drafts > 0 && d_tokens > 0;
    if (!rc) {
        bench_print_report(stdout, &s, o->label);
        if (spec_ok)
            printf("%-40s %.0f / %.0f / %.0f\n%-40s %.2f\n%-40s %.2f\n", "Spec drafts / draft / accepted tokens:",
                   d_drafts, d_tokens, d_accepted, "Spec acceptance rate (%):", 100 * d_accepted / d_tokens,
                   "Spec mean accepted length:", 1 + d_accepted / d_drafts);
        /* The first few distinct failure reasons, so a failing run explains itself. */
        int shown = 0;
        for (int i = 0; i < n && shown < 3; i++) {
            if (reqs[i].ok) continue;
            bool seen = false;
            for (int k = 0; k < i && !seen; k++) seen = !reqs[k].ok && reqs[k].error && reqs[i].error &&
                                                         !strcmp(reqs[k].error, reqs[i].error);
            if (seen) continue;
            fprintf(stderr, "cllm bench serve: request %d failed: %s\n", i, reqs[i].error ? reqs[i].error : "?");
            shown++;
        }
        json_t *j = bench_result_json(&s, reqs, n);
        set_config(j, o, model, source);
        if (spec_ok) {
            json_object_set_new(j, "spec_decode_acceptance_rate", json_real(d_accepted / d_tokens));
            json_object_set_new(j, "spec_decode_mean_accepted_length", json_real(1 + d_accepted / d_drafts));
        }
        if (o->save_result && json_dump_file(j, o->save_result, JSON_INDENT(2))) {
            fprintf(stderr, "cllm bench serve: cannot write '%s'\n", o->save_result);
            rc = 1;
        }
        if (o->plot_dir && bench_plot(o->plot_dir, &j, 1)) rc = 1;
        json_decref(j);
        if (s.completed == 0) rc = 1;
    }
    for (int i = 0; streams && i < n; i++) bench_stream_free(&streams[i]);
    free(streams);
    free(reqs);
    free(arrivals);
    bench_items_free(items, n);
    free(model_buf);
    return rc;
}

int bench_serve(int argc, char **argv) {
    if (!strcmp(argv[0], "plot")) return plot_files(argc, argv);
    serve_opts o;
    const int parsed = parse(argc, argv, &o);
    if (parsed) {
        json_decref(o.extra_body);
        return parsed < 0 ? 1 : 0;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
        fprintf(stderr, "cllm bench serve: libcurl failed to initialize\n");
        return 1;
    }
    const int rc = run(&o);
    json_decref(o.extra_body);
    curl_global_cleanup();
    return rc;
}
