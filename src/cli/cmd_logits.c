/* `cllm logits`: runs a token sequence through the model and writes the logits
 * of every position as raw little-endian float32 [n_tokens][n_vocab]. The
 * reference tests compare this against an independent numpy forward pass. */
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: cllm logits -m MODEL --tokens ID,ID,... --out FILE [--kv-type f32|f16]\n"
               "                   [--threads N] [--chunk N]\n");
}

static int parse_tokens(const char *s, int32_t **out, int *n) {
    int cap = 16, cnt = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    const char *p = s;
    while (v && *p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            fprintf(stderr, "cllm logits: --tokens expects comma-separated token ids, got '%s'\n", s);
            return -1;
        }
        if (cnt == cap) {
            int32_t *g = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!g) break;
            v = g;
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
    const char *model_path = NULL, *tokens_arg = NULL, *out_path = NULL;
    kv_dtype dtype = KV_F16;
    long threads = 0, chunk = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!(v = arg_value("logits", argc, argv, &i))) return 1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--tokens")) tokens_arg = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--kv-type")) {
            if (kv_dtype_parse(v, &dtype)) {
                fprintf(stderr, "cllm logits: %s\n", err_get());
                return 1;
            }
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (arg_int("logits", a, v, 1, 1024, &threads)) return 1;
        } else if (!strcmp(a, "--chunk")) {
            if (arg_int("logits", a, v, 1, 1 << 16, &chunk)) return 1;
        } else {
            fprintf(stderr, "cllm logits: unknown option '%s'\n", a);
            return 1;
        }
    }
    if (!model_path || !tokens_arg || !out_path) {
        usage(stderr);
        return 1;
    }
    int32_t *tokens;
    int n;
    if (parse_tokens(tokens_arg, &tokens, &n)) return 1;
    model *m = model_load(model_path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        free(tokens);
        return 1;
    }
    int rc = 1;
    seq_runner r;
    float *logits = NULL;
    if (seq_runner_init(&r, m, n, (int)chunk, dtype, (int)threads)) {
        fprintf(stderr, "cllm: %s\n", err_get());
        goto done;
    }
    logits = malloc((size_t)n * m->hp.n_vocab * sizeof *logits);
    if (!logits || seq_runner_feed(&r, tokens, n, 0, logits, true)) {
        fprintf(stderr, "cllm: %s\n", logits ? err_get() : "out of memory");
        goto done_runner;
    }
    FILE *f = fopen(out_path, "wb");
    if (!f || fwrite(logits, sizeof *logits, (size_t)n * m->hp.n_vocab, f) != (size_t)n * m->hp.n_vocab) {
        fprintf(stderr, "cllm: cannot write %s\n", out_path);
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
    return rc;
}
