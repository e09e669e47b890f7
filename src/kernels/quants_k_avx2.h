/* AVX2 building blocks of the K-quant kernels, shared by the dot products
 * (quants_k_avx2.c) and the gemm tiles (gemm_k_avx2.c): sub-block scales
 * spread to 16-bit lanes, bit picking, and the Q4_K/Q5_K scale unpacking.
 * Include only from *_avx2.c files. */
#ifndef CLLM_KERNELS_QUANTS_K_AVX2_H
#define CLLM_KERNELS_QUANTS_K_AVX2_H

#include "kernels/quants_avx2.h"

/* Sub-block scales as 16 int16 [s0..s7 | s8..s15]; scale_pair(h, k) below
 * picks the two that apply to chunk k (32 elements) of half h: s[8h + 2k] for
 * its first 16 elements (the low lane of maddubs' output), s[8h + 2k + 1] for
 * the rest. */
typedef struct {
    __m256i half[2]; /* the lane of half h copied to both lanes */
} scales16;

static inline scales16 scales16_make(__m256i s) {
    scales16 r;
    r.half[0] = _mm256_permute2x128_si256(s, s, 0x00);
    r.half[1] = _mm256_permute2x128_si256(s, s, 0x11);
    return r;
}

static inline __m256i scale_pair(const scales16 *s, int h, int k) {
    const char a = (char)(4 * k), b = (char)(4 * k + 2);
    const __m256i pick = _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a,
                                          a + 1, a, a + 1, a, a + 1, b, b + 1, b, b + 1, b, b + 1,
                                          b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
    return _mm256_shuffle_epi8(s->half[h], pick);
}

/* Bit `bit` of each byte of v moved to bit `to` (other bits cleared). */
static inline __m256i take_bit(__m256i v, int bit, int to) {
    const __m256i shifted =
        bit >= to ? _mm256_srli_epi16(v, bit - to) : _mm256_slli_epi16(v, to - bit);
    return _mm256_and_si256(shifted, _mm256_set1_epi8((char)(1 << to)));
}

static inline __m256i load256(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

/* The 8 scales and 8 mins of a Q4_K/Q5_K block as 16-bit lanes [sc | m]. */
static inline __m256i k4_scales_mins(const uint8_t *p) {
    uint32_t w[3];
    memcpy(w, p, sizeof w);
    const uint32_t sc_lo = w[0] & 0x3f3f3f3fu;
    const uint32_t m_lo = w[1] & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    return _mm256_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)m_lo, (int)m_hi));
}

/* Broadcast of the 16-bit scale j (0..7) of a [sc|sc] vector. */
static inline __m256i scale_at(__m256i sc, int j) {
    const char a = (char)(2 * j), b = (char)(2 * j + 1);
    return _mm256_shuffle_epi8(sc,
                               _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, a,
                                                b, a, b, a, b, a, b, a, b, a, b, a, b, a, b));
}

/* The sum of a Q4_K/Q5_K dot: the scaled level sums (acc) and the min terms
 * (acc_m, 4 lanes). */
static inline float k4_finish(__m256 acc, __m128 acc_m) {
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    return qa_hsum_ps(acc) + _mm_cvtss_f32(acc_m);
}

#endif
