/* `cllm serve MODEL`: the OpenAI-compatible HTTP server (src/server/). Order
 * of events: listen first (so /health can say 503 while loading), load the
 * model, pick the chat template, create and start the engine (it refuses,
 * with the numbers, a KV budget that cannot hold one --max-model-len request),
 * print how to call it, then wait for SIGTERM/SIGINT. On a signal: stop
 * accepting, give running requests --shutdown-timeout seconds, abort the rest,
 * free everything and exit 0. A second signal skips the grace period. */
#include "chat/template.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mem_size.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct {
    const char *model_path;
    const char *host;
    long port;
    const char *served_name;
    const char *api_key;
    long max_model_len;
    long max_num_seqs;
    long max_num_batched_tokens;
    const char *kv_memory;
    kv_dtype kv_type;
    long block_size;
    bool prefix_caching;
    const char *chat_template_file;
    long threads;
    double shutdown_timeout;
    long max_waiting;
    long max_body;
} serve_options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: cllm serve MODEL [options]\n"
            "  --host ADDR                  address to listen on (default 127.0.0.1)\n"
            "  --port N                     port (default 8000; 0 = any free port)\n"
            "  --served-model-name NAME     model id clients use (default: the file name without .gguf)\n"
            "  --api-key KEY                require 'Authorization: Bearer KEY' on /v1/*, /tokenize,\n"
            "                               /detokenize (default: $CLLM_API_KEY, else none)\n"
            "  --max-model-len N            prompt + output tokens per request\n"
            "                               (default: min(trained context, 8192))\n"
            "  --max-num-seqs N             sequences running at once (default 64)\n"
            "  --max-num-batched-tokens N   tokens per engine step (default 512)\n"
            "  --kv-cache-memory SIZE       KV cache budget: 2GiB, 512MiB, or a fraction of free memory\n"
            "                               such as 0.5 (default: min(1GiB, 0.25 of free memory))\n"
            "  --kv-cache-dtype f16|f32     KV cache precision (default f16)\n"
            "  --block-size 8|16|32         tokens per KV block (default 16)\n"
            "  --enable-prefix-caching      reuse KV blocks of shared prompt prefixes (default)\n"
            "  --no-enable-prefix-caching\n"
            "  --chat-template FILE         Jinja chat template overriding the model's\n"
            "  --threads N                  compute threads (default: all cores)\n"
            "  --shutdown-timeout SECONDS   grace period for running requests on SIGTERM (default 10)\n"
            "  --max-waiting N              waiting requests before 503 (default 1024)\n"
            "  --max-body-size SIZE         largest request body (default 16MiB)\n");
}

