/* Tile kernels and packed panels (wtype_gemm_fn, wtype_gemm_pack_fn) for
 * Q4_K, Q5_K and Q6_K weights against Q8_K activations: the body of
 * gemm_k_avx2.c (AVX2) and gemm_k_vnni_avx2.c (AVX-VNNI, whose vpdpwssd does
 * a madd and the add after it in one), which include it with GEMM_VNNI set to
 * 0 or 1. Not a header to include anywhere else.
 *
 * Every output is computed as: per super-block, the exact integer sums
 *     I = sum_j sc_j * sum_{k in j} q_k y_k   (Q6_K: less 32 * sum_j sc_j * ysum_j)
 *     M = sum_j m_j * ysum_j                  (Q4_K, Q5_K)
 * over the sub-blocks j (levels q without offset, ysum_j the sub-block's sum
 * of activation quants, from Q8_K's bsums), then
 *     acc = fma(float(I), d_w * d_a, acc),  accm = fma(float(M), dmin_w * d_a, accm)
 * super-block after super-block, and the output is acc - accm. The K-quants'
 * scales are small integers, so a whole super-block stays in integers.
 *
 * Direct tiles (gemm_q*_K_q8_K_*), for a few activation rows: GEMM_K_ROWS = 4
 * weight rows by up to GEMM_K_COLS activation rows. Per 32 elements, maddubs
 * of levels and activations, madd with the sub-block scale (which also
 * widens), add, into one integer vector per output; each weight row's levels
 * and scales are unpacked once and meet every activation row, and at the end
 * of a super-block the 4 rows' vectors are transposed and summed into one
 * vector of I per row (as the legacy tiles do per block), so the float steps
 * cost one instruction per 4 outputs.
 *
 * Panels (gemm_pack_q*_K / gemm_panel_q*_K_q8_K), for larger batches: 8 rows
 * with their levels unpacked to bytes and interleaved in 4-byte groups (one
 * row per 32-bit lane, as gemm_panel_impl.h), their scales and mins spread to
 * 16-bit lanes [s_r0 s_r0 s_r1 s_r1 ...], and d, dmin as floats. An
 * activation's 4 bytes, broadcast, meet the 8 rows in one maddubs; the 16-bit
 * sums of a sub-block then meet the 8 rows' scales in one madd, leaving I per
 * row in the lanes; the mins meet the broadcast bsums likewise. The VNNI
 * builds' panels take a group in one vpdpbusd into 32-bit sums instead, and
 * a sub-block's sums meet its scale in one vpmulld (the same integers).
 *
 * Rows beyond nr repeat row 0 and are computed but not stored.
 *
 * This header holds the bodies, as always-inlined functions of the type;
 * the two files that include it spell out each entry point by name. */
#include "kernels/quants_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"
#include "kernels/quants_k_avx2.h"

#include <stdbool.h>

#ifndef GEMM_VNNI
#error "define GEMM_VNNI to 0 or 1 before including gemm_k_impl.h"
#endif
#include "kernels/gemm_vnni.h"

