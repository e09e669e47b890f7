/* One forward pass over a flat batch of tokens from many sequences. Each token
 * carries its position and sequence; each sequence brings its KV block tables
 * (one per layer group). The K and V of every token are written into the paged
 * cache, then every token attends to its sequence's cached positions, so a
 * batch may mix prompt chunks and single decode tokens freely. Logits are
 * computed only for the rows the caller asks for. */
#ifndef CLLM_MODEL_FORWARD_H
#define CLLM_MODEL_FORWARD_H

#include "kv/kv_cache.h"
#include "model/model.h"
#include "util/threadpool.h"

typedef struct {
    /* Logical block i of the sequence lives in physical block block_table[g][i]
     * of group g. Sliding groups may hold -1 for blocks that left the window. */
    const int32_t *block_table[KV_MAX_GROUPS];
} fwd_seq;

typedef struct {
    int n_tokens;
    const int32_t *tokens;  /* [n_tokens] */
    const int32_t *pos;     /* [n_tokens] position within its sequence */
    const int32_t *seq;     /* [n_tokens] index into seqs */
    int n_seqs;
    const fwd_seq *seqs;
    int n_out;
    const int32_t *out_rows; /* [n_out] token rows whose logits are wanted */
} fwd_batch;

typedef struct forward_ctx forward_ctx;

/* Scratch for batches of up to max_tokens tokens and max_out logit rows. */
forward_ctx *forward_create(const model *m, kv_cache *kv, int max_tokens, int max_out, threadpool *tp);
void forward_free(forward_ctx *f);

/* Writes logits [n_out][n_vocab]. Returns 0, or -1 with err_get(). */
int forward_run(forward_ctx *f, const fwd_batch *b, float *logits);

#endif
