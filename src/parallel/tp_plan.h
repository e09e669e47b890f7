/* The messages rank 0 sends the other ranks of a tensor-parallel job, as
 * flat int32 arrays: a fixed header, then (for a forward) a payload.
 *
 *   TP_MSG_KV_INIT  a cache like rank 0's: dtype, block size, blocks
 *   TP_MSG_KV_COPY  copy block src to dst (copy on write)
 *   TP_MSG_FORWARD  one forward's batch: tokens, positions, sequence of
 *                   each token, and each sequence's block tables (up to the
 *                   block of its last position, per layer group)
 *   TP_MSG_SHUTDOWN leave the loop
 *
 * The other ranks need nothing of the scheduler but this: rank 0 decides
 * which blocks hold what, and every rank's cache has the same blocks (each
 * holding that rank's KV heads). They compute no logits (n_out 0): the
 * output head and sampling are rank 0's. */
#ifndef CLLM_PARALLEL_TP_PLAN_H
#define CLLM_PARALLEL_TP_PLAN_H

#include "kv/kv_cache.h"
#include "model/forward.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { TP_MSG_FORWARD = 1, TP_MSG_KV_INIT, TP_MSG_KV_COPY, TP_MSG_SHUTDOWN } tp_msg_kind;

/* kind, then per kind: FORWARD n_tokens, n_seqs, n_groups, and d: 1 when
 * the forward rotates with LongRoPE's long factors (rank 0's context picks
 * them: runner_config.n_ctx); KV_INIT dtype, block_size, n_blocks; KV_COPY
 * src, dst. payload_len counts int32s. */
typedef struct {
    int32_t kind;
    int32_t a, b, c, d;
    int32_t payload_len;
} tp_msg_header;

/* A forward's payload, encoded (tp_plan_encode) or decoded (tp_plan_decode,
 * where batch points into `data`). */
typedef struct {
    int32_t *data;
    size_t len, cap;
    fwd_batch batch;
    fwd_seq *seqs;
    int32_t *lens; /* decoded: each sequence's table length */
    size_t seqs_cap, lens_cap;
} tp_plan;

/* Encodes batch b over cache kv into p->data and fills h. -1 with err_get()
 * on out of memory. */
int tp_plan_encode(tp_plan *p, const kv_cache *kv, const fwd_batch *b, tp_msg_header *h);
/* Room for h's payload in p->data (p->len set), before it is received. */
int tp_plan_reserve(tp_plan *p, const tp_msg_header *h);
/* Decodes p->data under header h into p->batch (n_out 0), checking every
 * length and that each token's block (of block_size tokens) is in its
 * sequence's tables; block ids are checked by forward_run. */
int tp_plan_decode(tp_plan *p, const tp_msg_header *h, int block_size);
void tp_plan_free(tp_plan *p);

#endif
