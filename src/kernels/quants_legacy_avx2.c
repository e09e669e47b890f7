/* AVX2 kernels for the 32-element formats: the Q8_0/Q8_1 activation
 * quantizers (run on every matmul input), the dot products of Q4_0, Q4_1,
 * Q5_0, Q5_1 and Q8_0 weights against them, and the Q4_0/Q8_0 dequantizers.
 *
 * Dot products take the integer dot of a block with maddubs + madd, then
 * scale its 8 int32 partial sums by d_w * d_a in f32. The 4- and 5-bit levels
 * stay unsigned (maddubs' unsigned operand); an offset (Q4_0's 8, Q5_0's 16)
 * comes off as offset * sum(q_a), one more maddubs; a min (Q4_1, Q5_1) comes
 * in as m_w * s_a. Four blocks are in flight per iteration, each with its own
 * accumulator, so the FMA latency never serializes the loop. The quantizers
 * write the same bytes as the scalar reference (same scale arithmetic, same
 * round-half-away-from-zero), which the unit test checks. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"

#include <stdbool.h>

/* roundf (half away from zero) of 8 floats with |v| <= 128, as int32:
 * truncate v + copysign(0.5, v). That sum is exact for |v| >= 0.5 (0.5 is a
 * multiple of v's ulp, and a carry into the next binade lands on an integer
 * >= the right one), so only |v| < 0.5 can go wrong, and does once: the sum
 * 0.49999997 + 0.5 rounds up to 1. Those v round to 0, so they are masked.
 * (Checked against roundf for every float in [-128, 128].) */
static inline __m256i round_half_away_epi32(__m256 v) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256 half = _mm256_or_ps(_mm256_and_ps(v, sign_bit), _mm256_set1_ps(0.5f));
    const __m256i r = _mm256_cvttps_epi32(_mm256_add_ps(v, half));
    const __m256 small =
        _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, v), _mm256_set1_ps(0.5f), _CMP_LT_OQ);
    return _mm256_andnot_si256(_mm256_castps_si256(small), r);
}

/* One 32-float block to int8 exactly as the reference does; the four int32
 * vectors are returned too (for Q8_1's sum). Returns d before f16 rounding. */
static inline float quantize_q8_block_avx2(const float *x, int8_t *qs, __m256i *sum) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[k]));
    }
    const float d = qa_hmax_ps(amax) / 127;
    const __m256 id = _mm256_set1_ps(d ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; k++)
        q[k] = round_half_away_epi32(_mm256_mul_ps(v[k], id));
    *sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    /* The packs work per 128-bit lane; the permute restores element order. */
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    _mm256_storeu_si256((__m256i *)qs,
                        _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return d;
}

void q8_0_from_float_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        __m256i sum;
        const float d = quantize_q8_block_avx2(x, y[i].qs, &sum);
        y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    }
}

void q8_1_from_float_avx2(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        __m256i sum;
        const float d = quantize_q8_block_avx2(x, y[i].qs, &sum);
        y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[i].s = _cvtss_sh((float)qa_hsum_epi32(sum) * d, _MM_FROUND_TO_NEAREST_INT);
    }
}

/* ---- dequantizers ---- */

static inline void store_scaled_bytes(float *y, __m256i q, __m256 d) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(
        y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(
        y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}

void q4_0_to_float_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const __m256i q = _mm256_sub_epi8(qa_nibbles32(x[i].qs), _mm256_set1_epi8(8));
        store_scaled_bytes(y, q, _mm256_set1_ps(qa_f16(x[i].d)));
    }
}

void q8_0_to_float_avx2(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0)
        store_scaled_bytes(y, _mm256_loadu_si256((const __m256i *)x[i].qs),
                           _mm256_set1_ps(qa_f16(x[i].d)));
}

/* ---- dot products ---- */

/* Each block kernel returns its 8 int32 partial sums as floats; the loop
 * below scales them by d_w * d_a. */

static inline __m256 q4_0_block(const block_q4_0 *x, const block_q8_0 *y) {
    /* sum (q - 8) y = sum q y - 8 sum y: two maddubs with q and 8 as the
     * unsigned operand cost fewer uops than making q - 8 signed-safe. */
    const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    const __m256i p = _mm256_maddubs_epi16(qa_nibbles32(x->qs), qy);
    const __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8(8), qy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_sub_epi16(p, off), _mm256_set1_epi16(1)));
}

static inline __m256 q5_0_block(const block_q5_0 *x, const block_q8_0 *y) {
    /* As Q4_0 with q in 0..31 (bit 4 from qh) and offset 16. */
    const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    const __m256i q = _mm256_or_si256(qa_nibbles32(x->qs),
                                      _mm256_and_si256(qa_bits32(x->qh), _mm256_set1_epi8(0x10)));
    const __m256i p = _mm256_maddubs_epi16(q, qy);
    const __m256i off = _mm256_maddubs_epi16(_mm256_set1_epi8(16), qy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_sub_epi16(p, off), _mm256_set1_epi16(1)));
}

