/* Helpers shared by the subcommands: number and size parsing with clear
 * errors (the option tables of cli_options.h use them), and a single-sequence
 * runner (a model runner, model/runner.h, with identity block tables) for
 * commands that do not need the engine. */
#ifndef CLLM_CLI_COMMON_H
#define CLLM_CLI_COMMON_H

#include "cli/cli_groups.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/runner.h"
#include "util/file.h"
#include "util/time.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Parse a whole string as a number in [lo, hi]; on failure print
 * "cllm CMD: OPT expects ..." and return -1. */
int arg_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out);
int arg_float(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out);
/* A memory amount as util/mem_size.h reads it: bytes with an optional unit
 * (512M, 1GiB, 1.5GB), or a fraction in (0, 1] of the memory available now. */
int arg_memory(const char *cmd, const char *opt, const char *val, size_t *out);

typedef struct {
    model *m;
    runner run;
    int n_ctx;
    int max_batch;
} seq_runner;

/* Loads nothing: wraps an already loaded model for one sequence of up to n_ctx tokens. */
int seq_runner_init(seq_runner *r, model *m, int n_ctx, int max_batch, kv_dtype dtype, int n_threads);
void seq_runner_free(seq_runner *r);
/* Feeds tokens at positions start.. and writes the logits of the last one
 * (when logits is not NULL) or of every one (all_logits: [n][n_vocab]). */
int seq_runner_feed(seq_runner *r, const int32_t *tokens, int n, int start, float *logits, bool all_logits);


/* "LABELN drafts, M draft tokens, A accepted: acceptance rate R%, mean
 * accepted length L" on f. L counts the token each verification adds
 * besides the accepted drafts, as vLLM's mean acceptance length does. */
void print_spec_stats(FILE *f, const char *label, const engine_stats *st);

#endif
