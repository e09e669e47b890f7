/* Scalar reference kernels for ggml's K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * (256-element super-blocks whose sub-block scales are themselves quantized)
 * and their activation format Q8_K.
 *
 * Each weight type first unpacks a super-block into 256 small integers and
 * per-sub-block integer scales (and mins); the dequantizer, the dot product
 * and the tests all go through that one unpacking, in the element order of
 * the row. Dequantizers evaluate (d * sc) * q - (dmin * m) in f32 in ggml's
 * order, so they match ggml and the Python gguf package bit for bit. Dot
 * products use only the quants of the Q8_K block (not its bsums, so a wrong
 * bsum shows up as a fast/ref mismatch) and accumulate in double.
 *
 * The quantizers follow ggml's reference ones: a scale (and min) search per
 * sub-block (quants_k_search.c), the sub-block scales quantized against the
 * largest, then every value re-rounded against its quantized scale. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_blocks.h"
#include "kernels/quants_k_search.h"

#include <math.h>
#include <stdbool.h>

static inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- shared bit packing ---- */

/* Q2_K/Q3_K low bits: in each half of 128, element 32k + l is bits 2k..2k+1
 * of qs[l]. */
static void unpack_2bit(const uint8_t *qs, uint8_t q[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * k + l] = (qs[32 * h + l] >> (2 * k)) & 3;
}

static void pack_2bit(const uint8_t q[QK_K], uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *p = q + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
        }
}

/* Q4_K/Q5_K low bits: in each chunk of 64, element l in the low nibble of
 * qs[l], element 32 + l in the high nibble. */
static void unpack_4bit(const uint8_t *qs, uint8_t q[QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = qs[32 * c + l] & 0xF;
            q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
}

static void pack_4bit(const uint8_t q[QK_K], uint8_t *qs) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)((q[64 * c + l] & 0xF) | ((q[64 * c + 32 + l] & 0xF) << 4));
}

/* Q4_K/Q5_K scales: the 8 6-bit scales and mins quantized against the largest
 * of each, into the 12-byte packing k4_scale_min reads. Returns the two f16
 * super-block factors through d and dmin. */
