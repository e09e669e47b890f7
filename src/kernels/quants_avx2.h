/* Small AVX2 building blocks shared by the AVX2 kernel files (the dot
 * products, the gemm tiles, attention). Include only from files compiled
 * with -mavx2 -mfma -mf16c (the *_avx2.c files). */
#ifndef CLLM_KERNELS_QUANTS_AVX2_H
#define CLLM_KERNELS_QUANTS_AVX2_H

#include "util/fp16.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* f16 -> f32 with the F16C instruction (exact, like f16_to_f32). */
static inline float qa_f16(f16_t h) {
    return _cvtsh_ss(h);
}

/* The four f16 values at p (lane 0 = the first), read as one 8-byte memory
 * operand of vcvtph2ps: so p needs 8 readable bytes, true of the leading
 * scale fields of every 32-element block. The memory form matters: with the
 * value in a register the conversion also takes a shuffle-port uop, and the
 * dot products are short of exactly that port (compilers do not fold the load
 * themselves, hence the asm). */
typedef struct {
    uint8_t b[8];
} qa_bytes8;

static inline __m128 qa_f16x4(const void *p) {
    __m128 r;
    __asm__("vcvtph2ps %1, %0" : "=x"(r) : "m"(*(const qa_bytes8 *)p));
    return r;
}

static inline float qa_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int qa_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline float qa_hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Sums of 4 adjacent unsigned x signed byte products, as 8 int32: maddubs
 * pair sums widened with madd. A pair sum saturates past 32767, which the
 * ranges used here never reach (x <= 63, or x <= 128 with |y| <= 127). */
static inline __m256i qa_dot_u8i8(__m256i x, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* Same for two signed operands: move x's sign onto y (|x| as unsigned).
 * Needs y != -128 where x < 0, which holds for our activation quants. */
static inline __m256i qa_dot_i8i8(__m256i x, __m256i y) {
    return qa_dot_u8i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* The 32 nibbles of 16 bytes as bytes 0..15: low nibbles (elements 0..15)
 * in the low lane, high nibbles (16..31) in the high lane. The broadcast
 * load and per-lane shift keep it off the shuffle port. */
static inline __m256i qa_nibbles32(const uint8_t *qs) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(0x0F));
}

/* Byte j = 0xFF where bit j of the 32 bits at p is set, else 0. */
static inline __m256i qa_bits32(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, sizeof bits);
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

#endif
