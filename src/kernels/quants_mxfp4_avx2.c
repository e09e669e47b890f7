/* MXFP4's dot product with Q8_0 activations on AVX2: the nibbles become
 * their doubled values through one byte shuffle of the level table, then
 * a signed byte dot as Q4_0's; see quants_mxfp4_ref.c. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"

#include <immintrin.h>

void vec_dot_mxfp4_q8_0_avx2(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_mxfp4 *x = vx;
    const block_q8_0 *y = vy;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k_mxfp4_values));
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK_MXFP4; i++) {
        const __m256i w = _mm256_shuffle_epi8(table, qa_nibbles32(x[i].qs));
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[i].qs);
        const __m256 d = _mm256_set1_ps(mxfp4_half_scale(x[i].e) * qa_f16(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(qa_dot_i8i8(w, a)), acc);
    }
    *s = qa_hsum_ps(acc);
}
