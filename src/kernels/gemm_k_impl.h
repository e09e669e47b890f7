/* Tile kernels (wtype_gemm_fn) for Q4_K, Q5_K and Q6_K weights against Q8_K
 * activations: the body of gemm_k_avx2.c (AVX2) and gemm_k_vnni_avx2.c
 * (AVX-VNNI, whose vpdpwssd does the madd and the add below in one), which
 * include it with GEMM_VNNI set to 0 or 1. Not a header to include anywhere
 * else.
 *
 * The K-quants' sub-block scales are small integers, so a super-block's dot
 * stays in 32-bit integers: per 32 elements, maddubs of levels and
 * activations, madd with the sub-block scale (which also widens), add. A
 * tile of GEMM_K_ROWS weight rows by up to GEMM_K_COLS activation rows keeps
 * one such integer accumulator per output in registers through the
 * super-block; each weight row's levels and scales are unpacked once per 32
 * elements and meet every activation row, each activation vector is loaded
 * once for all the weight rows. Once per super-block the accumulators are
 * scaled into per-output float vectors, and those are summed horizontally at
 * the end. Mins (Q4_K, Q5_K) and offsets (Q6_K) come from Q8_K's bsums as in
 * the dot products (quants_k_avx2.c), whose arithmetic each output repeats.
 *
 * Rows beyond nr repeat row 0 and are computed but not stored, so every
 * output sees the same operations whatever the tile's shape; those are the
 * operations of the AVX2 dot products too (their integer sums are exact, in
 * whatever order, and their float steps are these), so a single activation
 * row goes through vec_dot, which does it faster. */
#include "kernels/quants_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"
#include "kernels/quants_k_avx2.h"

#include <stdbool.h>

#ifndef GEMM_VNNI
#error "define GEMM_VNNI to 0 or 1 before including gemm_k_impl.h"
#endif

#define KR GEMM_K_ROWS
#define KC GEMM_K_COLS

/* acc + the 32-bit pair sums of scale * p (16-bit lanes). */
GEMM_INLINE __m256i madd_acc(__m256i acc, __m256i scale, __m256i p) {
#if GEMM_VNNI
    return _mm256_dpwssd_avx_epi32(acc, scale, p);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(scale, p));
#endif
}

typedef struct {
    const uint8_t *row[KR];
    const uint8_t *col[KC];
} k_tile_ptrs;

GEMM_INLINE k_tile_ptrs tile_ptrs(int nr, int nc, const uint8_t *x, size_t bx, const uint8_t *y,
                                  size_t by) {
    k_tile_ptrs p;
    for (int r = 0; r < KR; r++)
        p.row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    for (int c = 0; c < KC; c++)
        p.col[c] = y + (size_t)(c < nc ? c : 0) * by;
    return p;
}

/* ---- Q4_K and Q5_K ---- */