static inline __m256 q8_0_block(const block_q8_0 *x, const block_q8_0 *y) {
    const __m256i qx = _mm256_loadu_si256((const __m256i *)x->qs);
    return _mm256_cvtepi32_ps(qa_dot_i8i8(qx, _mm256_loadu_si256((const __m256i *)y->qs)));
}

static inline __m256 q4_1_block(const block_q4_1 *x, const block_q8_1 *y) {
    const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return _mm256_cvtepi32_ps(qa_dot_u8i8(qa_nibbles32(x->qs), qy));
}

static inline __m256 q5_1_block(const block_q5_1 *x, const block_q8_1 *y) {
    const __m256i high = _mm256_and_si256(qa_bits32(x->qh), _mm256_set1_epi8(0x10));
    const __m256i qx = _mm256_or_si256(qa_nibbles32(x->qs), high);
    return _mm256_cvtepi32_ps(qa_dot_u8i8(qx, _mm256_loadu_si256((const __m256i *)y->qs)));
}

enum { D_Q4_0, D_Q4_1, D_Q5_0, D_Q5_1, D_Q8_0 };

/* Bytes of a block of type T (constant in each caller) and of the
 * activation block it meets. */
static inline __attribute__((always_inline)) size_t dot_block_bytes(const int T) {
    return T == D_Q4_0   ? sizeof(block_q4_0)
           : T == D_Q4_1 ? sizeof(block_q4_1)
           : T == D_Q5_0 ? sizeof(block_q5_0)
           : T == D_Q5_1 ? sizeof(block_q5_1)
                         : sizeof(block_q8_0);
}

static inline __attribute__((always_inline)) size_t dot_act_bytes(const int T) {
    return T == D_Q4_1 || T == D_Q5_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
}

static inline __attribute__((always_inline)) __m256 dot_block(const int T, const void *x,
                                                              const void *y) {
    switch (T) {
    case D_Q4_0:
        return q4_0_block(x, y);
    case D_Q4_1:
        return q4_1_block(x, y);
    case D_Q5_0:
        return q5_0_block(x, y);
    case D_Q5_1:
        return q5_1_block(x, y);
    default:
        return q8_0_block(x, y);
    }
}

/* Block i of a row pair: its d_w * d_a-scaled integer sums added to acc.
 * The first 8 bytes of both blocks are read as f16: [d_w, m_w] and
 * [d_a, s_a] for the types with a min, so one multiply gives the block scale
 * d_w * d_a in lane 0 and the min term m_w * s_a in lane 1, which it returns
 * (garbage lanes 2-3 are never read). */
static inline __attribute__((always_inline)) __m128 dot_step(const int T, const void *vx,
                                                             const void *vy, int i, __m256 *acc) {
    const uint8_t *x = (const uint8_t *)vx + (size_t)i * dot_block_bytes(T);
    const uint8_t *y = (const uint8_t *)vy + (size_t)i * dot_act_bytes(T);
    const __m128 dd = _mm_mul_ps(qa_f16x4(x), qa_f16x4(y));
    *acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), dot_block(T, x, y), *acc);
    return dd;
}

/* The block loop, four blocks in flight with an accumulator each; the min
 * terms (lane 1 of each step's result) summed in `mins`. */
static inline __attribute__((always_inline)) float legacy_dot(const int T, int n, const void *x,
                                                              const void *y) {
    const bool has_min = T == D_Q4_1 || T == D_Q5_1;
    const int nb = n / 32;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    __m128 mins = _mm_setzero_ps();
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m128 dd0 = dot_step(T, x, y, i, &acc0);
        const __m128 dd1 = dot_step(T, x, y, i + 1, &acc1);
        const __m128 dd2 = dot_step(T, x, y, i + 2, &acc2);
        const __m128 dd3 = dot_step(T, x, y, i + 3, &acc3);
        if (has_min) mins = _mm_add_ps(mins, _mm_add_ps(_mm_add_ps(dd0, dd1), _mm_add_ps(dd2, dd3)));
    }
    for (; i < nb; i++) {
        const __m128 dd0 = dot_step(T, x, y, i, &acc0);
        if (has_min) mins = _mm_add_ps(mins, dd0);
    }
    float sum = qa_hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    if (has_min) sum += _mm_cvtss_f32(_mm_shuffle_ps(mins, mins, 1));
    return sum;
}

void vec_dot_q4_0_q8_0_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y) {
    *s = legacy_dot(D_Q4_0, n, x, y);
}

void vec_dot_q5_0_q8_0_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y) {
    *s = legacy_dot(D_Q5_0, n, x, y);
}

void vec_dot_q8_0_q8_0_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y) {
    *s = legacy_dot(D_Q8_0, n, x, y);
}

void vec_dot_q4_1_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y) {
    *s = legacy_dot(D_Q4_1, n, x, y);
}

void vec_dot_q5_1_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y) {
    *s = legacy_dot(D_Q5_1, n, x, y);
}
