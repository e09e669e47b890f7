/* The K-quant panels of the AVX512-VNNI build (gemm_k_vnni512_avx2.c) in
 * 512-bit registers: a vpdpbusd takes two groups of 4 elements of the 8
 * rows at once. On the Xeons with AMX that these run on, a 512-bit vpdpbusd
 * does 1.6x the multiply-adds per second of two 256-bit ones (12
 * independent chains: 348 against 212 GMAC/s per core), and prompt
 * processing of Q4_K_M models is nearly all panel tiles.
 *
 * The panel is gemm_k_impl.h's (same size, scales, mins and d) with its
 * levels reordered by kzmm_interleave: within each sub-block, groups 2p and
 * 2p + 1 of the 8 rows become one 64-byte vector [r0:g r0:g+1 r1:g r1:g+1
 * ...], 32-bit lanes 2r and 2r + 1 holding row r's two groups. The 8
 * activation bytes of the two groups, broadcast as a 64-bit value, meet
 * them in one vpdpbusd, so lane 2r sums row r's even groups and lane 2r + 1
 * its odd ones. As long as those sums fit in 16 bits they meet the row's
 * scale in one vpdpwssd (the panel's 16-bit pairs [s_r s_r], widened, are
 * the scale per lane), where the 256-bit panels take a vpmulld (2 uops) and
 * an add: with 512-bit operations on two ports, that was the difference
 * between 1.13x and 1.37x the 256-bit panels' speed on Q4_K. At the end of
 * a super-block the lanes are added in pairs: the same integers as the
 * 256-bit panels (integer sums do not depend on their order), so the same
 * bits. The mins and the float steps are the 256-bit panel's.
 *
 * Included by gemm_k_vnni512_avx2.c after gemm_k_impl.h (which it uses),
 * with avx512f/avx512bw/avx512vl/avx512vnni enabled. */
#ifndef CLLM_KERNELS_GEMM_K_PANEL_ZMM_H
#define CLLM_KERNELS_GEMM_K_PANEL_ZMM_H

/* Keeps a 512-bit v in a register (GEMM_KEEP's "x" names only xmm0-15). */
#define GEMM_KEEP_Z(v) __asm__("" : "+v"(v))

/* The levels of nb super-blocks of a packed panel, from gemm_k_impl.h's
 * order to the pairs above: vectors 2p and 2p + 1 of sub-block j, a and b,
 * become [a0 b0 a1 b1 a2 b2 a3 b3] and [a4 b4 ... a7 b7]. */
GEMM_INLINE void kzmm_interleave(const int T, int nb, uint8_t *panel) {
    for (int i = 0; i < nb; i++) {
        uint8_t *lv = panel + (size_t)i * kpanel_bytes(T);
        for (int v = 0; v < KP_LEVELS / 32; v += 2) {
            const __m256i a = load256(lv + 32 * v), b = load256(lv + 32 * (v + 1));
            const __m256i lo = _mm256_unpacklo_epi32(a, b), hi = _mm256_unpackhi_epi32(a, b);
            _mm256_storeu_si256((__m256i *)(lv + 32 * v), _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256((__m256i *)(lv + 32 * (v + 1)),
                                _mm256_permute2x128_si256(lo, hi, 0x31));
        }
    }
}

/* Row r's even- and odd-group sums in lanes 2r, 2r + 1, added: row r's
 * total in lane r. */
GEMM_INLINE __m256i kzmm_pairs(__m512i v) {
    return _mm512_cvtepi64_epi32(_mm512_add_epi32(v, _mm512_srli_epi64(v, 32)));
}

GEMM_INLINE void kzmm_tile(const int T, const int NC, int nb, int nr, float *restrict s, size_t ldc,
                           const uint8_t *panel, const uint8_t *y, size_t by) {
    __m256 acc[KPC], accm[KPC];
    for (int c = 0; c < NC; c++)
        acc[c] = accm[c] = _mm256_setzero_ps();
    /* Pairs whose sums stay in 16 bits (a lane gets 4 products per pair):
     * Q4_K 4 (16 * 15 * 128 < 2^15), Q5_K 2 (8 * 31 * 128), Q6_K 1 (4 * 63 *
     * 128); they then meet the scale in one vpdpwssd, the scale in the low
     * half of each lane and 0 in the high half, where the sum's sign is. */
    const int flush = T == K_Q4 ? 4 : T == K_Q5 ? 2 : 1;
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    for (int i = 0; i < nb; i++) {
        const uint8_t *pb = panel + (size_t)i * kpanel_bytes(T);
        const int16_t *s16 = (const int16_t *)(pb + KP_LEVELS);
        const block_q8_K *yb[KPC];
        __m512i isum[KPC];
        for (int c = 0; c < NC; c++) {
            yb[c] = (const block_q8_K *)(y + (size_t)c * by) + i;
            isum[c] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 8; j++) {
            __m512i p32[KPC];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const __m512i w = _mm512_loadu_si512(pb + 256 * j + 64 * p);
                for (int c = 0; c < NC; c++) {
                    int64_t a8;
                    memcpy(&a8, yb[c]->qs + 32 * j + 8 * p, sizeof a8);
                    const __m512i a = _mm512_set1_epi64(a8);
                    p32[c] = _mm512_dpbusd_epi32(p % flush ? p32[c] : _mm512_setzero_si512(), w, a);
                    GEMM_KEEP_Z(p32[c]);
                }
                if (p % flush ==
                    flush - 1) { /* Q6_K: pairs 0, 1 have scale 2j, pairs 2, 3 scale 2j + 1 */
                    const int sj = T == K_Q6 ? 2 * j + p / 2 : j;
                    const __m512i scale =
                        _mm512_and_si512(_mm512_cvtepi16_epi32(load256(s16 + 16 * sj)), lo16);
                    for (int c = 0; c < NC; c++) {
                        isum[c] = _mm512_dpwssd_epi32(isum[c], p32[c], scale);
                        GEMM_KEEP_Z(isum[c]);
                    }
                }
            }
        }
        __m256i I[KPC];
        for (int c = 0; c < NC; c++)
            I[c] = kzmm_pairs(isum[c]);
        kpanel_block_end(T, NC, pb, yb, I, acc, accm);
    }
    kpanel_store(NC, nr, s, ldc, acc, accm);
}

GEMM_INLINE void kzmm_tile_any(const int T, int n, int nr, int nc, float *restrict s, size_t ldc,
                               const uint8_t *panel, const uint8_t *y, size_t by) {
#define KZMM_TILE(NCV) kzmm_tile(T, NCV, n / QK_K, nr, s, ldc, panel, y, by)
    GEMM_DISPATCH(nc, KPC, KZMM_TILE)
#undef KZMM_TILE
}

#endif
