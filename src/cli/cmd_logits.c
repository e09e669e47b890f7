/* `cllm logits`: runs a token sequence through the model and writes the logits
 * of every position as raw little-endian float32 [n_tokens][n_vocab]. The
 * reference tests compare this against an independent numpy forward pass. */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/cli_parallel.h"
#include "cli/commands.h"
#include "util/error.h"
#include "util/array.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine; /* --kv-cache-dtype, --threads */
    cli_parallel_settings parallel;
    const char *tokens;
    const char *out;
    long chunk;
} logits_options;

static const cli_option k_logits_options[] = {
    {.name = "--tokens", .kind = CLI_STRING, .offset = offsetof(logits_options, tokens), .metavar = "ID,ID,...",
     .required = true, .help = "the token sequence, comma-separated ids"},
    {.name = "--out", .kind = CLI_STRING, .offset = offsetof(logits_options, out), .metavar = "FILE",
     .required = true, .help = "where the logits go: float32 [n_tokens][n_vocab], little-endian"},
    {.name = "--chunk", .kind = CLI_INT, .offset = offsetof(logits_options, chunk), .metavar = "N", .min = 1,
     .max = 1 << 16, .help = "tokens per forward call"},
    {0}};

static const cli_section k_logits_sections[] = {
    {.group = &(const cli_group){"logits options", k_logits_options}},
    {.group = &cli_model_group,
     .offset = offsetof(logits_options, model),
     .only = "--model",
     .overrides = (const cli_override[]){{.name = "--model", .required = true}, {0}}},
    {.group = &cli_engine_group, .offset = offsetof(logits_options, engine), .only = "--kv-cache-dtype --threads"},
    {.group = &cli_parallel_group, .offset = offsetof(logits_options, parallel)},
    {0}};

static const cli_command k_logits = {
    .name = "logits",
    .synopsis = "-m MODEL --tokens ID,ID,... --out FILE [options]",
    .about = "Run a token sequence through the model and write the logits of every position. The reference tests "
             "compare them with an independent numpy forward pass.",
    .sections = k_logits_sections,
};

static int parse_tokens(const char *s, int32_t **out, int *n) {
    size_t cap = 0;
    int cnt = 0;
    int32_t *v = NULL;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            fprintf(stderr, "cllm logits: --tokens expects comma-separated token ids, got '%s'\n", s);
            return -1;
        }
        if (array_reserve((void **)&v, &cap, (size_t)cnt + 1, sizeof *v)) {
            free(v);
            fprintf(stderr, "cllm logits: --tokens: %s\n", err_get());
            return -1;
        }
        v[cnt++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    if (!cnt) {
        free(v);
        fprintf(stderr, "cllm logits: --tokens is empty\n");
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int cmd_logits(int argc, char **argv) {
    logits_options o = {.engine = cli_engine_defaults(), .chunk = 512, .parallel = {.tensor_parallel_size = 1}};
    const int parsed = cli_parse(&k_logits, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    int32_t *tokens;
    int n;
    if (parse_tokens(o.tokens, &tokens, &n)) return 1;
    cli_tp tp;
    if (cli_tp_join(&tp, o.parallel.tensor_parallel_size)) {
        fprintf(stderr, "cllm: %s\n", err_get());
        free(tokens);
        return 1;
    }
    if (cli_tp_is_follower(&tp)) {
        free(tokens);
        return cli_tp_follow(&tp, o.model.path, o.engine.threads);
    }
    model *m = cli_tp_load(&tp, o.model.path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        free(tokens);
        cli_tp_leave(&tp);
        return 1;
    }
    int rc = 1;
    seq_runner r;
    float *logits = NULL;
    if (seq_runner_init(&r, m, n, (int)o.chunk, o.engine.kv_cache_dtype, (int)o.engine.threads)) {
        fprintf(stderr, "cllm: %s\n", err_get());
        goto done;
    }
    logits = malloc((size_t)n * m->hp.n_vocab * sizeof *logits);
    if (!logits || seq_runner_feed(&r, tokens, n, 0, logits, true)) {
        fprintf(stderr, "cllm: %s\n", logits ? err_get() : "out of memory");
        goto done_runner;
    }
    FILE *f = fopen(o.out, "wb");
    if (!f || fwrite(logits, sizeof *logits, (size_t)n * m->hp.n_vocab, f) != (size_t)n * m->hp.n_vocab) {
        fprintf(stderr, "cllm: cannot write %s\n", o.out);
        if (f) fclose(f);
        goto done_runner;
    }
    rc = fclose(f) ? 1 : 0;
done_runner:
    seq_runner_free(&r);
done:
    free(logits);
    free(tokens);
    model_free(m);
    cli_tp_leave(&tp);
    return rc;
}
