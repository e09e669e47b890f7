/* `cllm chat`: a conversation in the terminal. Each line read from stdin is a
 * user turn; the whole conversation is rendered with the chat template and
 * the reply is streamed to stdout. The engine's prefix cache keeps earlier
 * turns' KV, so each turn computes only what is new. "/reset" starts over,
 * an empty line or end of input ends the chat. */
#include "chat/prompt.h"
#include "chat/template.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: cllm chat -m MODEL [options]\n"
            "  --system TEXT            a system message\n"
            "  --chat-template FILE     overrides the model's template\n"
            "  -n, --max-tokens N       tokens per reply at most (default 512)\n"
            "  -c, --ctx-size N         conversation length in tokens (default 4096)\n"
            "  -t, --threads N          (default: all cores)\n"
            "  sampling: --temperature --top-k --top-p --min-p --repeat-penalty\n"
            "            --presence-penalty --frequency-penalty --seed (defaults as in generate)\n"
            "Type a message and press enter; '/reset' forgets the conversation; an empty line\n"
            "or end of input quits.\n");
}

typedef struct {
    char *text;
    size_t len, cap;
    bool done;
    finish_reason why;
} reply;

static void on_reply(void *user, const engine_output *o) {
    reply *r = user;
    fwrite(o->text, 1, o->text_len, stdout);
    fflush(stdout);
    if (r->len + o->text_len + 1 > r->cap) {
        size_t cap = (r->len + o->text_len + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) return;
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, o->text, o->text_len);
    r->len += o->text_len;
    r->text[r->len] = 0;
    if (o->finished) {
        r->done = true;
        r->why = o->reason;
    }
}

static void add_message(json_t *messages, const char *role, const char *content) {
    json_array_append_new(messages, json_pack("{s:s,s:s}", "role", role, "content", content));
}

int cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *system = NULL, *template_file = NULL, *C = "chat";
    long max_tokens = 512, n_ctx = 4096, threads = 0;
    sampling_params sp = cli_sampling_defaults();
    bool seed_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        const int took = parse_sampling_option(C, argc, argv, &i, &sp, &seed_given);
        if (took < 0) return 1;
        if (took) continue;
        if (!(v = arg_value(C, argc, argv, &i))) return 1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "--chat-template")) template_file = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) {
            if (arg_int(C, a, v, 1, 1 << 20, &max_tokens)) return 1;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (arg_int(C, a, v, 16, 1 << 24, &n_ctx)) return 1;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (arg_int(C, a, v, 1, 1024, &threads)) return 1;
        } else {
            fprintf(stderr, "cllm chat: unknown option '%s'\n", a);
            return 1;
        }
    }
    if (!model_path) {
        usage(stderr);
        return 1;
    }
    if (!seed_given) sp.seed = (uint64_t)time(NULL);
    model *m = model_load(model_path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    int rc = 1;
    engine *e = NULL;
    json_t *messages = json_array();
    chat_template *tmpl = load_chat_template(m, template_file, C);
    engine_config ec = engine_config_defaults();
    ec.max_num_seqs = 1;
    ec.max_model_len = (int)n_ctx;
    ec.kv_cache_bytes = 0; /* exactly one conversation of n_ctx */
    ec.n_threads = (int)threads;
    if (!tmpl || !(e = engine_create(m, &ec))) {
        fprintf(stderr, "cllm: %s\n", err_get());
        goto done;
    }
    if (system) add_message(messages, "system", system);
    char *line = NULL;
    size_t lcap = 0;
    for (;;) {
        fprintf(stderr, "> ");
        ssize_t len = getline(&line, &lcap, stdin);
        if (len < 0) break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) break;
        if (!strcmp(line, "/reset")) {
            json_array_clear(messages);
            if (system) add_message(messages, "system", system);
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        add_message(messages, "user", line);
        int32_t *toks = NULL;
        const int n = prompt_encode_chat(m->tok, tmpl, messages, true, &toks);
        if (n < 0) {
            fprintf(stderr, "cllm chat: %s\n", err_get());
            json_array_remove(messages, json_array_size(messages) - 1);
            continue;
        }
        request_params p = request_params_defaults();
        p.sampling = sp;
        p.sampling.seed = sp.seed++;
        p.max_tokens = (int)(n + max_tokens <= n_ctx ? max_tokens : n_ctx - n);
        reply r = {0};
        if (p.max_tokens <= 0 || engine_submit(e, toks, n, &p, on_reply, &r, NULL)) {
            fprintf(stderr, "cllm chat: %s\n",
                    p.max_tokens <= 0 ? "the conversation fills the context; type /reset" : err_get());
            json_array_remove(messages, json_array_size(messages) - 1);
            free(toks);
            continue;
        }
        while (!r.done) engine_step(e);
        printf("\n");
        fflush(stdout);
        add_message(messages, "assistant", r.text ? r.text : "");
        if (r.why == FINISH_LENGTH) fprintf(stderr, "(reply cut at %d tokens)\n", p.max_tokens);
        free(r.text);
        free(toks);
    }
    free(line);
    rc = 0;
done:
    json_decref(messages);
    engine_free(e);
    if (tmpl) chat_template_free(tmpl);
    model_free(m);
    return rc;
}
