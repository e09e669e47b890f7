/* See cli_common.h. */
#include "cli/cli_common.h"

#include "util/error.h"
#include "util/mem_size.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int arg_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "cllm %s: %s expects an integer in [%ld, %ld], got '%s'\n", cmd, opt, lo, hi, val);
        return -1;
    }
    *out = v;
    return 0;
}

int arg_float(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "cllm %s: %s expects a number in [%g, %g], got '%s'\n", cmd, opt, lo, hi, val);
        return -1;
    }
    *out = v;
    return 0;
}

int arg_memory(const char *cmd, const char *opt, const char *val, size_t *out) {
    if (mem_size_parse(val, mem_available_bytes(), out) == 0) return 0;
    fprintf(stderr, "cllm %s: %s: %s\n", cmd, opt, err_get());
    return -1;
}

int seq_runner_init(seq_runner *r, model *m, int n_ctx, int max_batch, kv_dtype dtype, int n_threads) {
    *r = (seq_runner){.m = m, .n_ctx = n_ctx, .max_batch = max_batch};
    const int bs = 16;
    const runner_config rc = {.kv_type = dtype, .block_size = bs, .identity_blocks = (n_ctx + bs - 1) / bs,
                              .max_tokens = max_batch, .max_out = max_batch, .n_threads = n_threads,
                              .n_ctx = n_ctx};
    return runner_init(&r->run, m, &rc);
}

void seq_runner_free(seq_runner *r) { runner_destroy(&r->run); }

int seq_runner_feed(seq_runner *r, const int32_t *tokens, int n, int start, float *logits, bool all_logits) {
    if (start + n > r->n_ctx) return err_set("%d tokens exceed the context of %d", start + n, r->n_ctx);
    int32_t *pos = malloc((size_t)r->max_batch * sizeof *pos);
    int32_t *seq = calloc((size_t)r->max_batch, sizeof *seq);
    int32_t *rows = malloc((size_t)r->max_batch * sizeof *rows);
    int rc = 0;
    if (!pos || !seq || !rows) rc = err_oom("out of memory");
    const fwd_seq s = runner_identity_seq(&r->run);
    const size_t nv = (size_t)r->m->hp.n_vocab;
    for (int done = 0; !rc && done < n;) {
        const int chunk = n - done < r->max_batch ? n - done : r->max_batch;
        for (int i = 0; i < chunk; i++) pos[i] = start + done + i, rows[i] = i;
        const bool last = done + chunk == n;
        fwd_batch b = {.n_tokens = chunk, .tokens = tokens + done, .pos = pos, .seq = seq, .n_seqs = 1,
                       .seqs = &s};
        if (all_logits) {
            b.n_out = chunk;
            b.out_rows = rows;
        } else if (last && logits) {
            b.n_out = 1;
            rows[0] = chunk - 1;
            b.out_rows = rows;
        }
        rc = runner_run(&r->run, &b, all_logits ? logits + (size_t)done * nv : logits);
        done += chunk;
    }
    free(pos);
    free(seq);
    free(rows);
    return rc;
}

void print_spec_stats(FILE *f, const char *label, const engine_stats *st) {
    const double n = (double)st->spec_drafts, n_draft = (double)st->spec_draft_tokens,
                 n_acc = (double)st->spec_accepted_tokens;
    fprintf(f, "%s%.0f drafts, %.0f draft tokens, %.0f accepted: acceptance rate %.1f%%, mean accepted length %.2f\n",
            label, n, n_draft, n_acc, n_draft > 0 ? 100.0 * n_acc / n_draft : 0.0, n > 0 ? 1.0 + n_acc / n : 0.0);
    if (n_draft == 0) return;
    if (st->spec_lookup_tokens)
        fprintf(f, "%sfrom n-gram lookup: %llu draft tokens, %llu accepted (%.1f%%)\n", label,
                (unsigned long long)st->spec_lookup_tokens, (unsigned long long)st->spec_lookup_accepted,
                100.0 * (double)st->spec_lookup_accepted / (double)st->spec_lookup_tokens);
    /* Per draft position (for Medusa, per head): accepted where that position was drafted. */
    fprintf(f, "%saccepted by draft position:", label);
    for (int i = 0; i < SPEC_MAX_TOKENS && st->spec_drafted_per_pos[i]; i++)
        fprintf(f, " %d: %.1f%% of %llu;", i + 1, 100.0 * (double)st->spec_accepted_per_pos[i] / (double)st->spec_drafted_per_pos[i],
                (unsigned long long)st->spec_drafted_per_pos[i]);
    fprintf(f, "\n");
    if (st->spec_paths_moved)
        fprintf(f, "%sdraft tree: %llu accepted paths moved into place\n", label,
                (unsigned long long)st->spec_paths_moved);
}
