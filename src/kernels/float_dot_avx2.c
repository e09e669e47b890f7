/* AVX2/FMA/F16C kernels for the float weight formats. Four independent
 * accumulators hide the FMA latency; tails fall back to scalar code. */
#include "kernels/float_kernels.h"

#include "kernels/quants_avx2.h"

#include "util/fp16.h"

#include <immintrin.h>

void f16_to_float_avx2(const void *restrict x, float *restrict y, int64_t n) {
    const f16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) y[i] = f16_to_f32(h[i]);
}

void f16_from_float_avx2(const float *restrict x, void *restrict y, int64_t n) {
    f16_t *h = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = f32_to_f16(x[i]);
}

void vec_dot_f32_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y) {
    const float *a = x, *b = y;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
    float sum = qa_hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

void vec_dot_f16_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y) {
    const f16_t *a = x;
    const float *b = y;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            __m256 av = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8 * k)));
            acc[k] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + i + 8 * k), acc[k]);
        }
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))),
                                 _mm256_loadu_ps(b + i), acc[0]);
    float sum = qa_hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += f16_to_f32(a[i]) * b[i];
    *s = sum;
}

void vec_dot_bf16_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y) {
    const bf16_t *a = x;
    const float *b = y;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 2; k++) {
            __m128i h = _mm_loadu_si128((const __m128i *)(a + i + 8 * k));
            __m256 av = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
            acc[k] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + i + 8 * k), acc[k]);
        }
    float sum = qa_hsum_ps(_mm256_add_ps(acc[0], acc[1]));
    for (; i < n; i++) sum += bf16_to_f32(a[i]) * b[i];
    *s = sum;
}
