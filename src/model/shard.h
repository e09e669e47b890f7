/* Tensor parallelism's split of a model: rank r of n keeps its share of
 * the attention heads and of the FFN's hidden columns, so its matmuls, its
 * attention and its KV cache shrink by n; the embeddings, the norms and the
 * output head stay whole on every rank.
 *
 *   attention: query heads [r*h/n, (r+1)*h/n) (rows of attn_q and its bias,
 *     columns of attn_output); the KV heads those queries read: n_kv/n of
 *     them when n divides n_kv, else (n a multiple of n_kv, e.g. Gemma 3
 *     270M's 1 KV head on 2 ranks) the one KV head of the rank's queries,
 *     replicated on the ranks that share it;
 *   FFN: hidden columns [r*f/n, (r+1)*f/n) (rows of gate and up, columns of
 *     down).
 *
 * Each rank's attn_output and ffn_down then give a partial sum of the full
 * result; forward.c adds them over the ranks (model_tp.allreduce). Rows are
 * views into the file; a column split copies each row's share, which must
 * start and end on the weight type's quantization blocks (32 for Q8_0/Q4_0,
 * 256 for the K-quants). */
#ifndef CLLM_MODEL_SHARD_H
#define CLLM_MODEL_SHARD_H

#include "model/model.h"

/* Cuts m (bound, not yet repacked) down to shard `rank` of `size`; the
 * hyper-parameters become the shard's (n_head, n_head_kv, n_ff). -1 with
 * err_get() saying which size does not divide. */
int model_shard(model *m, int rank, int size);

#endif