#define KR GEMM_K_ROWS
#define KC GEMM_K_COLS
_Static_assert(KR == 4, "the direct K tiles hold 4 rows");
_Static_assert(KC >= 1 && KC <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

enum { K_Q4, K_Q5, K_Q6 };

/* acc + the 32-bit pair sums of a * b (16-bit lanes). */
GEMM_INLINE __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
#if GEMM_VNNI
    return GEMM_DPWSSD(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

GEMM_INLINE size_t k_block_bytes(int T) {
    return T == K_Q4 ? sizeof(block_q4_K) : T == K_Q5 ? sizeof(block_q5_K) : sizeof(block_q6_K);
}

/* ---- levels ---- */

/* Sub-block j (0..7) of a Q4_K/Q5_K block: its 32 levels in element order. */
GEMM_INLINE __m256i k4_levels(bool q5, const uint8_t *blk, int j) {
    const uint8_t *qs = q5 ? ((const block_q5_K *)blk)->qs : ((const block_q4_K *)blk)->qs;
    const __m256i bits = load256(qs + 32 * (j / 2));
    __m256i q = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(bits, 4) : bits, _mm256_set1_epi8(0xF));
    if (q5) q = _mm256_or_si256(q, take_bit(load256(((const block_q5_K *)blk)->qh), j, 4));
    return q;
}

/* Elements 32 hk .. 32 hk + 31 (hk = 0..7) of a Q6_K block as levels 0..63;
 * see vec_dot_q6_K_q8_K_avx2 for the bit layout. */
GEMM_INLINE __m256i q6k_levels(const block_q6_K *b, int hk) {
    const int h = hk / 4, k = hk % 4;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    const __m256i l = load256(b->ql + 64 * h + 32 * (k & 1));
    const __m256i hb = load256(b->qh + 32 * h);
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

/* ---- direct tiles ---- */

/* Four vectors of int32 sums (one per row) -> the 4 rows' totals. */
GEMM_INLINE __m128i total4_i32(const __m256i v[4]) {
    const __m256i u = transpose_sum4_i32(v);
    return _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

/* The same for 4 vectors of 4 int32. */
GEMM_INLINE __m128i total4_i32x4(const __m128i v[4]) {
    const __m128i t01 =
        _mm_add_epi32(_mm_unpacklo_epi32(v[0], v[1]), _mm_unpackhi_epi32(v[0], v[1]));
    const __m128i t23 =
        _mm_add_epi32(_mm_unpacklo_epi32(v[2], v[3]), _mm_unpackhi_epi32(v[2], v[3]));
    return _mm_add_epi32(_mm_unpacklo_epi64(t01, t23), _mm_unpackhi_epi64(t01, t23));
}

GEMM_INLINE void k_tile(const int T, const int NC, int nb, int nr, float *restrict s, size_t ldc,
                        const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
    const size_t wsz = k_block_bytes(T);
    const uint8_t *row[KR];
    for (int r = 0; r < KR; r++)
        row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    __m128 acc[KC], accm[KC];
    for (int c = 0; c < NC; c++)
        acc[c] = accm[c] = _mm_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const block_q8_K *yb[KC];
        for (int c = 0; c < NC; c++)
            yb[c] = (const block_q8_K *)(y + (size_t)c * by) + i;
        const uint8_t *blk[KR];
        __m256i sc[KR];
        __m128i mins[KR];
        __m256i sumi[KR][KC];
        for (int r = 0; r < KR; r++) {
            blk[r] = row[r] + (size_t)i * wsz;
            if (T == K_Q6) {
                const block_q6_K *b = (const block_q6_K *)blk[r];
                sc[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
                /* levels 0..63 stand for -32..31: 32 * sum_j sc_j * ysum_j comes off */
                for (int c = 0; c < NC; c++)
                    sumi[r][c] = _mm256_sub_epi32(
                        _mm256_setzero_si256(),
                        _mm256_slli_epi32(_mm256_madd_epi16(sc[r], load256(yb[c]->bsums)), 5));
            } else {
                /* Q4_K and Q5_K share the d, dmin, scales prefix */
                const __m256i sm = k4_scales_mins(((const block_q4_K *)blk[r])->scales);
                sc[r] = _mm256_permute2x128_si256(sm, sm, 0x00);
                mins[r] = _mm256_extracti128_si256(sm, 1);
                for (int c = 0; c < NC; c++)
                    sumi[r][c] = _mm256_setzero_si256();
            }
        }
        const scales16 sc16[KR] = {scales16_make(sc[0]), scales16_make(sc[1]), scales16_make(sc[2]),
                                   scales16_make(sc[3])};
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            for (int r = 0; r < KR; r++) {
                const __m256i q = T == K_Q6 ? q6k_levels((const block_q6_K *)blk[r], j)
                                            : k4_levels(T == K_Q5, blk[r], j);
                const __m256i scale =
                    T == K_Q6 ? scale_pair(&sc16[r], j / 4, j % 4) : scale_at(sc[r], j);
                for (int c = 0; c < NC; c++) {
                    sumi[r][c] = madd_acc(sumi[r][c], scale,
                                          _mm256_maddubs_epi16(q, load256(yb[c]->qs + 32 * j)));
                    GEMM_KEEP(sumi[r][c]);
                }
            }
        }
        const size_t d_off = T == K_Q6 ? offsetof(block_q6_K, d) : offsetof(block_q4_K, d);
        const __m128 dw = rows4_f16(blk, d_off);
        for (int c = 0; c < NC; c++) {
            const __m256i v[4] = {sumi[0][c], sumi[1][c], sumi[2][c], sumi[3][c]};
            const __m128 dy = _mm_set1_ps(yb[c]->d);
            acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(total4_i32(v)), _mm_mul_ps(dw, dy), acc[c]);
            if (T != K_Q6) {
                const __m256i bs = load256(yb[c]->bsums);
                const __m128i ysum = /* per 32 elements */
                    _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                const __m128i m[4] = {_mm_madd_epi16(mins[0], ysum), _mm_madd_epi16(mins[1], ysum),
                                      _mm_madd_epi16(mins[2], ysum), _mm_madd_epi16(mins[3], ysum)};
                const __m128 dmin = rows4_f16(blk, offsetof(block_q4_K, dmin));
                accm[c] =
                    _mm_fmadd_ps(_mm_cvtepi32_ps(total4_i32x4(m)), _mm_mul_ps(dmin, dy), accm[c]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        float out[KR];
        _mm_storeu_ps(out, _mm_sub_ps(acc[c], accm[c]));
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ldc + r] = out[r];
    }
}

/* ---- panels ---- */

#define KPR GEMM_PANEL_ROWS
#define KPC GEMM_PANEL_COLS
_Static_assert(KPR == 8, "a panel holds 8 rows, one per 32-bit lane");

/* Panel bytes per super-block: levels [8 x 32 elements][8 groups][32], then
 * for Q4_K/Q5_K scales and mins [8 sub-blocks][16 x int16] and d, dmin
 * [8 x f32]; for Q6_K scales [16 sub-blocks of 16][16 x int16], scale pairs
 * [8][16 x int16] (s_r,2i s_r,2i+1 for the offsets) and d. */
#define KP_LEVELS 2048
GEMM_INLINE size_t kpanel_bytes(int T) {
    return T == K_Q6 ? KP_LEVELS + 512 + 256 + 32 : KP_LEVELS + 256 + 256 + 64;
}
_Static_assert(GEMM_KPANEL_BLOCK == KP_LEVELS + 256 + 256 + 64 &&
                   GEMM_KPANEL_BLOCK_Q6 == KP_LEVELS + 512 + 256 + 32,
               "quants_kernels.h states the K panel sizes");

GEMM_INLINE void kpanel_pack(const int T, int n, int nr, const uint8_t *x, size_t bx,
                             uint8_t *panel) {
    const size_t wsz = k_block_bytes(T);
    const uint8_t *row[KPR];
    for (int r = 0; r < KPR; r++)
        row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    for (int i = 0; i < n / QK_K; i++) {
        uint8_t *pb = panel + (size_t)i * kpanel_bytes(T);
        const uint8_t *blk[KPR];
        for (int r = 0; r < KPR; r++)
            blk[r] = row[r] + (size_t)i * wsz;
        for (int j = 0; j < 8; j++) {
            __m256i v[KPR];
            for (int r = 0; r < KPR; r++)
                v[r] = T == K_Q6 ? q6k_levels((const block_q6_K *)blk[r], j)
                                 : k4_levels(T == K_Q5, blk[r], j);
            transpose8_epi32(v);
            for (int g = 0; g < 8; g++)
                _mm256_storeu_si256((__m256i *)(pb + 256 * j + 32 * g), v[g]);
        }
        int16_t *s16 = (int16_t *)(pb + KP_LEVELS);
        float *f = (float *)(pb + kpanel_bytes(T) - (T == K_Q6 ? 32 : 64));
        for (int r = 0; r < KPR; r++) {
            if (T == K_Q6) {
                const block_q6_K *b = (const block_q6_K *)blk[r];
                for (int j = 0; j < 16; j++)
                    s16[16 * j + 2 * r] = s16[16 * j + 2 * r + 1] = b->scales[j];
                for (int p = 0; p < 8; p++) {
                    s16[256 + 16 * p + 2 * r] = b->scales[2 * p];
                    s16[256 + 16 * p + 2 * r + 1] = b->scales[2 * p + 1];
                }
                f[r] = qa_f16(b->d);
            } else {
                const block_q4_K *b = (const block_q4_K *)blk[r];
                for (int j = 0; j < 8; j++) {
                    uint8_t sc, m;
                    k4_scale_min(j, b->scales, &sc, &m);
                    s16[16 * j + 2 * r] = s16[16 * j + 2 * r + 1] = sc;
                    s16[128 + 16 * j + 2 * r] = s16[128 + 16 * j + 2 * r + 1] = m;
                }
                f[r] = qa_f16(b->d);
                f[8 + r] = qa_f16(b->dmin);
            }
        }
    }
}

/* The same panel from 8 rows in the x8 layout (x8_layout.c), whose
 * super-blocks already hold each group of 4 elements of the 8 rows side by
 * side, and the scales and mins as bytes: no transpose, no 6-bit unpacking.
 * Byte for byte what kpanel_pack makes of the rows x8 came from. */
/* Row r's f16 scale of the 8 at p, as a float. */
GEMM_INLINE float x8_scale(const uint8_t *p, int r) {
    f16_t h;
    memcpy(&h, p + 2 * r, sizeof h);
    return qa_f16(h);
}

GEMM_INLINE void kpanel_pack_x8(const int T, int n, const uint8_t *x8, uint8_t *panel) {
    const size_t xsz = T == K_Q4 ? X8_BLOCK_Q4_K : T == K_Q5 ? X8_BLOCK_Q5_K : X8_BLOCK_Q6_K;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    for (int i = 0; i < n / QK_K; i++) {
        const uint8_t *xb = x8 + (size_t)i * xsz;
        uint8_t *pb = panel + (size_t)i * kpanel_bytes(T);
        int16_t *s16 = (int16_t *)(pb + KP_LEVELS);
        float *f = (float *)(pb + kpanel_bytes(T) - (T == K_Q6 ? 32 : 64));
        if (T == K_Q6) {
            /* group G = 8j + g: low bits in nibble G / 32 of ql vector G % 32,
             * top bits in bits 2 (G / 16) of qh vector G % 16 */
            for (int G = 0; G < 64; G++) {
                const __m256i l = load256(xb + 144 + 32 * (G % 32));
                const __m256i h = load256(xb + 1168 + 32 * (G % 16));
                const __m256i lo = _mm256_and_si256(G < 32 ? l : _mm256_srli_epi16(l, 4), m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * (G / 16)), m3);
                _mm256_storeu_si256((__m256i *)(pb + 32 * G), _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
            }
            for (int r = 0; r < KPR; r++) {
                for (int j = 0; j < 16; j++)
                    s16[16 * j + 2 * r] = s16[16 * j + 2 * r + 1] = (int8_t)xb[16 + 16 * (j / 2) + 2 * r + j % 2];
                for (int p = 0; p < 8; p++) {
                    s16[256 + 16 * p + 2 * r] = (int8_t)xb[16 + 16 * p + 2 * r];
                    s16[256 + 16 * p + 2 * r + 1] = (int8_t)xb[16 + 16 * p + 2 * r + 1];
                }
                f[r] = x8_scale(xb, r);
            }
            continue;
        }
        /* chunk c, group k: sub-block 2c in the low nibbles, 2c + 1 in the high */
        const uint8_t *qs = xb + (T == K_Q5 ? 416 : 160);
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 8; k++) {
                const __m256i v = load256(qs + 256 * c + 32 * k);
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                if (T == K_Q5) { /* bit s of qh vector k: bit 4 of sub-block s, group k */
                    const __m256i qh = load256(xb + 160 + 32 * k);
                    lo = _mm256_or_si256(lo, take_bit(qh, 2 * c, 4));
                    hi = _mm256_or_si256(hi, take_bit(qh, 2 * c + 1, 4));
                }
                _mm256_storeu_si256((__m256i *)(pb + 256 * (2 * c) + 32 * k), lo);
                _mm256_storeu_si256((__m256i *)(pb + 256 * (2 * c + 1) + 32 * k), hi);
            }
        for (int r = 0; r < KPR; r++) {
            for (int j = 0; j < 8; j++) {
                s16[16 * j + 2 * r] = s16[16 * j + 2 * r + 1] = xb[32 + 8 * j + r];
                s16[128 + 16 * j + 2 * r] = s16[128 + 16 * j + 2 * r + 1] = xb[96 + 8 * j + r];
            }
            f[r] = x8_scale(xb, r);
            f[8 + r] = x8_scale(xb + 16, r);
        }
    }
}

/* The end of a panel super-block pb for NC activation columns yb[c],
 * given the integer sums of its quants times their scales isum[c] (one per
 * row): the mins (Q4_K, Q5_K) or offsets (Q6_K) against the activations'
 * sums per 16 elements, two at a time, then both into the float
 * accumulators with the block's scales. Shared by kpanel_tile and the
 * 512-bit kzmm_tile, which differ only in how they make isum. */
GEMM_INLINE void kpanel_block_end(const int T, const int NC, const uint8_t *pb, const block_q8_K *const *yb,
                                  const __m256i *isum, __m256 *acc, __m256 *accm) {
    const int16_t *s16 = (const int16_t *)(pb + KP_LEVELS);
    __m256i msum[KPC];
    for (int c = 0; c < NC; c++)
        msum[c] = _mm256_setzero_si256();
    for (int p = 0; p < 8; p++) {
        const __m256i ms = load256(s16 + (T == K_Q6 ? 256 : 128) + 16 * p);
        for (int c = 0; c < NC; c++)
            msum[c] = madd_acc(msum[c], ms, bcast32(yb[c]->bsums + 2 * p));
    }
    const float *f = (const float *)(pb + kpanel_bytes(T) - (T == K_Q6 ? 32 : 64));
    const __m256 dw = _mm256_loadu_ps(f);
    for (int c = 0; c < NC; c++) {
        const __m256 dy = _mm256_set1_ps(yb[c]->d);
        const __m256i sum =
            T == K_Q6 ? _mm256_sub_epi32(isum[c], _mm256_slli_epi32(msum[c], 5)) : isum[c];
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, dy), acc[c]);
        if (T != K_Q6)
            accm[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[c]),
                                      _mm256_mul_ps(_mm256_loadu_ps(f + 8), dy), accm[c]);
    }
}