static void pack_k4_scales(const float scales[8], const float mins[8], uint8_t out[12], f16_t *d,
                           f16_t *dmin) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(out, 0, 12);
    for (int j = 0; j < 8; j++) {
        int ls = clamp_int(quant_nearest_int(inv_scale * scales[j]), 0, 63);
        int lm = clamp_int(quant_nearest_int(inv_min * mins[j]), 0, 63);
        if (j < 4) {
            out[j] = (uint8_t)ls;
            out[j + 4] = (uint8_t)lm;
        } else {
            out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = f32_to_f16(max_scale / 63.f);
    *dmin = f32_to_f16(max_min / 63.f);
}

/* ---- unpacked super-blocks: q[e] and, per sub-block, integer scale/min ---- */

typedef struct {
    int16_t q[QK_K]; /* signed level of each element, offset already removed */
    int sc[16];      /* per sub-block (16 of 16 or 8 of 32 elements) */
    int m[16];       /* mins (Q2_K, Q4_K, Q5_K), else 0 */
    float d, dmin;
    int sub;      /* elements per sub-block */
    bool has_min; /* x = d sc q - dmin m rather than d sc q */
} kblock;

static void unpack_q2_K(const block_q2_K *b, kblock *k) {
    uint8_t q[QK_K];
    unpack_2bit(b->qs, q);
    for (int e = 0; e < QK_K; e++)
        k->q[e] = q[e];
    for (int j = 0; j < 16; j++) {
        k->sc[j] = b->scales[j] & 0xF;
        k->m[j] = b->scales[j] >> 4;
    }
    k->d = f16_to_f32(b->d);
    k->dmin = f16_to_f32(b->dmin);
    k->sub = 16;
    k->has_min = true;
}

static void unpack_q3_K(const block_q3_K *b, kblock *k) {
    uint8_t q[QK_K];
    int8_t sc[16];
    unpack_2bit(b->qs, q);
    for (int e = 0; e < QK_K; e++)
        k->q[e] = (int16_t)(q[e] - (((b->hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4));
    q3k_unpack_scales(b->scales, sc);
    for (int j = 0; j < 16; j++) {
        k->sc[j] = sc[j];
        k->m[j] = 0;
    }
    k->d = f16_to_f32(b->d);
    k->dmin = 0;
    k->sub = 16;
    k->has_min = false;
}

/* Q4_K (qh NULL) and Q5_K share everything but the fifth bit. */
static void unpack_k4(const uint8_t *scales, f16_t d, f16_t dmin, const uint8_t *qs,
                      const uint8_t *qh, kblock *k) {
    uint8_t q[QK_K];
    unpack_4bit(qs, q);
    for (int e = 0; e < QK_K; e++)
        k->q[e] = (int16_t)(q[e] | (qh ? ((qh[e % 32] >> (e / 32)) & 1) << 4 : 0));
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        k4_scale_min(j, scales, &sc, &m);
        k->sc[j] = sc;
        k->m[j] = m;
    }
    k->d = f16_to_f32(d);
    k->dmin = f16_to_f32(dmin);
    k->sub = 32;
    k->has_min = true;
}

static void unpack_q4_K(const block_q4_K *b, kblock *k) {
    unpack_k4(b->scales, b->d, b->dmin, b->qs, NULL, k);
}

static void unpack_q5_K(const block_q5_K *b, kblock *k) {
    unpack_k4(b->scales, b->d, b->dmin, b->qs, b->qh, k);
}

static void unpack_q6_K(const block_q6_K *b, kblock *k) {
    for (int h = 0; h < 2; h++)
        for (int kk = 0; kk < 4; kk++)
            for (int l = 0; l < 32; l++) {
                int lo = (b->ql[64 * h + l + 32 * (kk & 1)] >> (4 * (kk >> 1))) & 0xF;
                int hi = (b->qh[32 * h + l] >> (2 * kk)) & 3;
                k->q[128 * h + 32 * kk + l] = (int16_t)((lo | (hi << 4)) - 32);
            }
    for (int j = 0; j < 16; j++) {
        k->sc[j] = b->scales[j];
        k->m[j] = 0;
    }
    k->d = f16_to_f32(b->d);
    k->dmin = 0;
    k->sub = 16;
    k->has_min = false;
}

/* (d * sc) * q - (dmin * m), the f32 operation order of ggml's dequantizers
 * (types without mins skip the subtraction, as ggml does, which matters only
 * for the sign of a zero). */
static void kblock_to_float(const kblock *k, float *y) {
    for (int e = 0; e < QK_K; e++) {
        const int j = e / k->sub;
        const float dl = k->d * (float)k->sc[j];
        y[e] = k->has_min ? dl * (float)k->q[e] - k->dmin * (float)k->m[j] : dl * (float)k->q[e];
    }
}

/* Exact sum over the super-block of (d sc q - dmin m) * (yd qy), in double. */
static double kblock_dot(const kblock *k, const block_q8_K *y) {
    int64_t sum_q = 0, sum_m = 0;
    for (int j = 0; j < QK_K / k->sub; j++) {
        int isum = 0, ysum = 0;
        for (int e = j * k->sub; e < (j + 1) * k->sub; e++) {
            isum += k->q[e] * y->qs[e];
            ysum += y->qs[e];
        }
        sum_q += (int64_t)k->sc[j] * isum;
        sum_m += (int64_t)k->m[j] * ysum;
    }
    return (double)y->d * ((double)k->d * (double)sum_q - (double)k->dmin * (double)sum_m);
}

/* ---- per type: the unpacking above, then kblock_to_float or kblock_dot ---- */

enum { K_Q2, K_Q3, K_Q4, K_Q5, K_Q6 };

/* Super-block i of a row of type T (constant in each caller). */
static inline __attribute__((always_inline)) void unpack_block(int T, const void *x, int64_t i,
                                                               kblock *k) {
    switch (T) {
    case K_Q2:
        unpack_q2_K((const block_q2_K *)x + i, k);
        break;
    case K_Q3:
        unpack_q3_K((const block_q3_K *)x + i, k);
        break;
    case K_Q4:
        unpack_q4_K((const block_q4_K *)x + i, k);
        break;
    case K_Q5:
        unpack_q5_K((const block_q5_K *)x + i, k);
        break;
    default:
        unpack_q6_K((const block_q6_K *)x + i, k);
    }
}

static inline __attribute__((always_inline)) void k_to_float(int T, const void *x, float *y,
                                                             int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++) {
        kblock k;
        unpack_block(T, x, i, &k);
        kblock_to_float(&k, y + i * QK_K);
    }
}

static inline __attribute__((always_inline)) float k_dot(int T, int n, const void *x,
                                                         const block_q8_K *y) {
    double acc = 0;
    for (int i = 0; i < n / QK_K; i++) {
        kblock k;
        unpack_block(T, x, i, &k);
        acc += kblock_dot(&k, &y[i]);
    }
    return (float)acc;
}

void q2_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    k_to_float(K_Q2, x, y, n);
}

