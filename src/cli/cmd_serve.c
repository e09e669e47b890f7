/* `cllm serve MODEL`: the OpenAI-compatible HTTP server (src/server/). Order
 * of events: listen first (so /health can say 503 while loading), load the
 * model, pick the chat template, create and start the engine (it refuses,
 * with the numbers, a KV budget that cannot hold one --max-model-len request),
 * print how to call it, then wait for SIGTERM/SIGINT. On a signal: stop
 * accepting, give running requests --shutdown-timeout seconds, abort the rest,
 * free everything and exit 0 (at once, freeing nothing, when a request is
 * still busy a moment after the abort). A second signal skips the grace
 * period. */
#include "chat/template.h"
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/cli_parallel.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mem_size.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine;
    cli_server_settings server;
    cli_spec_settings spec;
    cli_parallel_settings parallel;
    spec_config sc; /* from spec, once parsed */
    char *key_from_file; /* --api-key-file's key (owned); server.api_key then points here */
    cors_config cors;    /* from --allowed-origins, --allowed-methods, --allowed-headers */
} serve_options;

static void serve_options_free(serve_options *o) {
    free(o->key_from_file);
    cors_config_free(&o->cors);
}

static const cli_section k_serve_sections[] = {
    {.group = &cli_model_group, .offset = offsetof(serve_options, model)},
    {.group = &cli_engine_group,
     .offset = offsetof(serve_options, engine),
     .overrides = (const cli_override[]){
         {.name = "--max-model-len", .help = "prompt + output tokens per request",
          .default_text = "the model's trained context, at most 8192"},
         {.name = "--kv-cache-memory", .default_text = "1GiB, at most a quarter of the memory free now"},
         {0}}},
    {.group = &cli_server_group, .offset = offsetof(serve_options, server)},
    {.group = &cli_spec_group, .offset = offsetof(serve_options, spec)},
    {.group = &cli_parallel_group, .offset = offsetof(serve_options, parallel)},
    {0}};

static const cli_command k_serve = {
    .name = "serve",
    .synopsis = "MODEL [options]",
    .about = "An OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, /tokenize, "
             "/detokenize, /health, /metrics) over the continuous-batching engine. MODEL is a GGUF file or a Hugging "
             "Face folder. It listens first (/health answers 503 while the model loads), refuses at start, with "
             "the numbers, a KV cache that cannot hold one --max-model-len request, and on SIGTERM or SIGINT lets "
             "running requests finish for --shutdown-timeout seconds; a second signal skips the wait.",
    .sections = k_serve_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "MODEL", .offset = offsetof(serve_options, model.path), .required = true}, {0}},
};

static int parse_options(int argc, char **argv, serve_options *o) {
    *o = (serve_options){.engine = cli_engine_defaults(), .server = cli_server_defaults(),
                         .parallel = {.tensor_parallel_size = 1}};
    o->engine.max_model_len = 0;
    o->engine.kv_cache_memory = 0;
    /* The key's sources, weakest first: $VLLM_API_KEY (vLLM's), $CLLM_API_KEY,
     * then --api-key or --api-key-file (not both). */
    const char *env_key = getenv("CLLM_API_KEY");
    if (!env_key || !*env_key) env_key = getenv("VLLM_API_KEY");
    o->server.api_key = env_key;
    const int rc = cli_parse(&k_serve, argc, argv, o);
    if (rc) return rc;
    if (cli_spec_config(&o->spec, &o->sc)) return cli_usage_error(&k_serve, "%s", err_get());
    if (o->server.api_key_file) {
        if (o->server.api_key != env_key)
            return cli_usage_error(&k_serve, "give --api-key or --api-key-file, not both");
        if (!(o->key_from_file = auth_key_from_file(o->server.api_key_file)))
            return cli_usage_error(&k_serve, "--api-key-file: %s", err_get());
        o->server.api_key = o->key_from_file;
    }
    if (cors_config_parse(&o->cors, o->server.allowed_origins, o->server.allowed_methods, o->server.allowed_headers))
        return cli_usage_error(&k_serve, "%s", err_get());
    if (o->server.metrics_require_api_key && !(o->server.api_key && *o->server.api_key))
        return cli_usage_error(&k_serve,
                               "--metrics-require-api-key needs a key (--api-key, --api-key-file or $CLLM_API_KEY)");
    return 0;
}

/* "models/gemma-3-270m.gguf" -> "gemma-3-270m" */
static char *default_served_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b && b[1] ? b + 1 : path;
    char *s = strdup(b);
    if (!s) return NULL;
    const size_t n = strlen(s);
    if (n > 5 && !strcmp(s + n - 5, ".gguf")) s[n - 5] = 0;
    return s;
}

static double now_s(void) { return now_seconds(); }

