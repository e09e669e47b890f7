/* The packed-panel gemm of Q4_0, Q5_0 and Q8_0 weights against Q8_0
 * activations: the body of gemm_panel_avx2.c (AVX2) and
 * gemm_panel_vnni_avx2.c (AVX-VNNI) and gemm_panel_vnni512_avx2.c (AVX512-VNNI,
 * the same instructions EVEX-encoded), which include it with GEMM_VNNI set to
 * 0 or 1 (gemm_vnni.h). Not a header to include anywhere else.
 *
 * matmul packs 8 weight rows at a time into a panel (gemm_pack) and runs every
 * activation row of the batch past it (gemm_panel), so the unpacking of the
 * levels is paid once per row, not once per tile. Per 32-element block the
 * panel holds the rows' levels as signed bytes w (Q4_0: q - 8, Q5_0: q - 16,
 * Q8_0: q), interleaved in 4-byte groups: vector k holds elements 4k..4k+3 of
 * rows 0..7, one row per 32-bit lane. An activation's 4 bytes for group k,
 * broadcast to all lanes, then meet all 8 rows in one maddubs/madd (or one
 * VNNI dpbusd), and after the 8 groups the lanes hold the 8 rows' block sums,
 * with no horizontal reduction. The activation bytes are made unsigned by
 * adding 128 (the unsigned operand of maddubs and dpbusd); the panel stores
 * 128 * sum(w) per row to take off. Only Q8_0 on plain AVX2 differs: its
 * products would overflow maddubs' 16-bit pairs, so it keeps the activations
 * signed and moves w's sign onto them (the panel then holds |w| too).
 *
 * The activations come prepared once per matmul (gemm_prep_*): per block the
 * scale as f32 and the 32 quants (+ 128, or as they are for SIGNED_Q8), so
 * that per panel their 4-byte groups are broadcast straight from memory.
 *
 * The arithmetic per output is the one the direct tiles of
 * gemm_legacy_avx2.c use (the exact integer sum of each block, then
 * acc = fma(float(sum), d_w * d_a, acc) block by block), so both give the same
 * bits and matmul may take either.
 *
 * This header holds the bodies, as always-inlined functions of the type;
 * the two files that include it spell out each entry point by name. */
#include "kernels/quants_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"

#include <stdbool.h>

#ifndef GEMM_VNNI
#error "define GEMM_VNNI to 0 or 1 before including gemm_panel_impl.h"
#endif
#include "kernels/gemm_vnni.h"

#define PR GEMM_PANEL_ROWS
#define PC GEMM_PANEL_COLS
_Static_assert(PR == 8, "a panel holds 8 rows, one per 32-bit lane");
_Static_assert(PC >= 1 && PC <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

enum { P_Q4_0, P_Q5_0, P_Q8_0 };

/* Plain AVX2 Q8_0 keeps |w| next to w and needs no correction. */
#define SIGNED_Q8(T) (!GEMM_VNNI && (T) == P_Q8_0)

/* Offsets in a panel block: w[8][32], then |w|[8][32] (SIGNED_Q8 only), then
 * int32 corr[8] and float d[8]. */
GEMM_INLINE size_t panel_w_bytes(int T) {
    return SIGNED_Q8(T) ? 512 : 256;
}

GEMM_INLINE size_t panel_block_bytes(int T) {
    return panel_w_bytes(T) + 2 * 32;
}

_Static_assert(GEMM_PANEL_BLOCK == 256 + 64 && GEMM_PANEL_BLOCK_SIGNED_Q8 == 512 + 64,
               "quants_kernels.h states the panel block sizes");

/* ---- packing ---- */

/* The 32 levels of a block as signed bytes, in element order. */
GEMM_INLINE __m256i panel_levels(int T, const uint8_t *blk) {
    switch (T) {
    case P_Q4_0:
        return _mm256_sub_epi8(qa_nibbles32(((const block_q4_0 *)blk)->qs), _mm256_set1_epi8(8));
    case P_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)blk;
        const __m256i q = _mm256_or_si256(
            qa_nibbles32(b->qs), _mm256_and_si256(qa_bits32(b->qh), _mm256_set1_epi8(0x10)));
        return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
    }
    default:
        return _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)blk)->qs);
    }
}

