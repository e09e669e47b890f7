/* AVX2 tile kernels (wtype_gemm_fn) for the 32-element formats: Q4_0, Q5_0
 * and Q8_0 against Q8_0 activations, Q4_1 and Q5_1 against Q8_1.
 *
 * Every output is computed as: per block, the exact integer sum I of the
 * products of levels (less the offset: Q4_0 8, Q5_0 16) and activation
 * quants; then acc = fma(float(I), d_w * d_a, acc) (and for Q4_1/Q5_1
 * acc = fma(m_w, s_a, acc)), block after block, from acc = 0. The packed
 * panels of gemm_panel_impl.h compute the same, so both give the same bits.
 *
 * A tile is 4 weight rows (GEMM_LEGACY_ROWS may make it 8: two groups of 4)
 * by up to GEMM_LEGACY_COLS activation rows. Per block, each weight row is
 * unpacked once and meets every activation row of the tile; each activation
 * row is loaded once and meets the weight rows. The integer products of 4
 * rows with one activation row are transposed and summed into a single
 * vector whose lanes are the rows ([r0 r1 r2 r3] for elements 0..15 in the
 * low half, for 16..31 in the high half; one add of the halves gives I), so
 * the conversion to float and the scaling cost one instruction per 4
 * outputs, and no horizontal sum is left for the end.
 *
 * For the 4- and 5-bit types the transposition runs on maddubs' 16-bit pair
 * sums, with one madd at the end: a lane then sums 4 pair sums of at most
 * |2 * 16 * 127| (the offset comes off each pair sum first; Q4_1/Q5_1 have
 * none, and 4 * 2 * 31 * 127 still fits). Q8_0's pair sums reach 32512, so
 * they are widened with madd first and transposed as 32-bit.
 *
 * Rows beyond nr repeat row 0 and are computed but not stored. */
#include "kernels/quants_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"

#include <stdbool.h>

enum { L_Q4_0, L_Q4_1, L_Q5_0, L_Q5_1, L_Q8_0 };

GEMM_INLINE size_t legacy_block_bytes(int T) {
    return T == L_Q4_0   ? sizeof(block_q4_0)
           : T == L_Q4_1 ? sizeof(block_q4_1)
           : T == L_Q5_0 ? sizeof(block_q5_0)
           : T == L_Q5_1 ? sizeof(block_q5_1)
                         : sizeof(block_q8_0);
}

GEMM_INLINE bool legacy_has_min(int T) {
    return T == L_Q4_1 || T == L_Q5_1;
}

/* The block's levels as unsigned bytes (Q8_0: their magnitudes). */
GEMM_INLINE __m256i legacy_levels(int T, const uint8_t *blk) {
    switch (T) {
    case L_Q4_0:
        return qa_nibbles32(((const block_q4_0 *)blk)->qs);
    case L_Q4_1:
        return qa_nibbles32(((const block_q4_1 *)blk)->qs);
    case L_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)blk;
        return _mm256_or_si256(qa_nibbles32(b->qs),
                               _mm256_and_si256(qa_bits32(b->qh), _mm256_set1_epi8(0x10)));
    }
    case L_Q5_1: {
        const block_q5_1 *b = (const block_q5_1 *)blk;
        return _mm256_or_si256(qa_nibbles32(b->qs),
                               _mm256_and_si256(qa_bits32(b->qh), _mm256_set1_epi8(0x10)));
    }
    default:
        return _mm256_abs_epi8(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)blk)->qs));
    }
}

#define LR GEMM_LEGACY_ROWS
#define LC GEMM_LEGACY_COLS
#define LG (LR / 4) /* groups of 4 rows */
_Static_assert(LR % 4 == 0 && LR <= 8, "the legacy tiles hold 4 or 8 rows");
_Static_assert(LC >= 1 && LC <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

/* The tile: LR rows (nr of them real) by NC activation rows. */
GEMM_INLINE void legacy_tile(const int T, const int NC, int nb, int nr, float *restrict s,
                             size_t ldc, const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
    const size_t wsz = legacy_block_bytes(T);
    const bool has_min = legacy_has_min(T);
    const size_t asz = has_min ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const size_t aqs = has_min ? offsetof(block_q8_1, qs) : offsetof(block_q8_0, qs);
    const int off = T == L_Q4_0 ? 8 : T == L_Q5_0 ? 16 : 0;
    const uint8_t *row[LR];
    for (int r = 0; r < LR; r++)
        row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    __m128 acc[LG][LC];
    for (int g = 0; g < LG; g++)
        for (int c = 0; c < NC; c++)
            acc[g][c] = _mm_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk[LR];
        __m256i q[LR], sgn[LR];
        __m128 dx[LG], mx[LG];
        for (int r = 0; r < LR; r++) {
            blk[r] = row[r] + (size_t)b * wsz;
            q[r] = legacy_levels(T, blk[r]);
            if (T == L_Q8_0)
                sgn[r] = _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)blk[r])->qs);
        }
        for (int g = 0; g < LG; g++) {
            dx[g] = rows4_f16(blk + 4 * g, 0);
            mx[g] = has_min ? rows4_f16(blk + 4 * g, sizeof(f16_t)) : _mm_setzero_ps();
        }
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = y + (size_t)c * by + (size_t)b * asz;
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(ab + aqs));
            const __m128 dy = bcast_f16(ab);
            const __m256i o = off ? _mm256_maddubs_epi16(_mm256_set1_epi8((char)off), yv)
                                  : _mm256_setzero_si256();
            for (int g = 0; g < LG; g++) {
                __m256i p[4], v;
                if (T == L_Q8_0) {
                    for (int k = 0; k < 4; k++)
                        p[k] = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(q[4 * g + k],
                                                 _mm256_sign_epi8(yv, sgn[4 * g + k])),
                            _mm256_set1_epi16(1));
                    v = transpose_sum4_i32(p);
                } else {
                    for (int k = 0; k < 4; k++) {
                        p[k] = _mm256_maddubs_epi16(q[4 * g + k], yv);
                        if (off) p[k] = _mm256_sub_epi16(p[k], o);
                    }
                    v = transpose_sum4_i16(p);
                }
                /* the block's sum per row: the halves' sums added */
                const __m128i full =
                    _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                acc[g][c] = _mm_fmadd_ps(_mm_cvtepi32_ps(full), _mm_mul_ps(dx[g], dy), acc[g][c]);
                if (has_min)
                    acc[g][c] = _mm_fmadd_ps(mx[g], bcast_f16(ab + sizeof(f16_t)), acc[g][c]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        float sum[LR];
        for (int g = 0; g < LG; g++)
            _mm_storeu_ps(sum + 4 * g, acc[g][c]);
        float *out = s + (size_t)c * ldc;
        for (int r = 0; r < nr; r++)
            out[r] = sum[r];
    }
}

/* legacy_tile with NC = nc, a constant in each instance. */
GEMM_INLINE void legacy_tile_any(const int T, int n, int nr, int nc, float *restrict s, size_t ldc,
                                 const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
    const int nb = n / 32;
#define LEGACY_TILE(NCV) legacy_tile(T, NCV, nb, nr, s, ldc, x, bx, y, by)
    GEMM_DISPATCH(nc, LC, LEGACY_TILE)
#undef LEGACY_TILE
}

void gemm_q4_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    legacy_tile_any(L_Q4_0, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q4_1_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    legacy_tile_any(L_Q4_1, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q5_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    legacy_tile_any(L_Q5_0, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q5_1_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    legacy_tile_any(L_Q5_1, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q8_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    legacy_tile_any(L_Q8_0, n, nr, nc, s, ldc, x, bx, y, by);
}
