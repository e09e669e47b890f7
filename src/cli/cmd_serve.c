/* `cllm serve MODEL` (or `--model a --model b ...`): the OpenAI-compatible
 * HTTP server (src/server/). Order of events: listen first (so /health can
 * say 503 while loading), load each model with its chat template, split the
 * KV budget and create and start one engine per model (server/model_set.h; an
 * engine refuses, with the numbers, a KV share that cannot hold one
 * --max-model-len request), print how to call it, then wait for
 * SIGTERM/SIGINT. On a signal: stop
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
#include "model/encoder.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/model_set.h"
#include "server/server.h"
#include "util/error.h"

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
    cli_list models; /* MODEL and each --model, in the order given */
    long max_loaded_models; /* 0: all */
    cli_model_settings model;
    cli_engine_settings engine;
    cli_server_settings server;
    cli_spec_settings spec;
    cli_parallel_settings parallel;
    spec_config sc; /* from spec, once parsed */
    char *key_from_file; /* --api-key-file's key (owned); server.api_key then points here */
    cors_config cors;    /* from --allowed-origins, --allowed-methods, --allowed-headers */
} serve_options;

static const cli_option k_models_options[] = {
    {.name = "--model", .aliases = "-m", .kind = CLI_LIST, .offset = offsetof(serve_options, models),
     .metavar = "PATH",
     .help = "a model to serve (a GGUF file or a Hugging Face folder); repeat it to serve several, each with "
             "its own engine, routed by the request's \"model\" (the first is the default)"},
    {.name = "--max-loaded-models", .kind = CLI_INT, .offset = offsetof(serve_options, max_loaded_models),
     .metavar = "N", .min = 0, .max = 1 << 16,
     .help = "with more models than this, keep at most N in memory: the first N load at start, the others on "
             "their first request, unloading the least recently used idle one; each gets 1/N of the KV cache "
             "memory", .default_text = "0: every model, loaded at start"},
    {0}};

static const cli_section k_serve_sections[] = {
    {.group = &(const cli_group){"model options", k_models_options}},
    {.group = &cli_model_group,
     .offset = offsetof(serve_options, model),
     .only = "--chat-template --chat-parse-special-in-content",
     .overrides = (const cli_override[]){
         {.name = "--chat-template", .help = "a Jinja chat template used instead of each model's own"}, {0}}},
    {.group = &cli_engine_group,
     .offset = offsetof(serve_options, engine),
     .overrides = (const cli_override[]){
         {.name = "--max-model-len", .help = "prompt + output tokens per request",
          .default_text = "the model's trained context, at most 8192"},
         {.name = "--kv-cache-memory",
          .help = "KV cache memory for all models together, split in proportion to their KV bytes per token",
          .default_text = "1GiB, at most a quarter of the memory free now"},
         {0}}},
    {.group = &cli_server_group, .offset = offsetof(serve_options, server)},
    {.group = &cli_spec_group, .offset = offsetof(serve_options, spec)},
    {.group = &cli_parallel_group, .offset = offsetof(serve_options, parallel)},
    {0}};

static const cli_command k_serve = {
    .name = "serve",
    .synopsis = "MODEL [options], or --model A --model B ... [options]",
    .about = "An OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, /tokenize, "
             "/detokenize, /health, /metrics) over the continuous-batching engine. MODEL is a GGUF file or a Hugging "
             "Face folder; with several (--model, repeated) each gets its own engine and a share of the KV cache, "
             "/v1/models lists them all and each request goes to the one its \"model\" names (the first without "
             "it). A BERT embedding model (config.json model_type \"bert\", or a GGUF \"bert\") serves "
             "/v1/embeddings instead, alone or beside generative models. It listens first (/health answers 503 "
             "while the models load), refuses at start, with "
             "the numbers, a KV cache that cannot hold one --max-model-len request, and on SIGTERM or SIGINT lets "
             "running requests finish for --shutdown-timeout seconds; a second signal skips the wait.",
    .sections = k_serve_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "MODEL", .offset = offsetof(serve_options, models), .required = true, .list = true}, {0}},
};