/* Stores one panel block: the 8 rows' levels w[k] (group k of every row,
 * one row per 32-bit lane), their scales d16 (f16, row order), and what the
 * tile needs besides (|w| or 128 * sum(w) per row). */
GEMM_INLINE void panel_store_block(int T, const __m256i w[8], const void *d16, uint8_t *pb) {
    __m256i sum16 = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) {
        _mm256_storeu_si256((__m256i *)(pb + 32 * k), w[k]);
        if (SIGNED_Q8(T))
            _mm256_storeu_si256((__m256i *)(pb + 256 + 32 * k), _mm256_abs_epi8(w[k]));
        else
            sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(_mm256_set1_epi8(1), w[k]));
    }
    /* 128 * sum(w) per row; |sum16 lanes| <= 8 * 2 * 128 */
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sum16, _mm256_set1_epi16(1)), 7);
    _mm256_storeu_si256((__m256i *)(pb + panel_w_bytes(T)), corr);
    const __m128i h = _mm_loadu_si128((const __m128i *)d16);
    _mm256_storeu_ps((float *)(pb + panel_w_bytes(T) + 32), _mm256_cvtph_ps(h));
}

GEMM_INLINE void panel_pack(const int T, int n, int nr, const uint8_t *x, size_t bx,
                            uint8_t *panel) {
    const size_t wsz = T == P_Q4_0   ? sizeof(block_q4_0)
                       : T == P_Q5_0 ? sizeof(block_q5_0)
                                     : sizeof(block_q8_0);
    const uint8_t *row[PR];
    for (int r = 0; r < PR; r++)
        row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    for (int b = 0; b < n / 32; b++) {
        __m256i w[PR];
        f16_t d16[PR];
        for (int r = 0; r < PR; r++) {
            const uint8_t *blk = row[r] + (size_t)b * wsz;
            w[r] = panel_levels(T, blk);
            memcpy(&d16[r], blk, sizeof d16[r]);
        }
        transpose8_epi32(w);
        panel_store_block(T, w, d16, panel + (size_t)b * panel_block_bytes(T));
    }
}

/* The same panel from 8 rows in the x8 layout (x8_layout.c), whose blocks
 * already hold each group of 4 elements of the 8 rows side by side: the
 * levels need no transpose, only the nibbles (and Q5_0's fifth bits) taken
 * apart. Byte for byte what panel_pack makes of the rows x8 came from. */
GEMM_INLINE void panel_pack_x8(const int T, int n, const uint8_t *x8, uint8_t *panel) {
    const size_t xsz = T == P_Q4_0 ? X8_BLOCK_Q4_0 : T == P_Q5_0 ? X8_BLOCK_Q5_0 : X8_BLOCK_Q8_0;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int b = 0; b < n / 32; b++) {
        const uint8_t *xb = x8 + (size_t)b * xsz;
        __m256i w[8];
        if (T == P_Q8_0) {
            for (int k = 0; k < 8; k++) w[k] = _mm256_loadu_si256((const __m256i *)(xb + 16 + 32 * k));
        } else {
            const uint8_t *qs = xb + (T == P_Q5_0 ? 48 : 16); /* groups k | k + 4 as nibbles */
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
                w[k] = _mm256_and_si256(v, m4);
                w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
            if (T == P_Q5_0) { /* bit g of each qh byte is bit 4 of group g */
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(xb + 16));
                for (int g = 0; g < 8; g++) {
                    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, g), _mm256_set1_epi8(1));
                    w[g] = _mm256_or_si256(w[g], _mm256_slli_epi16(hb, 4));
                }
            }
            const __m256i off = _mm256_set1_epi8(T == P_Q5_0 ? 16 : 8);
            for (int k = 0; k < 8; k++) w[k] = _mm256_sub_epi8(w[k], off);
        }
        panel_store_block(T, w, xb, panel + (size_t)b * panel_block_bytes(T));
    }
}

/* ---- activations ---- */

/* A prepared block: f32 d, then the 32 quants (+ 128 unless SIGNED_Q8). */
#define PREP_BYTES 36
_Static_assert(GEMM_PANEL_ACT_BLOCK == PREP_BYTES, "quants_kernels.h states the prepared block");

