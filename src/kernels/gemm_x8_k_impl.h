/* Tiles over the x8 layout of Q4_K, Q5_K and Q6_K (x8_layout.c): 8
 * interleaved weight rows by up to X8_TILE_COLS Q8_K activation rows (X8_COLS;
 * X8_COLS_EVEX in the AVX512-VNNI build), as
 * gemm_x8_avx2.c does for the 32-element formats. A group's vector holds 4
 * levels of each of the 8 rows; the 4 activation bytes of the group,
 * broadcast, meet them in one maddubs, and the 16-bit sums of a sub-block
 * meet the 8 rows' scales, spread to 16-bit pairs, in one madd.
 *
 * Included by gemm_x8_k_avx2.c (GEMM_VNNI 0) and by the VNNI builds
 * gemm_x8_k_vnni_avx2.c and gemm_x8_k_vnni512_avx2.c (GEMM_VNNI 1), where
 * vpdpbusd does a group's maddubs and the 16-bit add after it in one
 * instruction, into 32-bit sums per sub-block that meet the scales, widened
 * to 32 bits, in one vpmulld: a quarter fewer instructions per weight in
 * Q4_K, which is what a decode step's x8 tiles are short of at two threads.
 *
 * The arithmetic is the K tiles' (gemm_k_impl.h): per super-block the exact
 * integer sums I = sum_j sc_j * sum_{k in j} q_k y_k (Q6_K: less
 * 32 * sum_j sc_j * bsum_j) and M = sum_j m_j * ysum_j (Q4_K, Q5_K), then
 * acc = fma(float(I), d_w * d_a, acc), accm = fma(float(M), dmin_w * d_a,
 * accm), and the output is acc - accm: the same bits as the tiles and the
 * panels, in every build.
 *
 * The 16-bit sums of the AVX2 build stay in range: Q4_K sums the 8 groups of
 * a sub-block (8 * 2 * 15 * 127 < 2^15), Q5_K 4 groups (4 * 2 * 31 * 127),
 * Q6_K two groups at a time (2 * 2 * 63 * 127); the VNNI builds' sums are
 * 32-bit. */
#ifndef GEMM_VNNI
#error "define GEMM_VNNI to 0 or 1 before including gemm_x8_k_impl.h"
#endif

#include "kernels/quants_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"
#if GEMM_VNNI
#include "kernels/gemm_vnni.h"
#endif

#include <stdbool.h>

