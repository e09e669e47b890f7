/* AVX2 paged attention: scores for a block of keys at a time, then one
 * rescale of the accumulator per block rather than per key. */
#include "kernels/attention.h"

#include "kernels/quants_avx2.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

static inline __m256 load8(const uint8_t *base, bool f16, int i) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(base + 2 * (size_t)i)));
    return _mm256_loadu_ps((const float *)base + i);
}

static inline float load1(const uint8_t *base, bool f16, int i) {
    if (f16) {
        uint16_t h = ((const uint16_t *)base)[i];
        return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
    }
    return ((const float *)base)[i];
}

static float dot(const float *q, const uint8_t *k, bool f16, int n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int d = 0;
    for (; d + 16 <= n; d += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8(k, f16, d), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), load8(k, f16, d + 8), a1);
    }
    for (; d + 8 <= n; d += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8(k, f16, d), a0);
    float s = qa_hsum_ps(_mm256_add_ps(a0, a1));
    for (; d < n; d++) s += q[d] * load1(k, f16, d);
    return s;
}

static void axpy(float *acc, float p, const uint8_t *v, bool f16, int n) {
    const __m256 pv = _mm256_set1_ps(p);
    int d = 0;
    for (; d + 8 <= n; d += 8)
        _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(pv, load8(v, f16, d), _mm256_loadu_ps(acc + d)));
    for (; d < n; d++) acc[d] += p * load1(v, f16, d);
}

void attn_paged_avx2(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                     int hi, float scale, float *out) {
    const int bs = kv->block_size, dk = kv->head_dim_k, dv = kv->head_dim_v;
    const size_t esz = kv->f16 ? 2 : 4;
    float m = -INFINITY, l = 0;
    float s[ATTN_MAX_BLOCK];
    for (int d = 0; d < dv; d++) out[d] = 0;
    for (int j0 = lo; j0 <= hi;) {
        const int b = j0 / bs, t0 = j0 % bs;
        const int t1 = (b + 1) * bs - 1 <= hi ? bs - 1 : hi % bs;
        const size_t row0 = (size_t)kv_head * bs;
        const uint8_t *kblk = kv->k + (size_t)block_table[b] * kv->k_block_stride;
        const uint8_t *vblk = kv->v + (size_t)block_table[b] * kv->v_block_stride;
        float mb = -INFINITY;
        for (int t = t0; t <= t1; t++) {
            s[t] = scale * dot(q, kblk + (row0 + t) * dk * esz, kv->f16, dk);
            if (s[t] > mb) mb = s[t];
        }
        if (mb > m) {
            const float c = expf(m - mb);
            l *= c;
            const __m256 cv = _mm256_set1_ps(c);
            int d = 0;
            for (; d + 8 <= dv; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(cv, _mm256_loadu_ps(out + d)));
            for (; d < dv; d++) out[d] *= c;
            m = mb;
        }
        for (int t = t0; t <= t1; t++) {
            const float p = expf(s[t] - m);
            l += p;
            axpy(out, p, vblk + (row0 + t) * dv * esz, kv->f16, dv);
        }
        j0 += t1 - t0 + 1;
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < dv; d++) out[d] *= inv;
}
