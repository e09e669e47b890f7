/* Tiles over the x8 layout (x8_layout.c): 8 interleaved weight rows of
 * Q4_0, Q5_0 or Q8_0 by up to X8_TILE_COLS activation rows (X8_COLS; X8_COLS_EVEX
 * in the AVX512-VNNI build), for one-token and
 * small-batch matmuls. Included by gemm_x8_avx2.c (GEMM_VNNI 0) and the VNNI
 * builds gemm_x8_vnni_avx2.c and gemm_x8_vnni512_avx2.c (GEMM_VNNI 1), where
 * vpdpbusd does a group's maddubs and the widening after it in one
 * instruction. The weights stream from memory in the order they are
 * stored, one sequential read per thread, and a group's vector holds 4
 * elements of each of the 8 rows: the 4 activation bytes of the group,
 * broadcast, meet all 8 rows in one maddubs, and after the block's 8 groups
 * the lanes hold the 8 rows' sums with no horizontal reduction. In memory
 * the layout costs what the rows cost, and in a decode step it moves the
 * kernels from compute-bound to near the memory bound.
 *
 * The arithmetic is the direct tiles' (gemm_legacy_avx2.c): per block the
 * exact integer sum I of levels times activation quants, then
 * acc = fma(float(I), d_w * d_a, acc) block after block, so x8, tiles and
 * panels give the same bits and matmul may take any of them.
 *   Q8_0: |w| times y with w's sign moved onto y (the products of two signed
 *         bytes would overflow maddubs' 16-bit pairs otherwise); a madd per
 *         group widens the pair sums. vpdpbusd sums in 32 bits, so the VNNI
 *         builds take the unsigned w + 128 (one xor per group, shared by
 *         every activation row) times y and subtract 128 sum(y) once per
 *         block: a row then costs one instruction per group, not two.
 *   Q4_0, Q5_0: the unsigned level u = w + off (8 or 16) times signed y; four
 *         groups' pair sums stay below 4 * 2 * 31 * 127 < 2^15, so one madd
 *         per half block, and the offset comes off once per block as
 *         off * sum(y), which the prepared activations carry.
 *
 * Activations come prepared once per matmul (gemm_prep_x8_q8_0_avx2): per
 * block the scale as f32, the sum of the quants as int32, and the 32 quants. */
#ifndef GEMM_VNNI
#error "define GEMM_VNNI to 0 or 1 before including gemm_x8_impl.h"
#endif

#include "kernels/quants_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"
#if GEMM_VNNI
#include "kernels/gemm_vnni.h"
#endif

#include <string.h>

enum { X_Q4_0, X_Q5_0, X_Q8_0 };

_Static_assert(X8_TILE_COLS >= 1 && X8_TILE_COLS <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

GEMM_INLINE size_t x8_block_bytes(int T) {
    return T == X_Q4_0 ? X8_BLOCK_Q4_0 : T == X_Q5_0 ? X8_BLOCK_Q5_0 : X8_BLOCK_Q8_0;
}


/* With 3 or more activation rows a Q8_0 tile spends long enough on each
 * block's vpdpbusd work that the hardware prefetchers fall behind the
 * stream: prefetching this far ahead took gemma-3-270m's Q8_0 output head
 * (1 thread, AMD Zen 4) from 8.0-8.2 to 6.6-7.0 ms at 4 rows and from
 * 12.5-12.8 to 11.1-11.3 at 8 (bench/RESULTS.md). At 1 and 2 rows, which
 * stream at memory speed, on Q4_0/Q5_0 and in the plain AVX2 build it
 * neither gained nor lost. The last blocks prefetch past the matrix:
 * prefetches do not fault. */
#define X8_Q8_PREFETCH 6144
#define X8_Q8_PREFETCH_MIN_COLS 3

GEMM_INLINE void x8_tile(const int T, const int NC, int nb, float *restrict s, size_t ldc,
                         const uint8_t *x, const uint8_t *y, size_t by) {
    const size_t xsz = x8_block_bytes(T);
    const int off = T == X_Q4_0 ? 8 : 16;
    __m256 acc[X8_TILE_COLS]; /* not [NC]: see gemm_x8_k_impl.h */
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = x + (size_t)b * xsz;
        if (T == X_Q8_0 && NC >= X8_Q8_PREFETCH_MIN_COLS) /* see X8_Q8_PREFETCH */
            for (int i = 0; i < X8_BLOCK_Q8_0; i += 64)
                _mm_prefetch((const char *)blk + X8_Q8_PREFETCH + i, _MM_HINT_T0);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        __m256i lv[8];
#if !GEMM_VNNI
        __m256i wv[8]; /* Q8_0's signed levels: maddubs takes their signs onto the activations */
#endif
        if (T == X_Q8_0) {
            for (int k = 0; k < 8; k++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * k));
#if GEMM_VNNI
                lv[k] = _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)); /* w + 128 */