_Static_assert(X8_TILE_COLS >= 1 && X8_TILE_COLS <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

/* The tiles' per-column arrays are sized X8_TILE_COLS, not NC: declared [NC]
 * (NC a parameter), GCC 12 kept them as variable-length arrays on the stack
 * even where the tile was inlined with a constant NC, so the accumulators
 * lived in memory. That cost the AVX512-VNNI build's one-column Q6_K tile a
 * third of its speed on an AMD Zen 4 (qwen3-1.7b's Q6_K output matrix at 1
 * thread: 17.0-17.3 -> 12.7-13.7 ms, bench/RESULTS.md). */

GEMM_INLINE __m256i xk_load(const uint8_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}


/* 8 unsigned bytes (one per row) as 16-bit pairs [v_r v_r] per 32-bit lane. */
GEMM_INLINE __m256i xk_spread_u8(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* 8 unsigned bytes (one per row) widened to 32-bit lanes. */
GEMM_INLINE __m256i xk_widen_u8(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

GEMM_INLINE void xk_store(const int NC, float *restrict s, size_t ldc, const __m256 *acc, const __m256 *accm) {
    for (int c = 0; c < NC; c++) _mm256_storeu_ps(s + (size_t)c * ldc, _mm256_sub_ps(acc[c], accm[c]));
}

/* ---- Q4_K and Q5_K ---- */


/* Q5_K's levels reach 31, so its 16-bit sums take 4 groups, not 8. */
GEMM_INLINE void x8_q4k_tile(const bool Q5, const int NC, int nb, float *restrict s, size_t ldc, const uint8_t *x,
                             const uint8_t *y, size_t by) {
    const size_t bsz = Q5 ? X8_BLOCK_Q5_K : X8_BLOCK_Q4_K;
    const size_t qs_off = Q5 ? 416 : 160;
    __m256 acc[X8_TILE_COLS], accm[X8_TILE_COLS];
    for (int c = 0; c < NC; c++) acc[c] = accm[c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = x + (size_t)b * bsz;
        const block_q8_K *yb[X8_TILE_COLS];
        for (int c = 0; c < NC; c++) yb[c] = (const block_q8_K *)(y + (size_t)c * by) + b;
        __m256i isum[X8_TILE_COLS], msum[X8_TILE_COLS];
        for (int c = 0; c < NC; c++) isum[c] = msum[c] = _mm256_setzero_si256();
        for (int ch = 0; ch < 4; ch++) { /* sub-blocks 2ch (low nibbles) and 2ch + 1 (high) */
#if GEMM_VNNI
            /* One column alone gets two chains of dpbusd (even and odd groups) per sub-block, so
             * that their latency overlaps; more columns are chains enough. */
            const int CH = NC == 1 ? 4 : NC == 2 ? 2 : 1;
            const __m256i sl = xk_widen_u8(blk + 32 + 8 * (2 * ch)), sh = xk_widen_u8(blk + 32 + 8 * (2 * ch + 1));
            __m256i lo[X8_TILE_COLS][4], hi[X8_TILE_COLS][4];
            for (int c = 0; c < NC; c++)
                for (int h = 0; h < CH; h++) lo[c][h] = hi[c][h] = _mm256_setzero_si256();
#else
            const __m256i sl = xk_spread_u8(blk + 32 + 8 * (2 * ch)), sh = xk_spread_u8(blk + 32 + 8 * (2 * ch + 1));
            __m256i lo[X8_TILE_COLS], hi[X8_TILE_COLS]; /* 16-bit sums of up to 8 groups (Q5: 4) */
            for (int c = 0; c < NC; c++) lo[c] = hi[c] = _mm256_setzero_si256();
#endif
            for (int k = 0; k < 8; k++) {
                const __m256i v = xk_load(blk + qs_off + 256 * ch + 32 * k);
                __m256i ql = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
                __m256i qh = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
                if (Q5) {
                    const __m256i hb = xk_load(blk + 160 + 32 * k);
                    ql = _mm256_or_si256(ql, x8_bit_to_4(hb, 2 * ch));
                    qh = _mm256_or_si256(qh, x8_bit_to_4(hb, 2 * ch + 1));
                }
                for (int c = 0; c < NC; c++) {
#if GEMM_VNNI
                    lo[c][k % CH] = GEMM_DPBUSD(lo[c][k % CH], ql, x8_bcast4(yb[c]->qs + 64 * ch + 4 * k));
                    hi[c][k % CH] = GEMM_DPBUSD(hi[c][k % CH], qh, x8_bcast4(yb[c]->qs + 64 * ch + 32 + 4 * k));
#else
                    const __m256i pl = _mm256_maddubs_epi16(ql, x8_bcast4(yb[c]->qs + 64 * ch + 4 * k));
                    const __m256i ph = _mm256_maddubs_epi16(qh, x8_bcast4(yb[c]->qs + 64 * ch + 32 + 4 * k));
                    lo[c] = _mm256_add_epi16(lo[c], pl);
                    hi[c] = _mm256_add_epi16(hi[c], ph);
                    if (Q5 && k == 3) { /* the first 4 groups' sums out before they could overflow */
                        isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(lo[c], sl),
                                                                             _mm256_madd_epi16(hi[c], sh)));
                        lo[c] = hi[c] = _mm256_setzero_si256();
                    }
#endif
                }
            }
            for (int c = 0; c < NC; c++) {
#if GEMM_VNNI
                __m256i l = lo[c][0], h = hi[c][0];
                for (int i = 1; i < CH; i++) l = _mm256_add_epi32(l, lo[c][i]), h = _mm256_add_epi32(h, hi[c][i]);
                isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_mullo_epi32(l, sl),
                                                                     _mm256_mullo_epi32(h, sh)));
#else
                isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(lo[c], sl),
                                                                     _mm256_madd_epi16(hi[c], sh)));
#endif
            }
        }
        for (int j = 0; j < 8; j++) { /* the mins: m_j * (bsums[2j] + bsums[2j + 1]) */
            const __m256i m = xk_spread_u8(blk + 96 + 8 * j);
            for (int c = 0; c < NC; c++)
                msum[c] = _mm256_add_epi32(msum[c], _mm256_madd_epi16(m, x8_bcast4(yb[c]->bsums + 2 * j)));
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
        for (int c = 0; c < NC; c++) {
            const __m256 dy = _mm256_set1_ps(yb[c]->d);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, dy), acc[c]);
            accm[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[c]), _mm256_mul_ps(dm, dy), accm[c]);
        }
    }
    xk_store(NC, s, ldc, acc, accm);
}

/* ---- Q6_K ---- */

/* Q6_K reads each super-block in two streams (the low nibbles, then the top
 * bits 1 KiB further on, a quarter at a time), which the hardware
 * prefetchers follow worse than Q4_K's one: from DRAM at one thread its tile
 * ran at about half the speed it has from L3. Prefetching the bytes this far
 * ahead of the block being read gave +15-20% there (bench/RESULTS.md); on
 * Q4_K the same prefetch cost a little, so only Q6_K has it. The last
 * blocks prefetch past the matrix: prefetches do not fault. */
#define X8_Q6K_PREFETCH 2048

/* Group g's levels (0..63) from its low-nibble vector and its qh vector. */
GEMM_INLINE __m256i x8_q6k_levels(__m256i l, __m256i h, int g) {
    const __m256i nib = g < 32 ? _mm256_and_si256(l, _mm256_set1_epi8(0x0F))
                               : _mm256_and_si256(_mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0F));
    const int i = g / 16; /* bits 2i..2i+1 of h, to bits 4..5 */
    const __m256i top = i < 2 ? _mm256_slli_epi16(h, 4 - 2 * i) : i == 2 ? h : _mm256_srli_epi16(h, 2);
    return _mm256_or_si256(nib, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
}