void q3_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    k_to_float(K_Q3, x, y, n);
}

void q4_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    k_to_float(K_Q4, x, y, n);
}

void q5_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    k_to_float(K_Q5, x, y, n);
}

void q6_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    k_to_float(K_Q6, x, y, n);
}

void vec_dot_q2_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y) {
    *s = k_dot(K_Q2, n, x, y);
}

void vec_dot_q3_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y) {
    *s = k_dot(K_Q3, n, x, y);
}

void vec_dot_q4_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y) {
    *s = k_dot(K_Q4, n, x, y);
}

void vec_dot_q5_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y) {
    *s = k_dot(K_Q5, n, x, y);
}

void vec_dot_q6_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y) {
    *s = k_dot(K_Q6, n, x, y);
}

/* ---- quantizers ---- */

void q2_K_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q2_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float scales[16], mins[16], w[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] = qk_search_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f,
                                            15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit scales and mins against the largest of each. */
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = f32_to_f16(max_scale > 0 ? max_scale / 15.f : 0.f);
        y[i].dmin = f32_to_f16(max_min > 0 ? max_min / 15.f : 0.f);
        for (int j = 0; j < 16; j++) {
            int ls = max_scale > 0 ? quant_nearest_int(15.f / max_scale * scales[j]) : 0;
            int lm = max_min > 0 ? quant_nearest_int(15.f / max_min * mins[j]) : 0;
            y[i].scales[j] = (uint8_t)(clamp_int(ls, 0, 15) | (clamp_int(lm, 0, 15) << 4));
        }
        for (int j = 0; j < 16; j++) {
            const float d = f16_to_f32(y[i].d) * (float)(y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = f16_to_f32(y[i].dmin) * (float)(y[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] =
                    (uint8_t)clamp_int(quant_nearest_int((x[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, y[i].qs);
    }
}

/* Q3_K and Q6_K: the levels of 16 sub-blocks of 16 re-rounded against their
 * quantized scales d * sc[j], nearest(x / (d sc[j])) in -nmax..nmax-1, stored
 * + nmax. A sub-block whose scale is 0 keeps the levels of its search. */
static void requantize_sym16(const float *x, f16_t d, const int8_t sc[16], int nmax,
                             int8_t L[QK_K]) {
    for (int j = 0; j < 16; j++) {
        const float dj = f16_to_f32(d) * (float)sc[j];
        if (!dj) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] =
                (int8_t)(clamp_int(quant_nearest_int(x[16 * j + l] / dj), -nmax, nmax - 1) + nmax);
    }
}

void q3_K_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q3_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[16];
        for (int j = 0; j < 16; j++)
            scales[j] = qk_search_scale_q3(16, 4, x + 16 * j, L + 16 * j);
        const float max_scale = quant_signed_absmax(scales, 16);
        /* 6-bit signed scales (-32..31) against the largest, sign included. */
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = clamp_int(quant_nearest_int(iscale * scales[j]), -32, 31) + 32;
                y[i].scales[j % 8] |= (uint8_t)((l & 0xF) << (4 * (j / 8)));
                y[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = f32_to_f16(1 / iscale);
        } else {
            y[i].d = f32_to_f16(0.f);
        }
        int8_t sc[16];
        q3k_unpack_scales(y[i].scales, sc);
        requantize_sym16(x, y[i].d, sc, 4, L);
        /* L is 0..7 here: bit 2 goes to hmask, bits 0-1 to qs. */
        uint8_t low[QK_K];
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 3) y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            low[e] = (uint8_t)(L[e] & 3);
        }
        pack_2bit(low, y[i].qs);
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32 with a scale and a min each, searched with
 * weights rms(x) + |x| so large values and the group as a whole both count. */
static void quantize_k4_levels(const float *x, int nmax, float rmin, int nstep, uint8_t L[QK_K],
                               uint8_t scales_out[12], f16_t *d_out, f16_t *dmin_out) {
    float scales[8], mins[8], w[32];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xs[l]);
        scales[j] =
            qk_search_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    }
    pack_k4_scales(scales, mins, scales_out, d_out, dmin_out);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        k4_scale_min(j, scales_out, &sc, &m);
        const float d = f16_to_f32(*d_out) * (float)sc;
        if (!d) continue;
        const float dm = f16_to_f32(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] =
                (uint8_t)clamp_int(quant_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

void q4_K_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        quantize_k4_levels(x, 15, -1.f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
        pack_4bit(L, y[i].qs);
    }
}