static int parse_options(int argc, char **argv, serve_options *o) {
    *o = (serve_options){.host = "127.0.0.1", .port = 8000, .max_num_seqs = 64, .max_num_batched_tokens = 512,
                         .kv_type = KV_F16, .block_size = 16, .prefix_caching = true, .shutdown_timeout = 10,
                         .max_waiting = 1024};
    o->api_key = getenv("CLLM_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--enable-prefix-caching")) {
            o->prefix_caching = true;
            continue;
        }
        if (!strcmp(a, "--no-enable-prefix-caching")) {
            o->prefix_caching = false;
            continue;
        }
        if (a[0] != '-') {
            if (o->model_path) {
                fprintf(stderr, "cllm serve: unexpected argument '%s' (the model is '%s')\n", a, o->model_path);
                return -1;
            }
            o->model_path = a;
            continue;
        }
        static const char *const with_value[] = {
            "--model", "-m", "--host", "--port", "--served-model-name", "--api-key", "--max-model-len",
            "--max-num-seqs", "--max-num-batched-tokens", "--kv-cache-memory", "--kv-cache-dtype", "--block-size",
            "--chat-template", "--threads", "-t", "--shutdown-timeout", "--max-waiting", "--max-body-size", NULL};
        bool known = false;
        for (int k = 0; with_value[k] && !known; k++) known = !strcmp(a, with_value[k]);
        if (!known) {
            fprintf(stderr, "cllm serve: unknown option '%s' (see cllm serve --help)\n", a);
            return -1;
        }
        if (!(v = arg_value("serve", argc, argv, &i))) return -1;
        if (!strcmp(a, "--model") || !strcmp(a, "-m")) o->model_path = v;
        else if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--port")) {
            if (arg_int("serve", a, v, 0, 65535, &o->port)) return -1;
        } else if (!strcmp(a, "--served-model-name")) o->served_name = v;
        else if (!strcmp(a, "--api-key")) o->api_key = v;
        else if (!strcmp(a, "--max-model-len")) {
            if (arg_int("serve", a, v, 1, 1 << 24, &o->max_model_len)) return -1;
        } else if (!strcmp(a, "--max-num-seqs")) {
            if (arg_int("serve", a, v, 1, 4096, &o->max_num_seqs)) return -1;
        } else if (!strcmp(a, "--max-num-batched-tokens")) {
            if (arg_int("serve", a, v, 1, 1 << 20, &o->max_num_batched_tokens)) return -1;
        } else if (!strcmp(a, "--kv-cache-memory")) o->kv_memory = v;
        else if (!strcmp(a, "--kv-cache-dtype")) {
            if (kv_dtype_parse(v, &o->kv_type)) {
                fprintf(stderr, "cllm serve: %s\n", err_get());
                return -1;
            }
        } else if (!strcmp(a, "--block-size")) {
            if (arg_int("serve", a, v, 8, 32, &o->block_size)) return -1;
            if (o->block_size != 8 && o->block_size != 16 && o->block_size != 32) {
                fprintf(stderr, "cllm serve: --block-size must be 8, 16 or 32, got %ld\n", o->block_size);
                return -1;
            }
        } else if (!strcmp(a, "--chat-template")) o->chat_template_file = v;
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (arg_int("serve", a, v, 1, 1024, &o->threads)) return -1;
        } else if (!strcmp(a, "--shutdown-timeout")) {
            if (arg_float("serve", a, v, 0, 86400, &o->shutdown_timeout)) return -1;
        } else if (!strcmp(a, "--max-waiting")) {
            if (arg_int("serve", a, v, 0, 1 << 24, &o->max_waiting)) return -1;
        } else if (!strcmp(a, "--max-body-size")) {
            size_t n;
            if (mem_size_parse(v, 0, &n) || n > ((size_t)1 << 32)) {
                fprintf(stderr, "cllm serve: --max-body-size: %s\n", n > ((size_t)1 << 32) ? "at most 4GiB" : err_get());
                return -1;
            }
            o->max_body = (long)n;
        } else {
            fprintf(stderr, "cllm serve: unknown option '%s' (see cllm serve --help)\n", a);
            return -1;
        }
    }
    if (!o->model_path) {
        usage(stderr);
        return -1;
    }
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