GEMM_INLINE void x8_q6k_tile(const int NC, int nb, float *restrict s, size_t ldc, const uint8_t *x,
                             const uint8_t *y, size_t by) {
    __m256 acc[X8_TILE_COLS], accm[X8_TILE_COLS];
    for (int c = 0; c < NC; c++) acc[c] = accm[c] = _mm256_setzero_ps();
    /* [lo lo hi hi] bytes of each 32-bit lane: a scale pair's first or second */
    const __m256i dup_first = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5,
                                               4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i dup_second = _mm256_add_epi8(dup_first, _mm256_set1_epi8(2));
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = x + (size_t)b * X8_BLOCK_Q6_K;
        for (int i = 0; i < X8_BLOCK_Q6_K; i += 64) /* see X8_Q6K_PREFETCH */
            _mm_prefetch((const char *)blk + X8_Q6K_PREFETCH + i, _MM_HINT_T0);
        const block_q8_K *yb[X8_TILE_COLS];
        for (int c = 0; c < NC; c++) yb[c] = (const block_q8_K *)(y + (size_t)c * by) + b;
        __m256i isum[X8_TILE_COLS], corr[X8_TILE_COLS];
        for (int c = 0; c < NC; c++) isum[c] = corr[c] = _mm256_setzero_si256();
#if GEMM_VNNI
        __m256i isum2[X8_TILE_COLS];
        for (int c = 0; c < NC; c++) isum2[c] = _mm256_setzero_si256();
#endif
        /* unrolled: each group's vector offsets, nibble half and shift are then constants */
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) { /* sub-blocks 2p, 2p + 1: groups 8p .. 8p + 7 */
            const __m128i raw = _mm_loadu_si128((const __m128i *)(blk + 16 + 16 * p));
            const __m256i sc = _mm256_cvtepi8_epi16(raw);
            const __m256i s0 = _mm256_shuffle_epi8(sc, dup_first), s1 = _mm256_shuffle_epi8(sc, dup_second);
            __m256i q[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const int g = 8 * p + k;
                q[k] = x8_q6k_levels(xk_load(blk + 144 + 32 * (g % 32)), xk_load(blk + 1168 + 32 * (g % 16)), g);
            }
            for (int c = 0; c < NC; c++) {
                const int8_t *aq = yb[c]->qs + 32 * p;
                __m256i h[4];
                for (int t = 0; t < 4; t++)
                    h[t] = _mm256_add_epi16(_mm256_maddubs_epi16(q[2 * t], x8_bcast4(aq + 8 * t)),
                                            _mm256_maddubs_epi16(q[2 * t + 1], x8_bcast4(aq + 8 * t + 4)));
#if GEMM_VNNI /* madd and add in one; two accumulators, so that each chain is 2 long per pair */
                isum[c] = GEMM_DPWSSD(GEMM_DPWSSD(isum[c], h[0], s0), h[1], s0);
                isum2[c] = GEMM_DPWSSD(GEMM_DPWSSD(isum2[c], h[2], s1), h[3], s1);
#else
                const __m256i v0 = _mm256_add_epi32(_mm256_madd_epi16(h[0], s0), _mm256_madd_epi16(h[1], s0));
                const __m256i v1 = _mm256_add_epi32(_mm256_madd_epi16(h[2], s1), _mm256_madd_epi16(h[3], s1));
                isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(v0, v1));
#endif
                corr[c] = _mm256_add_epi32(corr[c], _mm256_madd_epi16(sc, x8_bcast4(yb[c]->bsums + 2 * p)));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        for (int c = 0; c < NC; c++) {
#if GEMM_VNNI
            isum[c] = _mm256_add_epi32(isum[c], isum2[c]);
#endif
            const __m256i I = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(corr[c], 5));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I), _mm256_mul_ps(dw, _mm256_set1_ps(yb[c]->d)), acc[c]);
        }
    }
    xk_store(NC, s, ldc, acc, accm);
}

/* The bodies of the entry points, which each build's file spells out:
 * gemm_x8_q4_K_q8_K_avx2 is x8k_any(X8K_Q4, ...). */
enum { X8K_Q4, X8K_Q5, X8K_Q6 };

GEMM_INLINE void x8k_any(const int T, int n, int nc, float *restrict s, size_t ldc, const void *restrict x,
                         const void *restrict y, size_t by) {
    const int nb = n / QK_K;
#define X8_TILE(NCV)                                                                                        \
    (T == X8K_Q6 ? x8_q6k_tile(NCV, nb, s, ldc, x, y, by) : x8_q4k_tile(T == X8K_Q5, NCV, nb, s, ldc, x, y, by))
    GEMM_DISPATCH(nc, X8_TILE_COLS, X8_TILE)
#undef X8_TILE
}
