/* `cllm chat`: a conversation in the terminal. Each line read from stdin is a
 * user turn; the whole conversation is rendered with the chat template and
 * the reply is streamed to stdout. The engine's prefix cache keeps earlier
 * turns' KV, so each turn computes only what is new. "/reset" starts over,
 * an empty line or end of input ends the chat. */
#include "chat/prompt.h"
#include "chat/template.h"
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "server/model_template.h"
#include "util/buf.h"
#include "util/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine;
    cli_sampling_settings sampling;
    cli_spec_settings spec;
    const char *system;
} chat_options;

static const cli_option k_chat_options[] = {
    {.name = "--system", .kind = CLI_STRING, .offset = offsetof(chat_options, system), .metavar = "TEXT",
     .help = "a system message that starts the conversation"},
    {0}};

static const cli_section k_chat_sections[] = {
    {.group = &(const cli_group){"chat options", k_chat_options}},
    {.group = &cli_model_group,
     .offset = offsetof(chat_options, model),
     .overrides = (const cli_override[]){{.name = "--model", .required = true}, {0}}},
    {.group = &cli_sampling_group,
     .offset = offsetof(chat_options, sampling),
     .overrides = (const cli_override[]){{.name = "--max-tokens", .help = "tokens per reply at most", .min = 1,
                                          .max = 1 << 20},
                                         {0}}},
    {.group = &cli_engine_group,
     .offset = offsetof(chat_options, engine),
     .only = "--max-model-len --kv-cache-dtype --threads",
     .overrides = (const cli_override[]){{.name = "--max-model-len", .help = "conversation length in tokens",
                                          .min = 16, .max = 1 << 24},
                                         {0}}},
    {.group = &cli_spec_group, .offset = offsetof(chat_options, spec)},
    {0}};

static const cli_command k_chat = {
    .name = "chat",
    .synopsis = "-m MODEL [options]",
    .about = "A conversation in the terminal: each line typed is a user turn, and the reply streams to stdout. "
             "'/reset' forgets the conversation; an empty line or end of input quits. The engine's prefix cache "
             "keeps earlier turns, so each turn computes only what is new.",
    .sections = k_chat_sections,
};

typedef struct {
    buf text; /* the reply so far, for the conversation's history */
    bool done;
    finish_reason why;
} reply;

static void on_reply(void *user, const engine_output *o) {
    reply *r = user;
    fwrite(o->text, 1, o->text_len, stdout);
    fflush(stdout);
    buf_append(&r->text, o->text, o->text_len);
    if (o->finished) {
        r->done = true;
        r->why = o->reason;
    }
}

static void add_message(json_t *messages, const char *role, const char *content) {
    json_array_append_new(messages, json_pack("{s:s,s:s}", "role", role, "content", content));
}

int cmd_chat(int argc, char **argv) {
    chat_options o = {.engine = cli_engine_defaults(), .sampling = cli_sampling_defaults()};
    o.engine.max_model_len = 4096;
    o.sampling.max_tokens = 512;
    const int parsed = cli_parse(&k_chat, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    engine_config ec = engine_config_defaults();
    if (cli_spec_config(&o.spec, &ec.spec)) {
        cli_usage_error(&k_chat, "%s", err_get());
        return 1;
    }
    const char *const C = "chat", *system = o.system;
    const long n_ctx = o.engine.max_model_len, max_tokens = o.sampling.max_tokens;
    sampling_params sp = cli_sampling_params(&o.sampling);
    model *m = model_load(o.model.path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    int rc = 1;
    engine *e = NULL;
    json_t *messages = json_array();
    chat_template *tmpl = model_template_load(m, o.model.chat_template, o.model.chat_parse_special_in_content, C);
    ec.max_num_seqs = 1;
    ec.max_model_len = (int)n_ctx;
    ec.kv_cache_bytes = 0; /* exactly one conversation of n_ctx */
    ec.kv_type = o.engine.kv_cache_dtype;
    ec.n_threads = (int)o.engine.threads;
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
        const chat_render_opts opts = chat_render_defaults();
        const int n = prompt_encode_chat(m->tok, tmpl, messages, &opts, &toks);
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
        add_message(messages, "assistant", r.text.data && !r.text.oom ? r.text.data : "");
        if (r.why == FINISH_LENGTH) fprintf(stderr, "(reply cut at %d tokens)\n", p.max_tokens);
        buf_free(&r.text);
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
