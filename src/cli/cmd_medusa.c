/* `cllm medusa train MODEL --data TEXT... --out HEADS.gguf`: trains Medusa
 * heads (model/medusa.h) for a model. Each non-empty line of the data files
 * is a prompt (a user message through the chat template with --chat); the
 * model continues each one greedily (self-distillation: the heads learn
 * what this model says, which is what verification accepts), batched
 * through the engine, and the heads train on the prompts with their
 * continuations (model/medusa_train.h). Prints progress on stderr and a JSON
 * summary line on stdout. */
#include "chat/prompt.h"
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "model/medusa_train.h"
#include "server/model_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"
#include "util/time.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine; /* --threads, --max-num-seqs, --kv-cache-dtype */
    cli_list data;
    const char *out;
    int kind; /* an index into k_kinds */
    long heads, exit_layer, draft_vocab, epochs, batch, gen_tokens, samples, max_prompts, seed;
    double lr, holdout, temperature;
    bool chat;
    int type; /* an index into k_types */
} train_options;

static const char *const k_kinds[] = {"hydra", "medusa", "exit", NULL};
enum { KIND_HYDRA, KIND_MEDUSA, KIND_EXIT };
static const char *const k_types[] = {"f16", "q8_0", "f32", NULL};
static const wtype k_type_of[] = {WT_F16, WT_Q8_0, WT_F32};

static const cli_option k_train_options[] = {
    {.name = "--data", .kind = CLI_LIST, .offset = offsetof(train_options, data), .metavar = "TEXT", .required = true,
     .help = "a text file of prompts, one per line (repeatable)"},
    {.name = "--out", .kind = CLI_STRING, .offset = offsetof(train_options, out),
     .metavar = "HEADS.gguf", .required = true, .help = "the heads' file to write"},
    {.name = "--kind", .kind = CLI_ENUM, .offset = offsetof(train_options, kind), .choices = k_kinds,
     .help = "hydra: each head also reads the token before the one it guesses (its parent's draft), "
             "so it is not guessing two places ahead blind; medusa: independent heads on the hidden state "
             "alone; exit: one block on the hidden state after --exit-layer layers, guessing the next token, "
             "for layer_skip's draft (`{\"method\": \"layer_skip\", \"model\": \"ADAPTER.gguf\"}`)"},
    {.name = "--heads", .kind = CLI_INT, .offset = offsetof(train_options, heads), .metavar = "K", .min = 1,
     .max = MEDUSA_MAX_HEADS, .default_text = "4; an exit adapter is one block",
     .help = "heads: head k guesses the token k + 2 places ahead"},
    {.name = "--exit-layer", .kind = CLI_INT, .offset = offsetof(train_options, exit_layer), .metavar = "L",
     .min = 1, .max = 4096, .default_text = "two thirds of the model's layers",
     .help = "--kind exit: the layers the draft runs before the adapter (layer_skip's draft_layers)"},
    {.name = "--draft-vocab", .kind = CLI_INT, .offset = offsetof(train_options, draft_vocab), .metavar = "N",
     .min = 8, .max = 1 << 22,
     .help = "the heads draft from the N tokens most frequent in the training text (FR-Spec): the share of the "
             "output head they read"},
    {.name = "--gen-tokens", .kind = CLI_INT, .offset = offsetof(train_options, gen_tokens), .metavar = "N", .min = 0,
     .max = 1 << 16,
     .help = "the model continues each prompt greedily by up to N tokens, and the heads learn from that text "
             "(self-distillation); 0 trains on the data alone"},
    {.name = "--samples", .kind = CLI_INT, .offset = offsetof(train_options, samples), .metavar = "N", .min = 1,
     .max = 64,
     .help = "continuations per prompt: the first greedy, the others sampled at --temperature (seeded), so the "
             "heads see more of what the model says than its single likeliest text"},
    {.name = "--temperature", .aliases = "--temp", .kind = CLI_FLOAT, .offset = offsetof(train_options, temperature),
     .metavar = "T",
     .min = 0, .max = 2, .help = "the sampled continuations' temperature"},
    {.name = "--chat", .kind = CLI_BOOL, .offset = offsetof(train_options, chat),
     .help = "each line is a user message, rendered with the model's chat template"},
    {.name = "--max-prompts", .kind = CLI_INT, .offset = offsetof(train_options, max_prompts), .metavar = "N",
     .min = 1, .max = 1 << 24, .help = "use the first N lines only", .default_text = "all"},
    {.name = "--epochs", .kind = CLI_INT, .offset = offsetof(train_options, epochs), .metavar = "N", .min = 1,
     .max = 1000, .help = "passes over the training positions"},
    {.name = "--batch", .kind = CLI_INT, .offset = offsetof(train_options, batch), .metavar = "N", .min = 1,
     .max = 1024, .help = "positions per optimizer step"},
    {.name = "--lr", .kind = CLI_FLOAT, .offset = offsetof(train_options, lr), .metavar = "X", .min = 1e-7, .max = 1,
     .help = "Adam's step size"},
    {.name = "--holdout", .kind = CLI_FLOAT, .offset = offsetof(train_options, holdout), .metavar = "X", .min = 0,
     .max = 0.9, .help = "share of the prompts kept out of training to measure each head's accuracy"},
    {.name = "--seed", .aliases = "-s", .kind = CLI_INT, .offset = offsetof(train_options, seed), .metavar = "N", .min = 0,
     .max = 1e15, .help = "the shuffles' and the held-out choice's seed"},
    {.name = "--type", .kind = CLI_ENUM, .offset = offsetof(train_options, type), .choices = k_types,
     .help = "the heads' matrices in the file: f16, q8_0 (half of f16's bytes; the engine runs them as Q8_0 "
             "whatever the file holds) or f32 (as trained)"},
    {0}};

