/* AVX2 kernels for the K-quants: the Q8_K activation quantizer and the dot
 * products of Q2_K..Q6_K weights against Q8_K.
 *
 * Every weight is widened to an unsigned byte (its level without offset, so
 * maddubs can take it as the unsigned operand): Q2_K 0..3, Q3_K 0..7, Q4_K
 * 0..15, Q5_K 0..31, Q6_K 0..63. maddubs against the activation bytes gives
 * 16-bit pair sums; madd with the sub-block scale (spread to 16-bit lanes)
 * gives 32-bit sums. The offsets (Q3_K's -4, Q6_K's -32) and the mins
 * (Q2_K, Q4_K, Q5_K) only need the per-16 sums of the activation quants, which
 * Q8_K carries (bsums), so they cost one madd per super-block. A super-block
 * is 256 elements: enough independent work that one f32 accumulator does not
 * stall. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_avx2.h"
#include "kernels/quants_k_avx2.h"
#include "kernels/quants_blocks.h"

/* ---- Q8_K quantizer ---- */

void q8_K_from_float_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
        for (int j = 0; j < QK_K; j += 32) {
            m0 = _mm256_max_ps(m0, _mm256_and_ps(abs_mask, _mm256_loadu_ps(x + j)));
            m1 = _mm256_max_ps(m1, _mm256_and_ps(abs_mask, _mm256_loadu_ps(x + j + 8)));
            m2 = _mm256_max_ps(m2, _mm256_and_ps(abs_mask, _mm256_loadu_ps(x + j + 16)));
            m3 = _mm256_max_ps(m3, _mm256_and_ps(abs_mask, _mm256_loadu_ps(x + j + 24)));
        }
        const float amax = qa_hmax_ps(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = 127.f / amax;
        const __m256 vs = _mm256_set1_ps(iscale);
        /* |iscale * x| <= 127 * (1 + 2^-22) rounds to at most 127: no clamp. */
        __m256i sums4[8]; /* per chunk of 32: the sums of each 4 quants */
        for (int c = 0; c < 8; c++) {
            const float *xc = x + 32 * c;
            __m256i q[4];
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xc + 8 * k), vs));
            const __m256i p8 =
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            const __m256i qs =
                _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * c), qs);
            sums4[c] = qa_dot_u8i8(_mm256_set1_epi8(1), qs);
        }
        /* Two rounds of hadd turn chunks c..c+3 into their 16-sums, ordered
         * [c first halves | c second halves]; the permute interleaves them. */
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const __m256i s0 =
            _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(sums4[0], sums4[1]),
                                                          _mm256_hadd_epi32(sums4[2], sums4[3])),
                                        order);
        const __m256i s1 =
            _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(sums4[4], sums4[5]),
                                                          _mm256_hadd_epi32(sums4[6], sums4[7])),
                                        order);
        const __m256i b16 =
            _mm256_permute4x64_epi64(_mm256_packs_epi32(s0, s1), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)y[i].bsums, b16);
        y[i].d = 1 / iscale;
    }
}

/* ---- Q2_K and Q3_K ---- */

/* The scaled level sums of a Q2_K (hmask NULL) or Q3_K super-block as 8
 * int32 lanes: levels are the 2-bit fields of qs, 0..3, with bit 2 from
 * hmask for Q3_K, 0..7. Inlined into both callers, where hmask is a constant
 * NULL or not. */
static inline __attribute__((always_inline)) __m256i
k2_level_sums(const uint8_t *qs, const uint8_t *hmask, const int8_t *q8, const scales16 *sc) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i hbits = hmask ? load256(hmask) : _mm256_setzero_si256();
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i bits = load256(qs + 32 * h);
        for (int k = 0; k < 4; k++, q8 += 32) {
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
            if (hmask) q = _mm256_or_si256(q, take_bit(hbits, 4 * h + k, 2));
            const __m256i p = _mm256_maddubs_epi16(q, load256(q8));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale_pair(sc, h, k), p));
        }
    }
    return sumi;
}

void vec_dot_q2_K_q8_K_avx2(int n, float *restrict s, const void *restrict vx,
                            const void *restrict vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        const float d = y[i].d * qa_f16(x[i].d);
        const float dmin = -y[i].d * qa_f16(x[i].dmin);
        const __m128i packed = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i mins =
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF)));
        const __m256i msum = _mm256_madd_epi16(mins, load256(y[i].bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc);

        const scales16 sc =
            scales16_make(_mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0xF))));
        const __m256i sumi = k2_level_sums(x[i].qs, NULL, y[i].qs, &sc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = qa_hsum_ps(acc);
}

/* The 16 signed 6-bit scales as int16 lanes: q3k_unpack_scales done on whole
 * 32-bit words (4 scales at a time). */
static inline __m256i q3k_scales16(const uint8_t *p) {
    uint32_t w[3];
    memcpy(w, p, sizeof w);
    const uint32_t lo4 = 0x0f0f0f0fu, hi2 = 0x03030303u;
    const __m128i packed = _mm_setr_epi32((int)((w[0] & lo4) | ((w[2] & hi2) << 4)),
                                          (int)((w[1] & lo4) | (((w[2] >> 2) & hi2) << 4)),
                                          (int)(((w[0] >> 4) & lo4) | (((w[2] >> 4) & hi2) << 4)),
                                          (int)(((w[1] >> 4) & lo4) | (((w[2] >> 6) & hi2) << 4)));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(packed, _mm_set1_epi8(32)));
}