GEMM_INLINE void k4_tile(const bool Q5, const int NC, int nb, int nr, float *restrict s, size_t ldc,
                         const k_tile_ptrs *p) {
    const size_t wsz = Q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[KR][KC];
    __m128 acc_m[KR][KC];
    for (int r = 0; r < KR; r++)
        for (int c = 0; c < NC; c++) {
            acc[r][c] = _mm256_setzero_ps();
            acc_m[r][c] = _mm_setzero_ps();
        }
    for (int i = 0; i < nb; i++) {
        const block_q8_K *yb[KC];
        __m128i bsum32[KC]; /* activation sums per 32 elements */
        for (int c = 0; c < NC; c++) {
            yb[c] = (const block_q8_K *)p->col[c] + i;
            const __m256i bs = load256(yb[c]->bsums);
            bsum32[c] = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        }
        const uint8_t *qs[KR], *qh[KR];
        __m256i sc[KR];
        float d[KR];
        for (int r = 0; r < KR; r++) {
            const uint8_t *blk = p->row[r] + (size_t)i * wsz;
            /* Q4_K and Q5_K share the d, dmin, scales prefix */
            const block_q4_K *b4 = (const block_q4_K *)blk;
            const __m256i sm = k4_scales_mins(b4->scales);
            sc[r] = _mm256_permute2x128_si256(sm, sm, 0x00);
            qs[r] = Q5 ? ((const block_q5_K *)blk)->qs : b4->qs;
            qh[r] = Q5 ? ((const block_q5_K *)blk)->qh : NULL;
            d[r] = qa_f16(b4->d);
            const float dmin = qa_f16(b4->dmin);
            const __m128i mins = _mm256_extracti128_si256(sm, 1);
            for (int c = 0; c < NC; c++) {
                const __m128 mterm = _mm_cvtepi32_ps(_mm_madd_epi16(mins, bsum32[c]));
                acc_m[r][c] = _mm_fmadd_ps(_mm_set1_ps(-yb[c]->d * dmin), mterm, acc_m[r][c]);
            }
        }
        __m256i sumi[KR][KC];
        for (int r = 0; r < KR; r++)
            for (int c = 0; c < NC; c++)
                sumi[r][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i q[KR], scale[KR];
            for (int r = 0; r < KR; r++) {
                const __m256i bits = load256(qs[r] + 32 * (j / 2));
                q[r] = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(bits, 4) : bits, m4);
                if (Q5) q[r] = _mm256_or_si256(q[r], take_bit(load256(qh[r]), j, 4));
                scale[r] = scale_at(sc[r], j);
            }
            for (int c = 0; c < NC; c++) {
                const __m256i yv = load256(yb[c]->qs + 32 * j);
                for (int r = 0; r < KR; r++) {
                    sumi[r][c] = madd_acc(sumi[r][c], scale[r], _mm256_maddubs_epi16(q[r], yv));
                    GEMM_KEEP(sumi[r][c]);
                }
            }
        }
        for (int r = 0; r < KR; r++) {
            for (int c = 0; c < NC; c++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(yb[c]->d * d[r]),
                                            _mm256_cvtepi32_ps(sumi[r][c]), acc[r][c]);
        }
    }
    for (int c = 0; c < NC; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ldc + r] = k4_finish(acc[r][c], acc_m[r][c]);
}

/* ---- Q6_K ---- */

/* Chunk k (0..3) of a half of a Q6_K block as levels 0..63, from the half's
 * ql (64 bytes) and qh (32 bytes); see vec_dot_q6_K_q8_K_avx2. */
GEMM_INLINE __m256i q6k_levels(const uint8_t *ql, const uint8_t *qh, int k) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    const __m256i l = load256(ql + 32 * (k & 1));
    const __m256i hb = load256(qh);
    switch (k) {
    case 0:
        return _mm256_or_si256(_mm256_and_si256(l, m4),
                               _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
    case 1:
        return _mm256_or_si256(
            _mm256_and_si256(l, m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
    case 2:
        return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
                               _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
    default:
        return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), _mm256_set1_epi8(0x30)));
    }
}

GEMM_INLINE void q6k_tile(const int NC, int nb, int nr, float *restrict s, size_t ldc,
                          const k_tile_ptrs *p) {
    __m256 acc[KR][KC];
    for (int r = 0; r < KR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const block_q8_K *yb[KC];
        for (int c = 0; c < NC; c++)
            yb[c] = (const block_q8_K *)p->col[c] + i;
        const block_q6_K *xb[KR];
        __m256i sc16[KR];
        scales16 sc[KR];
        __m256i sumi[KR][KC];
        for (int r = 0; r < KR; r++) {
            xb[r] = (const block_q6_K *)p->row[r] + i;
            sc16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xb[r]->scales));
            sc[r] = scales16_make(sc16[r]);
            /* Levels 0..63 stand for -32..31: 32 * sum_j sc_j * bsum_j comes off. */
            for (int c = 0; c < NC; c++)
                sumi[r][c] = _mm256_sub_epi32(
                    _mm256_setzero_si256(),
                    _mm256_slli_epi32(_mm256_madd_epi16(sc16[r], load256(yb[c]->bsums)), 5));
        }
