/* Multi-head latent attention (DeepSeek-V2). Keys and values of every head
 * come from one latent vector per token (kv_a's first mla_kv_rank outputs,
 * RMS-normed) and one rope key shared by the heads (its last rope_dim
 * outputs, rotated). The KV cache holds exactly that: one kv head whose key
 * row is [latent | rope key], its value row the key row's first mla_kv_rank
 * dims (kv_spec.v_in_k: no bytes of its own), so a token costs
 * (mla_kv_rank + rope_dim) numbers per layer instead of n_head (key + value
 * dims).
 *
 * Attention runs on the latent directly ("absorbed" weights): head h's
 * query nope part q_n becomes k_b[h] . q_n (k_b[h] maps a latent to that
 * head's nope key, so q_n . (k_b^T c) = (k_b q_n) . c), the rope part rides
 * along, and the attention kernels then see plain multi-query attention of
 * head dims (mla_kv_rank + rope_dim, mla_kv_rank). Each head's output, a
 * weighted sum of latents, becomes its value dims through v_b[h] before the
 * output projection. The per-head products run as one matmul_multi. */
#ifndef CLLM_MODEL_MLA_H
#define CLLM_MODEL_MLA_H

#include "model/model.h"
#include "util/threadpool.h"

#include <stddef.h>

typedef struct mla_scratch mla_scratch;

/* Buffers for batches of up to max_tokens tokens; NULL with err_get(). */
mla_scratch *mla_scratch_create(const model *m, int max_tokens);
void mla_scratch_free(mla_scratch *s);

/* Bytes of matmul scratch the layers' q and kv_a projections need (the
 * per-head products have their own). */
size_t mla_matmul_scratch_size(const model *m, int max_tokens);

/* Layer il's attention inputs for x [n][n_embd]: q [n][n_head][head_dim_k]
 * (absorbed and rotated), and the cache rows k [n][head_dim_k] and
 * v [n][head_dim_v]. cs: [n][rope_dim] cos/sin pairs of each token's
 * position. */
void mla_qkv(threadpool *threads, const model *m, int il, const float *x, int n, const float *cs, float *q, float *k,
             float *v, mla_scratch *s, void *mm_scratch);

/* Layer il's value dims out [n][n_head * mla_v_dim] from the attention's
 * per-head latents att [n][n_head][mla_kv_rank]. */
void mla_values(threadpool *threads, const model *m, int il, const float *att, int n, float *out, mla_scratch *s);

#endif
