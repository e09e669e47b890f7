/* What the AVX2 gemm tile files (gemm_legacy_avx2.c, gemm_k_*avx2.c,
 * gemm_panel_*avx2.c, gemm_float_avx2.c, gq_avx2.c) share: the tile body is an
 * always-inlined function of constant shape, instantiated once per column
 * count (GEMM_DISPATCH), and the steps the direct tiles and the panels have
 * in common. Include only from *_avx2.c files. */
#ifndef CLLM_KERNELS_GEMM_AVX2_H
#define CLLM_KERNELS_GEMM_AVX2_H

#include "kernels/quants_avx2.h"

#include <immintrin.h>
#include <stdint.h>

#define GEMM_INLINE static inline __attribute__((always_inline))

/* Keeps v in a register, as it is here: without it GCC reassociates integer
 * accumulations over unrolled loops into trees of partial products, and
 * spills them. */
#define GEMM_KEEP(v) __asm__("" : "+x"(v))

/* Activation rows an x8 tile takes in this build (gemm_x8_impl.h,
 * gemm_x8_k_impl.h): X8_COLS_EVEX where AVX-512 gives 32 registers. */
#if defined(GEMM_VNNI_EVEX) && GEMM_VNNI_EVEX
#define X8_TILE_COLS X8_COLS_EVEX
#else
#define X8_TILE_COLS X8_COLS
#endif

/* switch (nc) over CALL(1) .. CALL(MAXC), MAXC <= 8; column counts above
 * MAXC never come, and their cases compile to the MAXC one. */
#define GEMM_CASE_(NCV, MAXC, CALL)                                                                \
    case NCV:                                                                                      \
        CALL((NCV) < (MAXC) ? (NCV) : (MAXC));                                                     \
        break;

#define GEMM_DISPATCH(nc, MAXC, CALL)                                                              \
    switch (nc) {                                                                                  \
        GEMM_CASE_(1, MAXC, CALL)                                                                  \
        GEMM_CASE_(2, MAXC, CALL)                                                                  \
        GEMM_CASE_(3, MAXC, CALL)                                                                  \
        GEMM_CASE_(4, MAXC, CALL)                                                                  \
        GEMM_CASE_(5, MAXC, CALL)                                                                  \
        GEMM_CASE_(6, MAXC, CALL)                                                                  \
        GEMM_CASE_(7, MAXC, CALL)                                                                  \
    default:                                                                                       \
        CALL(MAXC);                                                                                \
    }

/* ---- for the direct tiles (4 weight rows per vector of results) ---- */

/* Four vectors of 16-bit pair sums (one per weight row) -> [r0 r1 r2 r3] per
 * 128-bit half, as int32: the rows transposed into the lanes and summed. A
 * lane sums 4 pair sums of one row, which the callers keep in 16 bits. */
GEMM_INLINE __m256i transpose_sum4_i16(const __m256i p[4]) {
    const __m256i t01 =
        _mm256_add_epi16(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
    const __m256i t23 =
        _mm256_add_epi16(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
    /* t01 = [r0 r0 r1 r1 r0 r0 r1 r1], t23 likewise for rows 2 and 3 */
    const __m256i u =
        _mm256_add_epi16(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
    return _mm256_madd_epi16(u, _mm256_set1_epi16(1));
}

/* The same for four vectors of int32 sums. */
GEMM_INLINE __m256i transpose_sum4_i32(const __m256i q[4]) {
    const __m256i t01 =
        _mm256_add_epi32(_mm256_unpacklo_epi32(q[0], q[1]), _mm256_unpackhi_epi32(q[0], q[1]));
    const __m256i t23 =
        _mm256_add_epi32(_mm256_unpacklo_epi32(q[2], q[3]), _mm256_unpackhi_epi32(q[2], q[3]));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
}

/* The f16 at byte offset `off` of four blocks, as floats. */
GEMM_INLINE __m128 rows4_f16(const uint8_t *const blk[4], size_t off) {
    f16_t h[4];
    for (int r = 0; r < 4; r++)
        memcpy(&h[r], blk[r] + off, sizeof h[r]);
    return _mm_cvtph_ps(
        _mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

/* The f16 at p in all four lanes, as floats. */
GEMM_INLINE __m128 bcast_f16(const void *p) {
    f16_t h;
    memcpy(&h, p, sizeof h);
    return _mm_set1_ps(qa_f16(h));
}

/* ---- for the x8 tiles (gemm_x8_avx2.c, gemm_x8_k_avx2.c) ---- */

/* The 4 bytes at p in every 32-bit lane. */
GEMM_INLINE __m256i x8_bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Bit s of every byte of qh moved to bit 4: a 5-bit level's high bit. The
 * 16-bit shifts carry bits across bytes, and the mask drops them. */
GEMM_INLINE __m256i x8_bit_to_4(__m256i qh, int s) {
    const __m256i at4 = s < 4 ? _mm256_slli_epi16(qh, 4 - s) : s > 4 ? _mm256_srli_epi16(qh, s - 4) : qh;
    return _mm256_and_si256(at4, _mm256_set1_epi8(0x10));
}

/* ---- for the packed panels ---- */

/* In place: v[k] becomes the vector of dword k of v[0..7] (8x8 transpose of
 * 32-bit elements). */
GEMM_INLINE void transpose8_epi32(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

typedef struct {
    uint8_t b[4];
} bytes4;

/* The 4 bytes at p in every 32-bit lane, as vpbroadcastd's memory form: a
 * load-port uop only. Left to themselves, compilers keep the bytes in a
 * register and broadcast them with two shuffles, on the port the tile is
 * short of. */
GEMM_INLINE __m256i bcast32(const void *p) {
    __m256i r;
    __asm__("vpbroadcastd %1, %0" : "=x"(r) : "m"(*(const bytes4 *)p));
    return r;
}

#endif