#pragma GCC unroll 8
        for (int hk = 0; hk < 8; hk++) {
            const int h = hk / 4, k = hk % 4;
            __m256i q[KR], scale[KR];
            for (int r = 0; r < KR; r++) {
                q[r] = q6k_levels(xb[r]->ql + 64 * h, xb[r]->qh + 32 * h, k);
                scale[r] = scale_pair(&sc[r], h, k);
            }
            for (int c = 0; c < NC; c++) {
                const __m256i yv = load256(yb[c]->qs + 32 * hk);
                for (int r = 0; r < KR; r++) {
                    sumi[r][c] = madd_acc(sumi[r][c], scale[r], _mm256_maddubs_epi16(q[r], yv));
                    GEMM_KEEP(sumi[r][c]);
                }
            }
        }
        for (int r = 0; r < KR; r++) {
            const float d = qa_f16(xb[r]->d);
            for (int c = 0; c < NC; c++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(yb[c]->d * d),
                                            _mm256_cvtepi32_ps(sumi[r][c]), acc[r][c]);
        }
    }
    for (int c = 0; c < NC; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ldc + r] = qa_hsum_ps(acc[r][c]);
}

/* ---- entry points: one instance per column count ---- */

_Static_assert(KC >= 1 && KC <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

#if GEMM_VNNI
#define K_FN(name) name##_vnni
#else
#define K_FN(name) name##_avx2
#endif

/* One activation row: the dot products. */
GEMM_INLINE void rows_by_dots(void (*dot)(int, float *restrict, const void *restrict,
                                          const void *restrict),
                              int n, int nr, float *s, const uint8_t *x, size_t bx, const void *y) {
    for (int r = 0; r < nr; r++)
        dot(n, &s[r], x + (size_t)r * bx, y);
}

void K_FN(gemm_q4_K_q8_K)(int n, int nr, int nc, float *restrict s, size_t ldc,
                          const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    if (nc == 1) {
        rows_by_dots(vec_dot_q4_K_q8_K_avx2, n, nr, s, x, bx, y);
        return;
    }
    const k_tile_ptrs p = tile_ptrs(nr, nc, x, bx, y, by);
#define Q4K_CALL(NCV) k4_tile(false, NCV, n / QK_K, nr, s, ldc, &p)
    GEMM_DISPATCH(nc, KC, Q4K_CALL)
#undef Q4K_CALL
}

void K_FN(gemm_q5_K_q8_K)(int n, int nr, int nc, float *restrict s, size_t ldc,
                          const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    if (nc == 1) {
        rows_by_dots(vec_dot_q5_K_q8_K_avx2, n, nr, s, x, bx, y);
        return;
    }
    const k_tile_ptrs p = tile_ptrs(nr, nc, x, bx, y, by);
#define Q5K_CALL(NCV) k4_tile(true, NCV, n / QK_K, nr, s, ldc, &p)
    GEMM_DISPATCH(nc, KC, Q5K_CALL)
#undef Q5K_CALL
}

void K_FN(gemm_q6_K_q8_K)(int n, int nr, int nc, float *restrict s, size_t ldc,
                          const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    if (nc == 1) {
        rows_by_dots(vec_dot_q6_K_q8_K_avx2, n, nr, s, x, bx, y);
        return;
    }
    const k_tile_ptrs p = tile_ptrs(nr, nc, x, bx, y, by);
#define Q6K_CALL(NCV) q6k_tile(NCV, n / QK_K, nr, s, ldc, &p)
    GEMM_DISPATCH(nc, KC, Q6K_CALL)
#undef Q6K_CALL
}