GEMM_INLINE void panel_prep(bool biased, int n, const void *act, uint8_t *out) {
    const block_q8_0 *y = act;
    for (int b = 0; b < n / 32; b++, out += PREP_BYTES) {
        const float d = qa_f16(y[b].d);
        memcpy(out, &d, sizeof d);
        __m256i q = _mm256_loadu_si256((const __m256i *)y[b].qs);
        if (biased) q = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80));
        _mm256_storeu_si256((__m256i *)(out + 4), q);
    }
}

/* ---- the tile: the panel's 8 rows by NC activation rows ---- */

GEMM_INLINE void panel_tile(const int T, const int NC, int nb, int nr, float *restrict s,
                            size_t ldc, const uint8_t *panel, const uint8_t *y, size_t by) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[PC];
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *pb = panel + (size_t)b * panel_block_bytes(T);
        const uint8_t *ab[PC]; /* prepared activation blocks */
        __m256i isum[PC], s16[PC], isum_odd[PC];
        for (int c = 0; c < NC; c++) {
            ab[c] = y + (size_t)c * by + (size_t)b * PREP_BYTES;
            isum[c] = s16[c] = isum_odd[c] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(pb + 32 * k));
            for (int c = 0; c < NC; c++) {
                const __m256i a = bcast32(ab[c] + 4 + 4 * k);
                if (SIGNED_Q8(T)) {
                    const __m256i aw = _mm256_loadu_si256((const __m256i *)(pb + 256 + 32 * k));
                    isum[c] = _mm256_add_epi32(
                        isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(a, w)),
                                                   ones16));
                    GEMM_KEEP(isum[c]);
                } else if (GEMM_VNNI) {
#if GEMM_VNNI
                    /* two chains per column: dpbusd's latency, not its
                     * throughput, would bound one */
                    if (k & 1) {
                        isum_odd[c] = GEMM_DPBUSD(isum_odd[c], a, w);
                        GEMM_KEEP(isum_odd[c]);
                    } else {
                        isum[c] = GEMM_DPBUSD(isum[c], a, w);
                        GEMM_KEEP(isum[c]);
                    }
#endif
                } else {
                    /* 16-bit pair sums of at most |2 * 255 * 16|: Q5_0 flushes
                     * every 4 groups, Q4_0 (8 instead of 16) every 8 */
                    s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(a, w));
                    GEMM_KEEP(s16[c]);
                    if (k == 7 || (T == P_Q5_0 && k == 3)) {
                        isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(s16[c], ones16));
                        s16[c] = _mm256_setzero_si256();
                    }
                }
            }
        }
        const __m256i corr = _mm256_loadu_si256((const __m256i *)(pb + panel_w_bytes(T)));
        const __m256 dw = _mm256_loadu_ps((const float *)(pb + panel_w_bytes(T) + 32));
        for (int c = 0; c < NC; c++) {
            if (GEMM_VNNI) isum[c] = _mm256_add_epi32(isum[c], isum_odd[c]);
            const __m256i sum = SIGNED_Q8(T) ? isum[c] : _mm256_sub_epi32(isum[c], corr);
            const __m256 dy = _mm256_broadcast_ss((const float *)ab[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, dy), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) {
        float *out = s + (size_t)c * ldc;
        if (nr == PR) {
            _mm256_storeu_ps(out, acc[c]);
        } else {
            float tmp[PR];
            _mm256_storeu_ps(tmp, acc[c]);
            for (int r = 0; r < nr; r++)
                out[r] = tmp[r];
        }
    }
}

/* ---- for the entry points (gemm_panel_avx2.c, gemm_panel_vnni_avx2.c) ---- */

/* panel_tile with NC = nc, a constant in each instance. */
GEMM_INLINE void panel_tile_any(const int T, int n, int nr, int nc, float *restrict s, size_t ldc,
                                const uint8_t *panel, const uint8_t *y, size_t by) {
#define PANEL_TILE(NCV) panel_tile(T, NCV, n / 32, nr, s, ldc, panel, y, by)
    GEMM_DISPATCH(nc, PC, PANEL_TILE)
#undef PANEL_TILE
}
