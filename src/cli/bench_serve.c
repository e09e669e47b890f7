/* `cllm bench serve`: load on an OpenAI-compatible server (cllm's, vLLM's,
 * llama.cpp's) the way vLLM's benchmark_serving applies it, and the same
 * report. The steps: ask the server for its model and tokenizer, build the
 * dataset, draw the arrival times, run (bench/serve_http.c), summarize
 * (bench/serve_stats.c), save and plot. Also `cllm bench plot DIR FILE...`,
 * which charts saved results side by side. See bench_serve.h for the files. */
#include "bench/serve.h"
#include "cli/cli_common.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *base_url, *endpoint, *model, *api_key, *label;
    const char *save_result, *save_dataset, *plot_dir;
    long seed, max_concurrency, vocab_size, timeout_s, num_warmups;
    double request_rate, temperature;
    bool progress, dry_run;
    json_t *extra_body;
    bench_dataset_opts ds;
    char base_buf[1024];
} serve_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: cllm bench serve [options]         load an OpenAI-compatible server, report like vLLM\n"
            "       cllm bench plot DIR RESULT.json... charts of saved results (needs gnuplot)\n"
            "server:\n"
            "  --base-url URL             (default http://127.0.0.1:8000; or --host H --port P)\n"
            "  --endpoint PATH            /v1/completions (default) or /v1/chat/completions\n"
            "  --model NAME               (default: the first of GET /v1/models)\n"
            "  --api-key KEY              sent as a bearer token (default $OPENAI_API_KEY)\n"
            "load:\n"
            "  --num-prompts N            requests (default 100; jsonl: every line)\n"
            "  --request-rate R|inf       Poisson arrivals of R requests/s (default inf: all at once)\n"
            "  --max-concurrency N        at most N requests in flight (default: no limit)\n"
            "  --seed S                   seeds the dataset and the arrivals (default 0)\n"
            "  --temperature T            (default 0); every request streams, with ignore_eos\n"
            "  --extra-body JSON          fields merged into every request body\n"
            "  --timeout S                per-request limit in seconds (default none)\n"
            "  --num-warmups N            first send the first N prompts, unmeasured (default 0)\n"
            "dataset (--dataset-name random | prefix-repetition | jsonl; default random):\n"
            "  --random-input-len N       prompt tokens (default 1024)\n"
            "  --random-output-len N      max_tokens (default 128; also --output-len)\n"
            "  --random-range-ratio R     lengths uniform in len*(1-R)..len*(1+R) (default 0)\n"
            "  --prefix-len N --suffix-len N --num-prefixes N   prefix-repetition (256, 256, 10)\n"
            "  --dataset-path FILE        jsonl: {\"prompt\": ...} or {\"messages\": [...]} per line,\n"
            "                             optional \"max_tokens\"\n"
            "  --vocab-size N             for random token ids when the server does not say\n"
            "output:\n"
            "  --save-result FILE.json    summary (vLLM's field names) and per-request arrays\n"
            "  --save-dataset FILE.jsonl  the prompts sent, as a jsonl dataset\n"
            "  --dry-run                  build (and save) the dataset, send nothing\n"
            "  --plot DIR                 latency charts (PNG, gnuplot)\n"
            "  --label NAME               names the run in results and charts\n"
            "  --no-progress              no progress bar on stderr\n");
}

