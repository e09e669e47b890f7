/* Scalar reference of paged attention; see attention.h. */
#include "kernels/attention.h"

#include "kernels/wtype.h"
#include "util/fp16.h"

#include <math.h>
#include <stddef.h>

static float load(const uint8_t *base, bool f16, size_t i) {
    if (f16) return f16_to_f32(((const f16_t *)base)[i]);
    return ((const float *)base)[i];
}

void attn_paged_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                    int hi, float scale, float *out) {
    const int bs = kv->block_size, dk = kv->head_dim_k, dv = kv->head_dim_v;
    const size_t esz = kv->f16 ? 2 : 4;
    double m = -INFINITY, l = 0;
    double acc[1024];
    for (int d = 0; d < dv; d++) acc[d] = 0;
    for (int j = lo; j <= hi; j++) {
        const int blk = block_table[j / bs], tok = j % bs;
        const size_t row = (size_t)kv_head * bs + tok;
        const uint8_t *krow = kv->k + (size_t)blk * kv->k_block_stride + row * dk * esz;
        const uint8_t *vrow = kv->v + (size_t)blk * kv->v_block_stride + row * dv * esz;
        double s = 0;
        for (int d = 0; d < dk; d++) s += (double)q[d] * load(krow, kv->f16, d);
        s *= scale;
        if (s > m) {
            const double c = exp(m - s);
            l *= c;
            for (int d = 0; d < dv; d++) acc[d] *= c;
            m = s;
        }
        const double p = exp(s - m);
        l += p;
        for (int d = 0; d < dv; d++) acc[d] += p * load(vrow, kv->f16, d);
    }
    for (int d = 0; d < dv; d++) out[d] = (float)(acc[d] / l);
}

attn_fn attn_paged_best(void) { return wtype_using_avx2() ? attn_paged_avx2 : attn_paged_ref; }