static const cli_section k_train_sections[] = {
    {.group = &(const cli_group){"training options", k_train_options}},
    {.group = &cli_model_group, .offset = offsetof(train_options, model), .only = "--model --chat-template"},
    {.group = &cli_engine_group, .offset = offsetof(train_options, engine),
     .only = "--max-num-seqs --kv-cache-dtype --threads"},
    {0}};

static const cli_command k_train = {
    .name = "medusa train",
    .synopsis = "MODEL --data TEXT... --out HEADS.gguf [options]",
    .about = "Trains Medusa heads for a model, for `--speculative-config '{\"method\": \"medusa\", \"model\": "
             "\"HEADS.gguf\"}'`. The model continues every prompt of the data greedily; each head learns, from "
             "the model's last hidden state (and, for Hydra's chained heads, the token before its guess), a "
             "token further ahead in that text, drafting from the text's most frequent tokens only. Reports "
             "each head's top-1 and top-5 accuracy on held-out prompts.",
    .sections = k_train_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "MODEL", .offset = offsetof(train_options, model.path), .required = true}, {0}},
};

typedef struct {
    int32_t *tokens; /* prompt, then the continuation */
    int n, cap;
    int draw;        /* 0: greedy; else the draw's number (its seed) */
    bool done;
} sample;

static void on_output(void *user, const engine_output *out) {
    sample *s = user;
    for (int i = 0; i < out->n_new_tokens && s->n < s->cap; i++) s->tokens[s->n++] = out->new_tokens[i];
    if (out->finished) s->done = true;
}

/* The prompts: every non-empty line of the files, at most max. */
static char **read_lines(const cli_list *files, long max, int *n_out) {
    char **lines = NULL;
    int n = 0, cap = 0;
    for (int f = 0; f < files->n && (max <= 0 || n < max); f++) {
        size_t len = 0;
        char *text = file_read_all(files->items[f], &len);
        if (!text) {
            fprintf(stderr, "cllm medusa train: %s\n", err_get());
            goto fail;
        }
        for (char *p = text, *nl; *p && (max <= 0 || n < max); p = nl ? nl + 1 : p + strlen(p)) {
            nl = strchr(p, '\n');
            size_t l = nl ? (size_t)(nl - p) : strlen(p);
            while (l > 0 && (p[l - 1] == '\r' || p[l - 1] == ' ')) l--;
            if (l == 0) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                char **g = realloc(lines, (size_t)cap * sizeof *g);
                if (!g) break;
                lines = g;
            }
            lines[n] = strndup(p, l);
            if (lines[n]) n++;
        }
        free(text);
    }
    *n_out = n;
    return lines;
fail:
    for (int i = 0; i < n; i++) free(lines[i]);
    free(lines);
    *n_out = -1;
    return NULL;
}

static int encode_prompt(const model *m, const chat_template *tmpl, const char *line, int32_t **out) {
    if (!tmpl) return prompt_encode_text(m->tok, line, strlen(line), true, out);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", line);
    const chat_render_opts opts = chat_render_defaults();
    const int n = msgs ? prompt_encode_chat(m->tok, tmpl, msgs, &opts, out) : PROMPT_NO_MEMORY;
    json_decref(msgs);
    return n;
}