/* A panel tile's nr rows of NC columns into s (column c at s + c * ldc). */
GEMM_INLINE void kpanel_store(const int NC, int nr, float *restrict s, size_t ldc, const __m256 *acc,
                              const __m256 *accm) {
    for (int c = 0; c < NC; c++) {
        float out[KPR];
        _mm256_storeu_ps(out, _mm256_sub_ps(acc[c], accm[c]));
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ldc + r] = out[r];
    }
}

GEMM_INLINE void kpanel_tile(const int T, const int NC, int nb, int nr, float *restrict s,
                             size_t ldc, const uint8_t *panel, const uint8_t *y, size_t by) {
    __m256 acc[KPC], accm[KPC];
    for (int c = 0; c < NC; c++)
        acc[c] = accm[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *pb = panel + (size_t)i * kpanel_bytes(T);
        const int16_t *s16 = (const int16_t *)(pb + KP_LEVELS);
        const block_q8_K *yb[KPC];
        __m256i isum[KPC], p16[KPC];
        for (int c = 0; c < NC; c++) {
            yb[c] = (const block_q8_K *)(y + (size_t)c * by) + i;
            isum[c] = _mm256_setzero_si256();
        }
#if GEMM_VNNI
        /* vpdpbusd takes a group's products and their sum in one, into 32-bit
         * sums per sub-block (Q6_K: per 16 elements, its scales' span), which
         * meet the scale (its 16-bit pair through a madd with [1 0]) in one
         * vpmulld: the same integers as the 16-bit sums below */
        const int span = T == K_Q6 ? 4 : 8;
        for (int j = 0; j < 8; j++) {
            __m256i p32[KPC][2]; /* two chains per column, even and odd groups, so their latency overlaps */
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m256i w = load256(pb + 256 * j + 32 * g);
                for (int c = 0; c < NC; c++) {
                    const __m256i y4 = bcast32(yb[c]->qs + 32 * j + 4 * g);
                    p32[c][g % 2] = GEMM_DPBUSD(g % span > 1 ? p32[c][g % 2] : _mm256_setzero_si256(), w, y4);
                    GEMM_KEEP(p32[c][g % 2]);
                }
                if (g % span == span - 1) {
                    const int sj = T == K_Q6 ? 2 * j + g / 4 : j;
                    const __m256i scale = _mm256_madd_epi16(load256(s16 + 16 * sj), _mm256_set1_epi32(1));
                    for (int c = 0; c < NC; c++) {
                        const __m256i sum = _mm256_add_epi32(p32[c][0], p32[c][1]);
                        isum[c] = _mm256_add_epi32(isum[c], _mm256_mullo_epi32(sum, scale));
                        GEMM_KEEP(isum[c]);
                    }
                }
            }
        }
        (void)p16;
#else
        /* Q4_K: 16-bit sums of 8 groups of at most 2 * 15 * 127; Q5_K (31)
         * and Q6_K (63) flush more often, Q6_K per 16 elements anyway (its
         * scales' span) */
        const int flush = T == K_Q4 ? 8 : T == K_Q5 ? 4 : 2;
        for (int j = 0; j < 8; j++) {
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m256i w = load256(pb + 256 * j + 32 * g);
                for (int c = 0; c < NC; c++) {
                    const __m256i p = _mm256_maddubs_epi16(w, bcast32(yb[c]->qs + 32 * j + 4 * g));
                    p16[c] = g % flush ? _mm256_add_epi16(p16[c], p) : p;
                    GEMM_KEEP(p16[c]);
                }
                if (g % flush == flush - 1) {
                    /* the scales of sub-block j (Q6_K: of its 16-element half) */
                    const int sj = T == K_Q6 ? 2 * j + g / 4 : j;
                    const __m256i scale = load256(s16 + 16 * sj);
                    for (int c = 0; c < NC; c++) {
                        isum[c] = madd_acc(isum[c], scale, p16[c]);
                        GEMM_KEEP(isum[c]);
                    }
                }
            }
        }
#endif
        kpanel_block_end(T, NC, pb, yb, isum, acc, accm);
    }
    kpanel_store(NC, nr, s, ldc, acc, accm);
}

/* ---- for the entry points (gemm_k_avx2.c, gemm_k_vnni_avx2.c) ---- */

/* k_tile and kpanel_tile with NC = nc, a constant in each instance. */
GEMM_INLINE void k_tile_any(const int T, int n, int nr, int nc, float *restrict s, size_t ldc,
                            const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
#define K_TILE(NCV) k_tile(T, NCV, n / QK_K, nr, s, ldc, x, bx, y, by)
    GEMM_DISPATCH(nc, KC, K_TILE)
#undef K_TILE
}

GEMM_INLINE void kpanel_tile_any(const int T, int n, int nr, int nc, float *restrict s, size_t ldc,
                                 const uint8_t *panel, const uint8_t *y, size_t by) {
#define KPANEL_TILE(NCV) kpanel_tile(T, NCV, n / QK_K, nr, s, ldc, panel, y, by)
    GEMM_DISPATCH(nc, KPC, KPANEL_TILE)
#undef KPANEL_TILE
}
