/* Attention of one query head over a paged KV cache. Keys and values are read
 * through the sequence's block table, block by block, with an online softmax
 * (running max and sum), so neither decode nor a long prefill ever holds a
 * score row longer than one block: memory is linear in the sequence length.
 * Scalar reference in attention_ref.c, AVX2 in attention_avx2.c. */
#ifndef CLLM_KERNELS_ATTENTION_H
#define CLLM_KERNELS_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One layer's K and V pages: block b's rows start at k + b * k_block_stride,
 * laid out [kv_head][token][dim]. */
typedef struct {
    const uint8_t *k;
    const uint8_t *v;
    size_t k_block_stride; /* bytes */
    size_t v_block_stride;
    bool f16;        /* element type: f16 when true, else f32 */
    int block_size;  /* at most ATTN_MAX_BLOCK */
    int n_kv_heads;
    int head_dim_k;
    int head_dim_v;
} paged_kv;

#define ATTN_MAX_BLOCK 64

/* out[head_dim_v] = softmax(scale * q.K[j]) . V[j] over key positions
 * lo <= j <= hi of kv head `kv_head`, whose block ids are block_table[j / block_size]. */
typedef void (*attn_fn)(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q,
                        int lo, int hi, float scale, float *out);

void attn_paged_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                    int hi, float scale, float *out);
void attn_paged_avx2(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                     int hi, float scale, float *out);

/* The fast variant when the CPU has AVX2, else the reference. */
attn_fn attn_paged_best(void);

#endif