/* Each sample's prompt continued by the model through the engine: greedy, or drawn at the temperature. */
static int generate_all(model *m, const train_options *o, sample *s, int n) {
    int max_len = 0;
    for (int i = 0; i < n; i++)
        if (s[i].n + o->gen_tokens > max_len) max_len = s[i].n + (int)o->gen_tokens;
    engine_config ec = cli_engine_config(&o->engine);
    ec.max_model_len = max_len;
    ec.kv_cache_bytes = 0;
    engine *e = engine_create(m, &ec);
    if (!e) return -1;
    int next = 0, done = 0, rc = 0;
    while (done < n && !rc) {
        while (next < n && next - done < 4 * ec.max_num_seqs) { /* keep the engine's queue short */
            request_params p = request_params_defaults();
            p.max_tokens = (int)o->gen_tokens;
            p.sampling.temperature = s[next].draw ? (float)o->temperature : 0;
            p.sampling.seed = (uint64_t)o->seed * 1000003u + (uint64_t)next;
            if (engine_submit(e, s[next].tokens, s[next].n, &p, on_output, &s[next], NULL)) rc = -1;
            next++;
        }
        engine_step(e);
        done = 0;
        for (int i = 0; i < next; i++) done += s[i].done;
    }
    engine_free(e);
    return rc;
}

static void progress(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "cllm medusa train: %s\n", line);
}

