/* The attention each cached key receives, for H2O eviction (kv/kv_evict.h);
 * see attention.h. Scalar: a key row is decoded once and dotted with every
 * query head of its GQA group; the scores are computed twice (running max
 * and sum, then the probabilities), so no row of scores is held. */
#include "kernels/attention.h"

#include <math.h>

#define PROBS_MAX_DIM 4096 /* head_dim <= 4096 (model/arch.c) */
#define PROBS_MAX_Q 32     /* query heads per pass */

static const uint8_t *key_row(const paged_kv *kv, const int32_t *block_table, int kv_head, int j) {
    const int bs = kv->block_size;
    const size_t row = (size_t)kv_head * bs + j % bs;
    return kv->k + (size_t)block_table[j / bs] * kv->k_block_stride + row * kv_row_bytes(kv->dtype, kv->head_dim_k);
}

static void probs_pass(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, size_t q_stride,
                       int n_q, int lo, int hi, float scale, float *acc) {
    const int dk = kv->head_dim_k;
    float key[PROBS_MAX_DIM];
    double m[PROBS_MAX_Q], l[PROBS_MAX_Q];
    for (int h = 0; h < n_q; h++) m[h] = -INFINITY, l[h] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int j = lo; j <= hi; j++) {
            const uint8_t *row = key_row(kv, block_table, kv_head, j);
            for (int d = 0; d < dk; d++) key[d] = kv_row_value(kv->dtype, row, d);
            double p_sum = 0;
            for (int h = 0; h < n_q; h++) {
                const float *qh = q + (size_t)h * q_stride;
                float s = 0;
                for (int d = 0; d < dk; d++) s += qh[d] * key[d];
                const double sc = (double)s * scale;
                if (pass == 0) {
                    if (sc > m[h]) l[h] = l[h] * exp(m[h] - sc), m[h] = sc;
                    l[h] += exp(sc - m[h]);
                } else {
                    p_sum += exp(sc - m[h]) / l[h];
                }
            }
            if (pass == 1) acc[j] += (float)p_sum;
        }
}

void attn_probs_accumulate(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q,
                           size_t q_stride, int n_q, int lo, int hi, float scale, float *acc) {
    for (int h0 = 0; h0 < n_q; h0 += PROBS_MAX_Q) {
        const int n = n_q - h0 < PROBS_MAX_Q ? n_q - h0 : PROBS_MAX_Q;
        probs_pass(kv, block_table, kv_head, q + (size_t)h0 * q_stride, q_stride, n, lo, hi, scale, acc);
    }
}