static void shutdown_server(server *s, engine *e, const sigset_t *set, double grace) {
    server_drain(s);
    int active = atomic_load(&s->n_active);
    fprintf(stderr, "cllm serve: shutting down; %d request%s in flight, waiting up to %g s\n", active,
            active == 1 ? "" : "s", grace);
    const double deadline = now_s() + grace;
    bool hurry = false;
    while (atomic_load(&s->n_active) > 0 && now_s() < deadline && !hurry) hurry = wait_signal(set, 0.05) != 0;
    active = atomic_load(&s->n_active);
    if (active > 0) {
        fprintf(stderr, "cllm serve: aborting %d request%s\n", active, active == 1 ? "" : "s");
        engine_abort_all(e);
        const double hard = now_s() + 30;
        while (atomic_load(&s->n_active) > 0 && now_s() < hard) wait_signal(set, 0.02);
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

int cmd_serve(int argc, char **argv) {
    serve_options o;
    if (parse_options(argc, argv, &o)) return 1;
    char *served = o.served_name ? strdup(o.served_name) : default_served_name(o.model_path);
    if (!served) return 1;

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
    server_config sc = {.host = o.host, .port = (int)o.port, .api_key = o.api_key, .served_name = served,
                        .model_path = o.model_path, .max_body_bytes = (size_t)o.max_body};
    if (server_start(&s, &sc)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        free(served);
        return 1;
    }
    fprintf(stderr, "cllm serve: listening on http://%s:%d (loading %s; /health answers 503 until ready)\n", o.host,
            server_port(&s), o.model_path);

    int rc = 1;
    chat_template *tmpl = NULL;
    engine *e = NULL;
    model *m = model_load(o.model_path);
    if (!m) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        goto out;
    }
    if (!(tmpl = load_chat_template(m, o.chat_template_file, "serve"))) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        goto out;
    }

    engine_config cfg = engine_config_defaults();
    const long trained = m->hp.n_ctx_train;
    if (o.max_model_len > trained) {
        fprintf(stderr, "cllm serve: --max-model-len %ld is more than the model's trained context of %ld tokens\n",
                o.max_model_len, trained);
        goto out;
    }
    cfg.max_model_len = (int)(o.max_model_len ? o.max_model_len : (trained < 8192 ? trained : 8192));
    cfg.max_num_seqs = (int)o.max_num_seqs;
    cfg.max_num_batched_tokens = (int)o.max_num_batched_tokens;
    cfg.block_size = (int)o.block_size;
    cfg.kv_type = o.kv_type;
    cfg.prefix_caching = o.prefix_caching;
    cfg.n_threads = (int)o.threads;
    cfg.max_waiting = (int)o.max_waiting;
    const size_t avail = mem_available_bytes();
    if (o.kv_memory) {
        if (mem_size_parse(o.kv_memory, avail, &cfg.kv_cache_bytes)) {
            fprintf(stderr, "cllm serve: --kv-cache-memory: %s\n", err_get());
            goto out;
        }
    } else {
        cfg.kv_cache_bytes = (size_t)1 << 30;
        if (avail && avail / 4 < cfg.kv_cache_bytes) cfg.kv_cache_bytes = avail / 4;
    }
    if (!(e = engine_create(m, &cfg))) {
        fprintf(stderr, "cllm serve: cannot start the engine: %s\n", err_get());
        goto out;
    }
    const engine_config *ec = engine_get_config(e);
    fprintf(stderr,
            "cllm serve: KV cache %.1f MiB (%s, blocks of %d tokens, prefix caching %s): %d tokens; maximum "
            "concurrency at %d tokens per request: %d\n",
            (double)cfg.kv_cache_bytes / 1048576.0, o.kv_type == KV_F32 ? "f32" : "f16", ec->block_size,
            ec->prefix_caching ? "on" : "off", engine_kv_capacity_tokens(e), ec->max_model_len,
            engine_max_concurrency(e));
    if (engine_start(e)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        goto out;
    }
    server_set_ready(&s, m, e, tmpl);
    fprintf(stderr,
            "cllm serve: ready. OpenAI base URL http://%s:%d/v1, model \"%s\" (max_model_len %d)%s\n"
            "  curl http://%s:%d/v1/chat/completions -H 'Content-Type: application/json'%s \\\n"
            "    -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], "
            "\"max_tokens\": 64}'\n",
            o.host, server_port(&s), served, ec->max_model_len, o.api_key && *o.api_key ? ", API key required" : "",
            o.host, server_port(&s), o.api_key && *o.api_key ? " -H 'Authorization: Bearer $KEY'" : "", served);

    const int sig = wait_signal(&set, -1);
    fprintf(stderr, "cllm serve: %s received\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    shutdown_server(&s, e, &set, o.shutdown_timeout);
    rc = 0;
out:
    server_stop(&s);
    engine_free(e);
    if (tmpl) chat_template_free(tmpl);
    if (m) model_free(m);
    free(served);
    if (rc == 0) fprintf(stderr, "cllm serve: stopped\n");
    return rc;
}