static int cmd_medusa_train(int argc, char **argv) {
    train_options o = {.kind = KIND_HYDRA, .heads = 0, .samples = 1, .temperature = 0.8, .draft_vocab = 16384,
                       .epochs = 2, .batch = 64, .gen_tokens = 128, .lr = 1e-3, .holdout = 0.1, .seed = 1,
                       .engine = cli_engine_defaults()};
    o.engine.max_num_seqs = 16;
    const int pr = cli_parse(&k_train, argc, argv, &o);
    if (pr) {
        cli_free(&k_train, &o);
        return pr > 0 ? 0 : 1;
    }
    int rc = 1, n = 0;
    if (o.kind == KIND_EXIT ? o.heads > 1 : o.exit_layer > 0) {
        fprintf(stderr, "cllm medusa train: %s\n", o.kind == KIND_EXIT ? "an exit adapter is one block: drop --heads"
                                                                       : "--exit-layer is for --kind exit");
        cli_free(&k_train, &o);
        return 1;
    }
    sample *samples = NULL;
    chat_template *tmpl = NULL;
    char **lines = read_lines(&o.data, o.max_prompts, &n);
    const int n_prompts = n;
    model *m = n > 0 ? model_load(o.model.path) : NULL;
    if (n == 0) fprintf(stderr, "cllm medusa train: the data has no prompts\n");
    if (n <= 0) goto done;
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        goto done;
    }
    if (o.chat && !(tmpl = model_template_load(m, o.model.chat_template, false, "medusa train"))) {
        fprintf(stderr, "cllm: %s\n", err_get());
        goto done;
    }
    n *= (int)o.samples; /* sample i: prompt i / samples, draw i % samples */
    samples = calloc((size_t)n, sizeof *samples);
    if (!samples) goto oom;
    for (int i = 0; i < n; i++) {
        int32_t *ids = NULL;
        const int len = encode_prompt(m, tmpl, lines[i / o.samples], &ids);
        if (len < 0) {
            fprintf(stderr, "cllm medusa train: prompt %ld: %s\n", i / o.samples + 1, err_get());
            goto done;
        }
        samples[i].draw = i % (int)o.samples;
        samples[i].cap = len + (int)o.gen_tokens;
        samples[i].tokens = realloc(ids, (size_t)(samples[i].cap ? samples[i].cap : 1) * sizeof *ids);
        if (!samples[i].tokens) {
            free(ids);
            goto oom;
        }
        samples[i].n = len;
    }
    double t0 = now_seconds(), t_gen = 0;
    long generated = 0;
    if (o.gen_tokens > 0) {
        int n_prompt_tokens = 0;
        for (int i = 0; i < n; i++) n_prompt_tokens += samples[i].n;
        if (generate_all(m, &o, samples, n)) {
            fprintf(stderr, "cllm: %s\n", err_get());
            goto done;
        }
        for (int i = 0; i < n; i++) generated += samples[i].n;
        generated -= n_prompt_tokens;
        t_gen = now_seconds() - t0;
        fprintf(stderr, "cllm medusa train: %d prompts continued %ld times by %ld tokens in %.1f s\n", n_prompts,
                o.samples, generated, t_gen);
    }
    const int32_t **seqs = malloc((size_t)n * sizeof *seqs);
    int *lens = malloc((size_t)n * sizeof *lens);
    if (!seqs || !lens) {
        free(seqs), free(lens);
        goto oom;
    }
    for (int i = 0; i < n; i++) seqs[i] = samples[i].tokens, lens[i] = samples[i].n;
    medusa_train_opts to = medusa_train_defaults();
    to.n_heads = o.kind == KIND_EXIT ? 1 : o.heads ? (int)o.heads : 4;
    to.chained = o.kind == KIND_HYDRA;
    if (o.kind == KIND_EXIT) to.exit_layer = o.exit_layer ? (int)o.exit_layer : (2 * m->hp.n_layer + 2) / 3;
    to.draft_vocab = (int)o.draft_vocab;
    to.epochs = (int)o.epochs;
    to.batch = (int)o.batch;
    to.lr = (float)o.lr;
    to.holdout = (float)o.holdout;
    to.seed = (uint64_t)o.seed;
    to.n_threads = (int)o.engine.threads;
    to.progress = progress;
    medusa_params heads;
    medusa_train_report rep;
    const int trc = medusa_train(m, seqs, lens, n, &to, &heads, &rep);
    free(seqs), free(lens);
    if (trc || medusa_save(&heads, m, o.out, k_type_of[o.type])) {
        fprintf(stderr, "cllm medusa train: %s\n", err_get());
        if (!trc) medusa_params_free(&heads);
        goto done;
    }
    json_t *top1 = json_array(), *top5 = json_array();
    for (int k = 0; k < heads.n_heads; k++) {
        if (heads.exit_layer)
            fprintf(stderr, "cllm medusa train: exit adapter after layer %d (the next token): held-out top-1 %.3f, "
                    "top-5 %.3f\n", heads.exit_layer, heads.top1[k], heads.top5[k]);
        else
            fprintf(stderr, "cllm medusa train: head %d (token +%d): held-out top-1 %.3f, top-5 %.3f\n", k, k + 2,
                    heads.top1[k], heads.top5[k]);
        json_array_append_new(top1, isnan(heads.top1[k]) ? json_null() : json_real(heads.top1[k]));
        json_array_append_new(top5, isnan(heads.top5[k]) ? json_null() : json_real(heads.top5[k]));
    }
    json_t *sum = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:o, s:o, s:f, s:f, s:f, s:f}",
                            "out", o.out, "kind", k_kinds[o.kind], "heads", heads.n_heads, "draft_vocab",
                            heads.n_draft_vocab, "prompts", n_prompts, "samples", (int)o.samples,
                            "generated_tokens", (json_int_t)generated, "train_positions",
                            (json_int_t)rep.train_positions, "holdout_positions", (json_int_t)rep.holdout_positions,
                            "top1", top1, "top5", top5, "vocab_coverage",
                            isnan(rep.vocab_coverage) ? 0.0 : (double)rep.vocab_coverage, "seconds_generate", t_gen,
                            "seconds_hidden", rep.seconds_hidden, "seconds_train", rep.seconds_train);
    if (sum && heads.exit_layer) {
        json_object_set_new(sum, "exit_layer", json_integer(heads.exit_layer));
        json_object_set_new(sum, "raw_exit_top1", rep.holdout_positions ? json_real(rep.start_top1[0]) : json_null());
    }
    char *js = sum ? json_dumps(sum, JSON_COMPACT) : NULL;
    if (js) printf("%s\n", js);
    free(js);
    json_decref(sum);
    medusa_params_free(&heads);
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "cllm: out of memory\n");
done:
    for (int i = 0; samples && i < n; i++) free(samples[i].tokens);
    free(samples);
    for (int i = 0; i < n_prompts; i++) free(lines[i]);
    free(lines);
    chat_template_free(tmpl);
    model_free(m);
    cli_free(&k_train, &o);
    return rc;
}

int cmd_medusa(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "train")) return cmd_medusa_train(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: cllm medusa train MODEL --data TEXT... --out HEADS.gguf [options]\n\n"
               "  train   train Medusa heads for a model (cllm medusa train --help)\n");
        return 0;
    }
    fprintf(stderr, "cllm medusa: expected a subcommand: train (try 'cllm medusa train --help')\n");
    return 1;
}