/* Waits for a signal for up to `seconds` (< 0: forever). Returns the signal or 0. */
static int wait_signal(const sigset_t *set, double seconds) {
    if (seconds < 0) {
        int sig = 0;
        sigwait(set, &sig);
        return sig;
    }
    struct timespec ts = {.tv_sec = (time_t)seconds, .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    const int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/* Requests the HTTP side still holds: generations, and handler threads
 * (a request being tokenized is not a generation yet). */
static int in_flight(server *s) { return atomic_load(&s->n_active) + server_handling(s); }

/* Waits until nothing is in flight, the deadline passes, or (hurry) a second
 * signal comes. Returns whether a second signal came. */
static bool wait_idle(server *s, const sigset_t *set, double deadline, bool hurry) {
    while (in_flight(s) > 0 && now_s() < deadline)
        if (wait_signal(set, 0.02) && hurry) return true;
    return false;
}

/* After the grace period, aborted requests get a short while to tell their
 * clients (a 503 body, or the stream's error event and [DONE]). */
#define ABORT_FLUSH_S 2.0

/* Returns only when everything could be stopped cleanly; otherwise (a handler
 * still tokenizing a huge prompt, a stream whose client does not read) the
 * process exits at once: the deadline covers every stage of a request. */
static void shutdown_server(server *s, engine *e, const sigset_t *set, double grace) {
    server_drain(s);
    int active = in_flight(s);
    fprintf(stderr, "cllm serve: shutting down; %d request%s in flight, waiting up to %g s\n", active,
            active == 1 ? "" : "s", grace);
    wait_idle(s, set, now_s() + grace, true);
    active = in_flight(s);
    if (active > 0) {
        fprintf(stderr, "cllm serve: aborting %d request%s\n", active, active == 1 ? "" : "s");
        engine_abort_all(e);
        wait_idle(s, set, now_s() + ABORT_FLUSH_S, false);
        active = in_flight(s);
        if (active > 0) {
            fprintf(stderr,
                    "cllm serve: %d request%s still busy (tokenizing, or a client not reading); exiting without "
                    "them\ncllm serve: stopped\n",
                    active, active == 1 ? "" : "s");
            fflush(stderr);
            _exit(0);
        }
    }
    server_stop(s);
    /* Requests whose client vanished may still be in the engine: end them so
     * their callbacks run before the engine is freed. */
    engine_abort_all(e);
    const double hard = now_s() + 30;
    while (engine_has_work(e) && now_s() < hard) wait_signal(set, 0.01);
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The engine's configuration: the settings, with --max-model-len checked
 * against the model and the defaults that depend on it and on free memory. */
static int engine_config_for(const serve_options *o, const model *m, engine_config *cfg) {
    *cfg = cli_engine_config(&o->engine);
    cfg->spec = o->sc;
    const long trained = m->hp.n_ctx_train;
    if (o->engine.max_model_len > trained) {
        fprintf(stderr, "cllm serve: --max-model-len %ld is more than the model's trained context of %ld tokens\n",
                o->engine.max_model_len, trained);
        return -1;
    }
    if (!cfg->max_model_len) cfg->max_model_len = (int)(trained < 8192 ? trained : 8192);
    cfg->max_waiting = (int)o->server.max_waiting;
    if (!cfg->kv_cache_bytes) {
        const size_t avail = mem_available_bytes();
        cfg->kv_cache_bytes = (size_t)1 << 30;
        if (avail && avail / 4 < cfg->kv_cache_bytes) cfg->kv_cache_bytes = avail / 4;
    }
    return 0;
}

int cmd_serve(int argc, char **argv) {
    serve_options o;
    const int parsed = parse_options(argc, argv, &o);
    if (parsed) {
        serve_options_free(&o);
        return parsed < 0 ? 1 : 0;
    }
    /* Ranks above 0 of a tensor-parallel job serve nothing: they follow
     * rank 0's batches until it stops. A graceful stop is a SIGTERM to rank
     * 0, which then lets them go; mpirun, sent a signal, kills every rank
     * within a second (OpenMPI's odls_base_sigkill_timeout). */
    cli_tp tp;
    if (cli_tp_join(&tp, o.parallel.tensor_parallel_size)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        serve_options_free(&o);
        return 1;
    }
    if (cli_tp_is_follower(&tp)) {
        const int follower_rc = cli_tp_follow(&tp, o.model.path, o.engine.threads);
        serve_options_free(&o);
        return follower_rc;
    }
    const cli_server_settings *ss = &o.server;
    char *served = ss->served_model_name ? strdup(ss->served_model_name) : default_served_name(o.model.path);
    if (!served) {
        cli_tp_leave(&tp);
        serve_options_free(&o);
        return 1;
    }

    /* Signals go to this thread only (sigwait below); every thread started
     * from here on inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    server s;
    server_config sc = {.host = ss->host,
                        .port = (int)ss->port,
                        .api_key = ss->api_key,
                        .metrics_require_key = ss->metrics_require_api_key,
                        .webui = !ss->no_webui,
                        .served_name = served,
                        .model_path = o.model.path,
                        .max_body_bytes = ss->max_body_size,
                        .max_per_client = (int)ss->max_connections_per_client,
                        .response_cache_size = (size_t)ss->response_cache_size,
                        .keep_alive_s = (int)ss->timeout_keep_alive,
                        .header_timeout_s = (int)ss->request_header_timeout,
                        .body_timeout_s = (int)ss->request_body_timeout,
                        .cors = &o.cors};
    if (!sc.max_body_bytes) {
        const size_t for_context = (size_t)o.engine.max_model_len * SERVER_BODY_BYTES_PER_TOKEN;
        sc.max_body_bytes = for_context > SERVER_DEFAULT_MAX_BODY ? for_context : SERVER_DEFAULT_MAX_BODY;
    }
    if (server_start(&s, &sc)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        cli_tp_leave(&tp);
        free(served);
        serve_options_free(&o);
        return 1;
    }
    fprintf(stderr, "cllm serve: listening on http://%s:%d (loading %s; /health answers 503 until ready)\n", ss->host,
            server_port(&s), o.model.path);
    if (tp.g)
        fprintf(stderr,
                "cllm serve: tensor parallel rank 0 of %ld, pid %d: send SIGTERM to this pid for a graceful stop\n",
                o.parallel.tensor_parallel_size, (int)getpid());

    int rc = 1;
    chat_template *tmpl = NULL;
    engine *e = NULL;
    model *m = cli_tp_load(&tp, o.model.path);
    if (!m) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        goto out;
    }
    if (!(tmpl = load_chat_template(m, &o.model, "serve"))) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        goto out;
    }
    if (chat_template_tool_format(tmpl) != TOOL_FORMAT_NONE)
        fprintf(stderr, "cllm serve: tool calls are read in the '%s' format the chat template shows\n",
                tool_format_name(chat_template_tool_format(tmpl)));
    else
        fprintf(stderr, "cllm serve: the chat template shows no tool-call format; requests with tools get a 400\n");

    engine_config cfg;
    if (engine_config_for(&o, m, &cfg)) goto out;
    if (!(e = engine_create(m, &cfg))) {
        fprintf(stderr, "cllm serve: cannot start the engine: %s\n", err_get());
        goto out;
    }
    const engine_config *ec = engine_get_config(e);
    fprintf(stderr,
            "cllm serve: KV cache %.1f MiB (%s, blocks of %d tokens, prefix caching %s): %d tokens; maximum "
            "concurrency at %d tokens per request: %d\n",
            (double)cfg.kv_cache_bytes / 1048576.0, kv_dtype_name(cfg.kv_type), ec->block_size,
            ec->prefix_caching ? "on" : "off", engine_kv_capacity_tokens(e), ec->max_model_len,
            engine_max_concurrency(e));
    if (ec->spec.method == SPEC_NGRAM)
        fprintf(stderr,
                "cllm serve: speculative decoding: ngram, up to %d draft tokens, n-grams of %d to %d tokens, off "
                "above %d running sequences\n",
                ec->spec.num_speculative_tokens, ec->spec.prompt_lookup_min, ec->spec.prompt_lookup_max,
                ec->spec.disable_by_batch_size);
    else if (ec->spec.method == SPEC_DRAFT_MODEL)
        fprintf(stderr,
                "cllm serve: speculative decoding: draft model %s, up to %d draft tokens, off above %d running "
                "sequences\n",
                ec->spec.model, ec->spec.num_speculative_tokens, ec->spec.disable_by_batch_size);
    if (engine_start(e)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        goto out;
    }
    server_set_ready(&s, m, e, tmpl);
    const bool key = ss->api_key && *ss->api_key;
    fprintf(stderr,
            "cllm serve: ready. OpenAI base URL http://%s:%d/v1, model \"%s\" (max_model_len %d)%s\n"
            "  curl http://%s:%d/v1/chat/completions -H 'Content-Type: application/json'%s \\\n"
            "    -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], "
            "\"max_tokens\": 64}'\n",
            ss->host, server_port(&s), served, ec->max_model_len, key ? ", API key required" : "", ss->host,
            server_port(&s), key ? " -H 'Authorization: Bearer $KEY'" : "", served);
    if (!ss->no_webui) fprintf(stderr, "  or chat in a browser at http://%s:%d/\n", ss->host, server_port(&s));

    const int sig = wait_signal(&set, -1);
    fprintf(stderr, "cllm serve: %s received\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    shutdown_server(&s, e, &set, ss->shutdown_timeout);
    rc = 0;
out:
    server_stop(&s);
    engine_free(e);
    if (tmpl) chat_template_free(tmpl);
    if (m) model_free(m);
    cli_tp_leave(&tp);
    free(served);
    serve_options_free(&o);
    if (rc == 0) fprintf(stderr, "cllm serve: stopped\n");
    return rc;
}
