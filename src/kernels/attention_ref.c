/* Scalar reference of paged attention; see attention.h. */
#include "kernels/attention.h"

#include <math.h>
#include <stddef.h>

/* Value dimensions per pass over the keys: the accumulator of one pass is
 * that many doubles on the stack (8 KB). A wider value head (model/arch.c
 * accepts up to 4096) takes several passes; each recomputes the same scores
 * and softmax sums, so every output is the same bits as in one pass. */
#define ATTN_REF_DIMS 1024

/* out[d] for d0 <= d < d0 + nd (nd <= ATTN_REF_DIMS). */
static void attn_pass(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q,
                      int lo, int hi, float scale, int d0, int nd, float *out) {
    const int bs = kv->block_size, dk = kv->head_dim_k;
    const size_t k_row = kv_row_bytes(kv->dtype, dk), v_row = paged_v_row_bytes(kv);
    double m = -INFINITY, l = 0;
    double acc[ATTN_REF_DIMS];
    for (int d = 0; d < nd; d++) acc[d] = 0;
    for (int j = lo; j <= hi; j++) {
        const int blk = block_table[j / bs], tok = j % bs;
        const size_t row = (size_t)kv_head * bs + tok;
        const uint8_t *krow = kv->k + (size_t)blk * kv->k_block_stride + row * k_row;
        const uint8_t *vrow = kv->v + (size_t)blk * kv->v_block_stride + row * v_row;
        double s = 0;
        for (int d = 0; d < dk; d++) s += (double)q[d] * kv_row_value(kv->dtype, krow, d);
        s *= scale;
        if (s > m) {
            const double c = exp(m - s);
            l *= c;
            for (int d = 0; d < nd; d++) acc[d] *= c;
            m = s;
        }
        const double p = exp(s - m);
        l += p;
        for (int d = 0; d < nd; d++) acc[d] += p * kv_row_value(kv->dtype, vrow, d0 + d);
    }
    for (int d = 0; d < nd; d++) out[d0 + d] = (float)(acc[d] / l);
}

void attn_paged_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                    int hi, float scale, float *out) {
    for (int d0 = 0; d0 < kv->head_dim_v; d0 += ATTN_REF_DIMS) {
        const int nd = kv->head_dim_v - d0 < ATTN_REF_DIMS ? kv->head_dim_v - d0 : ATTN_REF_DIMS;
        attn_pass(kv, block_table, kv_head, q, lo, hi, scale, d0, nd, out);
    }
}