static int parse(int argc, char **argv, serve_opts *o) {
    *o = (serve_opts){.base_url = "http://127.0.0.1:8000", .endpoint = "/v1/completions", .request_rate = INFINITY,
                      .progress = true,
                      .ds = {.name = "random", .num_prompts = 100, .input_len = 1024, .output_len = 128,
                             .prefix_len = 256, .suffix_len = 256, .num_prefixes = 10}};
    o->api_key = getenv("OPENAI_API_KEY");
    const char *C = "bench serve", *host = NULL, *port = NULL;
    bool num_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--no-progress") || !strcmp(a, "--disable-tqdm")) {
            o->progress = false;
            continue;
        }
        if (!strcmp(a, "--dry-run")) {
            o->dry_run = true;
            continue;
        }
        if (!(v = arg_value(C, argc, argv, &i))) return -1;
        if (!strcmp(a, "--base-url")) o->base_url = v;
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--port")) port = v;
        else if (!strcmp(a, "--endpoint")) o->endpoint = v;
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--api-key")) o->api_key = v;
        else if (!strcmp(a, "--label")) o->label = v;
        else if (!strcmp(a, "--save-result")) o->save_result = v;
        else if (!strcmp(a, "--save-dataset")) o->save_dataset = v;
        else if (!strcmp(a, "--plot")) o->plot_dir = v;
        else if (!strcmp(a, "--dataset-name") || !strcmp(a, "--dataset")) o->ds.name = v;
        else if (!strcmp(a, "--dataset-path")) o->ds.path = v;
        else if (!strcmp(a, "--num-prompts")) {
            if (arg_int(C, a, v, 1, 1 << 24, &o->ds.num_prompts)) return -1;
            num_given = true;
        } else if (!strcmp(a, "--request-rate")) {
            if (!strcmp(v, "inf")) o->request_rate = INFINITY;
            else if (arg_float(C, a, v, 1e-6, 1e9, &o->request_rate)) return -1;
        } else if (!strcmp(a, "--max-concurrency")) {
            if (arg_int(C, a, v, 1, 1 << 20, &o->max_concurrency)) return -1;
        } else if (!strcmp(a, "--seed")) {
            if (arg_int(C, a, v, 0, 1L << 62, &o->seed)) return -1;
        } else if (!strcmp(a, "--temperature")) {
            if (arg_float(C, a, v, 0, 2, &o->temperature)) return -1;
        } else if (!strcmp(a, "--num-warmups")) {
            if (arg_int(C, a, v, 0, 1 << 20, &o->num_warmups)) return -1;
        } else if (!strcmp(a, "--timeout")) {
            if (arg_int(C, a, v, 0, 1 << 24, &o->timeout_s)) return -1;
        } else if (!strcmp(a, "--vocab-size")) {
            if (arg_int(C, a, v, 2, 1 << 30, &o->vocab_size)) return -1;
        } else if (!strcmp(a, "--random-input-len") || !strcmp(a, "--input-len")) {
            if (arg_int(C, a, v, 1, 1 << 24, &o->ds.input_len)) return -1;
        } else if (!strcmp(a, "--random-output-len") || !strcmp(a, "--output-len")) {
            if (arg_int(C, a, v, 1, 1 << 24, &o->ds.output_len)) return -1;
        } else if (!strcmp(a, "--random-range-ratio")) {
            if (arg_float(C, a, v, 0, 0.999, &o->ds.range_ratio)) return -1;
        } else if (!strcmp(a, "--prefix-len")) {
            if (arg_int(C, a, v, 1, 1 << 24, &o->ds.prefix_len)) return -1;
        } else if (!strcmp(a, "--suffix-len")) {
            if (arg_int(C, a, v, 1, 1 << 24, &o->ds.suffix_len)) return -1;
        } else if (!strcmp(a, "--num-prefixes")) {
            if (arg_int(C, a, v, 1, 1 << 20, &o->ds.num_prefixes)) return -1;
        } else if (!strcmp(a, "--extra-body")) {
            json_error_t je;
            json_decref(o->extra_body);
            o->extra_body = json_loads(v, 0, &je);
            if (!json_is_object(o->extra_body)) {
                fprintf(stderr, "cllm %s: --extra-body expects a JSON object, got '%s'\n", C, v);
                return -1;
            }
        } else {
            fprintf(stderr, "cllm %s: unknown option '%s'\n", C, a);
            return -1;
        }
    }
    if (host || port) {
        snprintf(o->base_buf, sizeof o->base_buf, "http://%s:%s", host ? host : "127.0.0.1", port ? port : "8000");
        o->base_url = o->base_buf;
    } else {
        /* No trailing slash: paths are appended. */
        snprintf(o->base_buf, sizeof o->base_buf, "%s", o->base_url);
        size_t l = strlen(o->base_buf);
        while (l > 0 && o->base_buf[l - 1] == '/') o->base_buf[--l] = 0;
        o->base_url = o->base_buf;
    }
    if (strcmp(o->endpoint, "/v1/completions") && strcmp(o->endpoint, "/v1/chat/completions")) {
        fprintf(stderr, "cllm %s: --endpoint must be /v1/completions or /v1/chat/completions, got '%s'\n", C,
                o->endpoint);
        return -1;
    }
    o->ds.chat = !strcmp(o->endpoint, "/v1/chat/completions");
    if (!strcmp(o->ds.name, "jsonl") && !num_given) o->ds.num_prompts = 0;
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

static int plot_files(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: cllm bench plot DIR RESULT.json [RESULT.json ...]\n");
        return 1;
    }
    const int n = argc - 2;
    json_t **res = calloc((size_t)n, sizeof *res);
    int rc = res ? 0 : 1;
    for (int i = 0; !rc && i < n; i++) {
        json_error_t je;
        res[i] = json_load_file(argv[i + 2], 0, &je);
        if (!json_is_object(res[i]) || !json_is_array(json_object_get(res[i], "ttfts"))) {
            fprintf(stderr, "cllm bench plot: %s is not a result of `cllm bench serve --save-result`%s%s\n",
                    argv[i + 2], res[i] ? "" : ": ", res[i] ? "" : je.text);
            rc = 1;
        }
    }
    if (!rc) rc = bench_plot(argv[1], res, n) ? 1 : 0;
    for (int i = 0; res && i < n; i++) json_decref(res[i]);
    free(res);
    return rc;
}

static int run(serve_opts *o) {
    char *model_buf = NULL;
    const char *model = o->model;
    if (!model) {
        model = model_buf = bench_first_model(o->base_url, o->api_key);
        if (!model)
            fprintf(stderr, "cllm bench serve: %s/v1/models did not answer; requests go without a model name\n",
                    o->base_url);
    }
    bench_tok tok = {0};
    const char *source = "jsonl file";
    if (strcmp(o->ds.name, "jsonl")) {
        bench_tok_open(&tok, o->base_url, o->api_key, model, o->vocab_size);
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
    const bench_run_opts ro = {.url = url, .api_key = o->api_key, .model = model, .chat = o->ds.chat,
                               .max_concurrency = (int)o->max_concurrency, .temperature = o->temperature,
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
    if (!rc) {
        bench_print_report(stdout, &s, o->label);
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
    if (parse(argc, argv, &o)) {
        json_decref(o.extra_body);
        return 1;
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
