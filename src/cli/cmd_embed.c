/* cllm embed: one embedding per line of stdin, as a JSON array of floats per
 * line of stdout, from a BERT embedding model (model/encoder.h). Lines go
 * through the model in batches of --batch-size, each a single forward pass;
 * a line longer than the model's input length is truncated, as
 * sentence-transformers does. */
#include "cli/cli_groups.h"
#include "cli/commands.h"

#include "model/encoder.h"
#include "util/buf.h"
#include "util/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    long batch_size, threads;
} embed_opts;

static const cli_option k_embed_options[] = {
    {.name = "--batch-size", .kind = CLI_INT, .offset = offsetof(embed_opts, batch_size), .min = 1, .max = 4096,
     .metavar = "N", .help = "lines per forward pass"},
    {.name = "--threads", .kind = CLI_INT, .offset = offsetof(embed_opts, threads), .min = 0, .max = 1024,
     .metavar = "N", .help = "threads of the forward pass; 0: all cores"},
    {0}};

static const cli_section k_embed_sections[] = {
    {.group = &(const cli_group){"embed options", k_embed_options}},
    {.group = &cli_model_group,
     .offset = offsetof(embed_opts, model),
     .only = "--model",
     .overrides = (const cli_override[]){
         {.name = "--model", .help = "a BERT embedding model: a Hugging Face folder or a GGUF file", .required = true},
         {0}}},
    {0}};

static const cli_command k_embed = {
    .name = "embed",
    .synopsis = "-m MODEL [options] < lines",
    .about = "Print the embedding of each line read from stdin, one JSON array of floats per line.",
    .sections = k_embed_sections,
};

static int flush_batch(const encoder *enc, threadpool *threads, char **lines, int n) {
    int32_t **ids = calloc((size_t)n, sizeof *ids);
    int *lens = calloc((size_t)n, sizeof *lens);
    float *out = malloc((size_t)n * (size_t)enc->hp.n_embd * sizeof *out);
    int rc = !ids || !lens || !out ? err_oom("out of memory") : 0;
    for (int i = 0; i < n && !rc; i++)
        if ((lens[i] = encoder_tokenize(enc, lines[i], strlen(lines[i]), enc->max_len, &ids[i])) < 0) rc = -1;
    if (!rc) rc = encoder_forward(enc, threads, (const int32_t *const *)ids, lens, n, out);
    for (int i = 0; i < n && !rc; i++) {
        buf b = {0};
        buf_append(&b, "[", 1);
        for (int j = 0; j < enc->hp.n_embd; j++) buf_printf(&b, j ? ",%.9g" : "%.9g", (double)out[(size_t)i * enc->hp.n_embd + j]);
        buf_append(&b, "]\n", 2);
        if (b.oom || fwrite(b.data, 1, b.len, stdout) != b.len) rc = err_set("cannot write the output");
        buf_free(&b);
    }
    for (int i = 0; i < n; i++) free(ids ? ids[i] : NULL);
    free(ids);
    free(lens);
    free(out);
    return rc;
}

int cmd_embed(int argc, char **argv) {
    embed_opts o = {.batch_size = 32};
    const int parsed = cli_parse(&k_embed, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    encoder *enc = encoder_load(o.model.path);
    if (!enc) {
        fprintf(stderr, "cllm embed: %s\n", err_get());
        return 1;
    }
    threadpool *threads = threadpool_create((int)o.threads);
    char **lines = calloc((size_t)o.batch_size, sizeof *lines);
    int n = 0, rc = lines ? 0 : err_oom("out of memory");
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while (!rc && (got = getline(&line, &cap, stdin)) >= 0) {
        if (got > 0 && line[got - 1] == '\n') line[--got] = 0;
        if (!(lines[n++] = strdup(line))) rc = err_oom("out of memory");
        if (!rc && n == o.batch_size) {
            rc = flush_batch(enc, threads, lines, n);
            while (n > 0) free(lines[--n]);
        }
    }
    if (!rc && n > 0) rc = flush_batch(enc, threads, lines, n);
    while (n > 0) free(lines[--n]);
    free(line);
    free(lines);
    threadpool_free(threads);
    encoder_free(enc);
    if (rc) fprintf(stderr, "cllm embed: %s\n", err_get());
    return rc ? 1 : 0;
}