void q5_K_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        quantize_k4_levels(x, 31, -0.5f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int e = 0; e < QK_K; e++)
            if (L[e] > 15) y[i].qh[e % 32] |= (uint8_t)(1u << (e / 32));
        pack_4bit(L, y[i].qs);
    }
}

void q6_K_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[16];
        for (int j = 0; j < 16; j++)
            scales[j] = qk_search_scale_sym(16, 32, x + 16 * j, L + 16 * j);
        const float max_scale = quant_signed_absmax(scales, 16);
        memset(&y[i], 0, sizeof y[i]);
        if (fabsf(max_scale) < 1e-15f) continue; /* all (near) zero: d = 0, all 0 */
        /* int8 scales against the largest; it maps to -128 so its sign flips. */
        const float iscale = -128.f / max_scale;
        y[i].d = f32_to_f16(1 / iscale);
        for (int j = 0; j < 16; j++)
            y[i].scales[j] = (int8_t)clamp_int(quant_nearest_int(iscale * scales[j]), -128, 127);
        requantize_sym16(x, y[i].d, y[i].scales, 32, L);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *p = L + 128 * h + l;
                y[i].ql[64 * h + l] = (uint8_t)((p[0] & 0xF) | ((p[64] & 0xF) << 4));
                y[i].ql[64 * h + l + 32] = (uint8_t)((p[32] & 0xF) | ((p[96] & 0xF) << 4));
                y[i].qh[32 * h + l] = (uint8_t)((p[0] >> 4) | ((p[32] >> 4) << 2) |
                                                ((p[64] >> 4) << 4) | ((p[96] >> 4) << 6));
            }
    }
}

/* ---- Q8_K ---- */

void q8_K_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++)
            y[j] = x[i].d * (float)x[i].qs[j];
}

/* Symmetric: q = nearest(x * 127 / amax), ties to even (ggml's scales by
 * -127 / max, the signed extreme; we use the magnitude so the AVX2 version
 * needs no search for the sign). */
void q8_K_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = 0;
        for (int j = 0; j < QK_K; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0) continue;
        const float iscale = 127.f / amax;
        for (int j = 0; j < QK_K; j++)
            y[i].qs[j] = (int8_t)clamp_int(quant_nearest_int(iscale * x[j]), -127, 127);
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