void vec_dot_q3_K_q8_K_avx2(int n, float *restrict s, const void *restrict vx,
                            const void *restrict vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        const float d = y[i].d * qa_f16(x[i].d);
        const __m256i sc16 = q3k_scales16(x[i].scales);
        const scales16 sc = scales16_make(sc16);
        /* Levels are stored as q + 4 * hbit in 0..7 with value q + 4 * hbit - 4;
         * the -4 comes off once per sub-block through bsums. */
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(y[i].bsums)), 2);
        const __m256i sumi =
            _mm256_sub_epi32(k2_level_sums(x[i].qs, x[i].hmask, y[i].qs, &sc), offset);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = qa_hsum_ps(acc);
}

/* ---- Q4_K and Q5_K ---- */

/* dmin * sum_j m_j * (sum of the 32 activation quants of sub-block j). */
static inline __m128 k4_min_term(__m256i scales_mins, const block_q8_K *y) {
    const __m256i bs = load256(y->bsums);
    const __m128i bsum32 =
        _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_cvtepi32_ps(_mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), bsum32));
}

/* One super-block of Q4_K (qh NULL) or Q5_K: the scaled level sums as 8
 * int32 lanes, and the min term through *acc_m. Inlined into both callers,
 * where qh is a constant NULL or not. */
static inline __m256 k4_superblock(const uint8_t *scales, float d, float dmin, const uint8_t *qs,
                                   const uint8_t *qh, const block_q8_K *y, __m256 acc,
                                   __m128 *acc_m) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i sm = k4_scales_mins(scales);
    *acc_m = _mm_fmadd_ps(_mm_set1_ps(-y->d * dmin), k4_min_term(sm, y), *acc_m);
    const __m256i sc = _mm256_permute2x128_si256(sm, sm, 0x00);
    const __m256i hbits = qh ? load256(qh) : _mm256_setzero_si256();
    const int8_t *q8 = y->qs;
    __m256i sum0 = _mm256_setzero_si256(), sum1 = sum0;
    for (int c = 0; c < 4; c++, qs += 32, q8 += 64) {
        const __m256i bits = load256(qs);
        __m256i lo = _mm256_and_si256(bits, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, take_bit(hbits, 2 * c, 4));
            hi = _mm256_or_si256(hi, take_bit(hbits, 2 * c + 1, 4));
        }
        const __m256i plo = _mm256_maddubs_epi16(lo, load256(q8));
        const __m256i phi = _mm256_maddubs_epi16(hi, load256(q8 + 32));
        sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(scale_at(sc, 2 * c), plo));
        sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(scale_at(sc, 2 * c + 1), phi));
    }
    const __m256 sum = _mm256_cvtepi32_ps(_mm256_add_epi32(sum0, sum1));
    return _mm256_fmadd_ps(_mm256_set1_ps(y->d * d), sum, acc);
}

void vec_dot_q4_K_q8_K_avx2(int n, float *restrict s, const void *restrict vx,
                            const void *restrict vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int i = 0; i < n / QK_K; i++)
        acc = k4_superblock(x[i].scales, qa_f16(x[i].d), qa_f16(x[i].dmin), x[i].qs, NULL, &y[i],
                            acc, &acc_m);
    *s = k4_finish(acc, acc_m);
}

void vec_dot_q5_K_q8_K_avx2(int n, float *restrict s, const void *restrict vx,
                            const void *restrict vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int i = 0; i < n / QK_K; i++)
        acc = k4_superblock(x[i].scales, qa_f16(x[i].d), qa_f16(x[i].dmin), x[i].qs, x[i].qh, &y[i],
                            acc, &acc_m);
    *s = k4_finish(acc, acc_m);
}

/* ---- Q6_K ---- */

void vec_dot_q6_K_q8_K_avx2(int n, float *restrict s, const void *restrict vx,
                            const void *restrict vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_K; i++) {
        const float d = y[i].d * qa_f16(x[i].d);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const scales16 sc = scales16_make(sc16);
        /* Levels 0..63 stand for -32..31: 32 * sum_j sc_j * bsum_j comes off. */
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(y[i].bsums)), 5);
        const int8_t *q8 = y[i].qs;
        __m256i sum0 = _mm256_setzero_si256(), sum1 = sum0;
        for (int h = 0; h < 2; h++, q8 += 128) {
            const __m256i l0 = load256(x[i].ql + 64 * h);      /* chunks 0 (low), 2 (high) */
            const __m256i l1 = load256(x[i].ql + 64 * h + 32); /* chunks 1 (low), 3 (high) */
            const __m256i hb = load256(x[i].qh + 32 * h);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                               _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
            const __m256i q1 = _mm256_or_si256(
                _mm256_and_si256(l1, m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                               _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
            const __m256i q3 =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(hb, 2), _mm256_set1_epi8(0x30)));
            const __m256i p0 = _mm256_maddubs_epi16(q0, load256(q8));
            const __m256i p1 = _mm256_maddubs_epi16(q1, load256(q8 + 32));
            const __m256i p2 = _mm256_maddubs_epi16(q2, load256(q8 + 64));
            const __m256i p3 = _mm256_maddubs_epi16(q3, load256(q8 + 96));
            sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(scale_pair(&sc, h, 0), p0));
            sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(scale_pair(&sc, h, 1), p1));
            sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(scale_pair(&sc, h, 2), p2));
            sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(scale_pair(&sc, h, 3), p3));
        }
        const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(sum0, sum1), offset);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = qa_hsum_ps(acc);
}