static void serve_options_free(serve_options *o) {
    free(o->key_from_file);
    cors_config_free(&o->cors);
    cli_free(&k_serve, o);
}

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
    reasoning_format rf;
    if (o->server.reasoning_parser && !reasoning_format_parse(o->server.reasoning_parser, &rf))
        return cli_usage_error(&k_serve,
                               "--reasoning-parser '%s': known are deepseek_r1, qwen3, think, openai_gptoss, harmony "
                               "and none",
                               o->server.reasoning_parser);
    if (o->server.metrics_require_api_key && !(o->server.api_key && *o->server.api_key))
        return cli_usage_error(&k_serve,
                               "--metrics-require-api-key needs a key (--api-key, --api-key-file or $CLLM_API_KEY)");
    return 0;
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
static void shutdown_server(server *s, const sigset_t *set, double grace) {
    server_drain(s);
    int active = in_flight(s);
    fprintf(stderr, "cllm serve: shutting down; %d request%s in flight, waiting up to %g s\n", active,
            active == 1 ? "" : "s", grace);
    wait_idle(s, set, now_s() + grace, true);
    active = in_flight(s);
    if (active > 0) {
        fprintf(stderr, "cllm serve: aborting %d request%s\n", active, active == 1 ? "" : "s");
        served_models_abort_all(&s->models);
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
    served_models_abort_all(&s->models);
    const double hard = now_s() + 30;
    while (served_models_busy(&s->models) && now_s() < hard) wait_signal(set, 0.01);
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The base URL, and a request to copy: for the first generative model and
 * the first embedding model. */
/* model_set_settings.load_model: the whole model, or this rank's shard. */
static model *load_tp_model(void *tp, const char *path) { return cli_tp_load(tp, path); }

static void print_ready(const cli_server_settings *ss, const server *s, const model_set *ms) {
    const bool key = ss->api_key && *ss->api_key;
    const int port = server_port(s);
    fprintf(stderr, "cllm serve: ready. OpenAI base URL http://%s:%d/v1%s; model%s:", ss->host, port,
            key ? ", API key required" : "", ms->n == 1 ? "" : "s (the first is the default)");
    const char *chat = NULL, *embed = NULL;
    for (int i = 0; i < ms->n; i++) {
        const model_set_entry *sm = &ms->v[i];
        if (sm->enc) {
            fprintf(stderr, "%s \"%s\" (embeddings, %d dimensions, inputs of up to %d tokens)", i ? "," : "",
                    sm->name, sm->enc->hp.n_embd, sm->enc->max_len);
            if (!embed) embed = sm->name;
            continue;
        }
        if (sm->e)
            fprintf(stderr, "%s \"%s\" (max_model_len %d)", i ? "," : "", sm->name,
                    engine_get_config(sm->e)->max_model_len);
        else
            fprintf(stderr, "%s \"%s\" (loaded on its first request)", i ? "," : "", sm->name);
        if (!chat) chat = sm->name;
    }
    const char *auth = key ? " -H 'Authorization: Bearer $KEY'" : "";
    fprintf(stderr, "\n");
    if (chat)
        fprintf(stderr,
                "  curl http://%s:%d/v1/chat/completions -H 'Content-Type: application/json'%s \\\n"
                "    -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], "
                "\"max_tokens\": 64}'\n",
                ss->host, port, auth, chat);
    if (embed)
        fprintf(stderr,
                "  curl http://%s:%d/v1/embeddings -H 'Content-Type: application/json'%s \\\n"
                "    -d '{\"model\": \"%s\", \"input\": [\"Hello!\"]}'\n",
                ss->host, port, auth, embed);
    if (chat && !ss->no_webui) fprintf(stderr, "  or chat in a browser at http://%s:%d/\n", ss->host, port);
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
    if (o.parallel.tensor_parallel_size > 1 && o.models.n > 1) {
        cli_usage_error(&k_serve, "--tensor-parallel-size serves one model; %d were given", o.models.n);
        serve_options_free(&o);
        return 1;
    }
    /* An embedding model has no engine to share a tensor-parallel job with.
     * (Otherwise models are looked at only once the server listens: reading
     * them may take a while, and /health answers 503 meanwhile.) */
    if (o.parallel.tensor_parallel_size > 1 && encoder_is_encoder_model(o.models.items[0])) {
        cli_usage_error(&k_serve, "an embedding model is served with --tensor-parallel-size 1");
        serve_options_free(&o);
        return 1;
    }
    cli_tp tp;
    if (cli_tp_join(&tp, o.parallel.tensor_parallel_size)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        serve_options_free(&o);
        return 1;
    }
    if (cli_tp_is_follower(&tp)) {
        const int follower_rc = cli_tp_follow(&tp, o.models.items[0], o.engine.threads);
        serve_options_free(&o);
        return follower_rc;
    }
    const cli_server_settings *ss = &o.server;
    model_set ms;
    if (model_set_plan(&ms, (const char *const *)o.models.items, o.models.n,
                       (const char *const *)ss->served_model_names.items, ss->served_model_names.n)) {
        cli_usage_error(&k_serve, "%s", err_get());
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
    const served_model_loader loader = model_set_loader(&ms);
    server_config sc = {.host = ss->host,
                        .port = (int)ss->port,
                        .api_key = ss->api_key,
                        .metrics_require_key = ss->metrics_require_api_key,
                        .webui = !ss->no_webui,
                        .models = ms.names,
                        .n_models = ms.n,
                        .loader = &loader,
                        .max_loaded_models = (int)o.max_loaded_models,
                        .max_body_bytes = ss->max_body_size,
                        .max_per_client = (int)ss->max_connections_per_client,
                        .response_cache_size = (size_t)ss->response_cache_size,
                        .keep_alive_s = (int)ss->timeout_keep_alive,
                        .header_timeout_s = (int)ss->request_header_timeout,
                        .body_timeout_s = (int)ss->request_body_timeout,
                        .cors = &o.cors,
                        .max_embed_inputs = (int)ss->max_embedding_inputs,
                        .embed_cache_size = (size_t)ss->embedding_cache_size};
    if (!sc.max_body_bytes) {
        const size_t for_context = (size_t)o.engine.max_model_len * SERVER_BODY_BYTES_PER_TOKEN;
        sc.max_body_bytes = for_context > SERVER_DEFAULT_MAX_BODY ? for_context : SERVER_DEFAULT_MAX_BODY;
    }
    if (server_start(&s, &sc)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        model_set_free(&ms);
        cli_tp_leave(&tp);
        serve_options_free(&o);
        return 1;
    }
    fprintf(stderr, "cllm serve: listening on http://%s:%d (loading %d model%s; /health answers 503 until ready)\n",
            ss->host, server_port(&s), ms.n, ms.n == 1 ? "" : "s");
    if (tp.g)
        fprintf(stderr,
                "cllm serve: tensor parallel rank 0 of %ld, pid %d: send SIGTERM to this pid for a graceful stop\n",
                o.parallel.tensor_parallel_size, (int)getpid());

    int rc = 1;
    model_set_settings es = {.engine = cli_engine_config(&o.engine),
                             .max_loaded = (int)o.max_loaded_models,
                             .chat_template = o.model.chat_template,
                             .trust_template_content = o.model.chat_parse_special_in_content,
                             .reasoning_parser = ss->reasoning_parser,
                             .load_model = load_tp_model,
                             .load_user = &tp};
    es.engine.spec = o.sc;
    es.engine.max_waiting = (int)ss->max_waiting;
    if (model_set_load(&ms, &es)) goto out;
    for (int i = 0; i < ms.n; i++) {
        if (ms.v[i].e) server_set_model(&s, i, ms.v[i].m, ms.v[i].e, ms.v[i].tmpl);
        if (ms.v[i].enc && server_set_encoder(&s, i, ms.v[i].enc, ms.v[i].eb)) {
            fprintf(stderr, "cllm serve: %s\n", err_get());
            goto out;
        }
    }
    server_set_ready(&s);
    print_ready(ss, &s, &ms);

    const int sig = wait_signal(&set, -1);
    fprintf(stderr, "cllm serve: %s received\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    shutdown_server(&s, &set, ss->shutdown_timeout);
    rc = 0;
out:
    server_stop(&s);
    model_set_free(&ms);
    server_free(&s);
    cli_tp_leave(&tp);
    serve_options_free(&o);
    if (rc == 0) fprintf(stderr, "cllm serve: stopped\n");
    return rc;
}