#else
                wv[k] = w;
                lv[k] = _mm256_abs_epi8(w);
#endif
            }
        } else {
            const uint8_t *qs = blk + (T == X_Q5_0 ? 48 : 16);
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
                lv[k] = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
                lv[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
            }
            if (T == X_Q5_0) {
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
                for (int g = 0; g < 8; g++) lv[g] = _mm256_or_si256(lv[g], x8_bit_to_4(qh, g));
            }
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = y + (size_t)c * by + (size_t)b * X8_ACT_BLOCK;
            const uint8_t *aq = ab + 8;
            __m256i isum;
            if (T == X_Q8_0) {
#if GEMM_VNNI /* two chains: even and odd groups; (w + 128) y, less 128 sum(y) once per block */
                int32_t ysum;
                memcpy(&ysum, ab + 4, sizeof ysum);
                __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
                for (int k = 0; k < 8; k += 2) {
                    even = GEMM_DPBUSD(even, lv[k], x8_bcast4(aq + 4 * k));
                    odd = GEMM_DPBUSD(odd, lv[k + 1], x8_bcast4(aq + 4 * k + 4));
                }
                isum = _mm256_sub_epi32(_mm256_add_epi32(even, odd), _mm256_set1_epi32(128 * ysum));
#else
                isum = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) {
                    const __m256i p =
                        _mm256_maddubs_epi16(lv[k], _mm256_sign_epi8(x8_bcast4(aq + 4 * k), wv[k]));
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
                }
#endif
            } else {
                int32_t ysum;
                memcpy(&ysum, ab + 4, sizeof ysum);
#if GEMM_VNNI /* two chains: the low and the high half of the block */
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
                for (int k = 0; k < 4; k++) {
                    lo = GEMM_DPBUSD(lo, lv[k], x8_bcast4(aq + 4 * k));
                    hi = GEMM_DPBUSD(hi, lv[k + 4], x8_bcast4(aq + 16 + 4 * k));
                }
                isum = _mm256_add_epi32(lo, hi);
#else
                __m256i lo = _mm256_maddubs_epi16(lv[0], x8_bcast4(aq));
                __m256i hi = _mm256_maddubs_epi16(lv[4], x8_bcast4(aq + 16));
                for (int k = 1; k < 4; k++) {
                    lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(lv[k], x8_bcast4(aq + 4 * k)));
                    hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(lv[k + 4], x8_bcast4(aq + 16 + 4 * k)));
                }
                isum = _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_set1_epi16(1)),
                                        _mm256_madd_epi16(hi, _mm256_set1_epi16(1)));
#endif
                isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(off * ysum));
            }
            float da;
            memcpy(&da, ab, sizeof da);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(da)), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(s + (size_t)c * ldc, acc[c]);
}

/* The body of the entry points, which each build's file spells out:
 * gemm_x8_q4_0_q8_0_avx2 is x8_tile_any(X_Q4_0, ...). */
GEMM_INLINE void x8_tile_any(const int T, int n, int nc, float *restrict s, size_t ldc, const uint8_t *x,
                             const uint8_t *y, size_t by) {
    const int nb = n / 32;
#define X8_TILE(NCV) x8_tile(T, NCV, nb, s, ldc, x, y, by)
    GEMM_DISPATCH(nc, X8_TILE_COLS, X8_TILE)
#undef X8_TILE
}
