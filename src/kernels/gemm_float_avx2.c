/* AVX2 tile kernels (wtype_gemm_fn) for the float weight formats F32, F16
 * and BF16 against f32 activations: GEMM_FLOAT_ROWS weight rows by up to
 * GEMM_FLOAT_COLS activation rows, one 8-lane FMA accumulator per output.
 * Each 8 weights are loaded (and widened) once for all the activation rows,
 * each 8 activations once for all the weight rows.
 *
 * Every output is computed as: acc = fma(w[i..i+7], x[i..i+7], acc) over
 * i = 0, 8, ..., the horizontal sum of acc (qa_hsum_ps), then the elements
 * past the last multiple of 8 added one by one; the same whatever the tile's
 * shape. Rows beyond nr repeat row 0 and are computed but not stored. */
#include "kernels/float_kernels.h"

#include "kernels/gemm_avx2.h"
#include "kernels/quants_avx2.h"
#include "util/fp16.h"

#define FR GEMM_FLOAT_ROWS
#define FC GEMM_FLOAT_COLS
_Static_assert(FC >= 1 && FC <= 8, "GEMM_DISPATCH instantiates 1 to 8 columns");

enum { F_F32, F_F16, F_BF16 };

GEMM_INLINE __m256 load8(int T, const uint8_t *row, int i) {
    switch (T) {
    case F_F32:
        return _mm256_loadu_ps((const float *)row + i);
    case F_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const f16_t *)row + i)));
    default:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const bf16_t *)row + i))),
            16));
    }
}

GEMM_INLINE float load1(int T, const uint8_t *row, int i) {
    switch (T) {
    case F_F32:
        return ((const float *)row)[i];
    case F_F16:
        return f16_to_f32(((const f16_t *)row)[i]);
    default:
        return bf16_to_f32(((const bf16_t *)row)[i]);
    }
}

GEMM_INLINE void float_tile(const int T, const int NC, int n, int nr, float *restrict s, size_t ldc,
                            const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
    const uint8_t *row[FR];
    for (int r = 0; r < FR; r++)
        row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    const float *col[FC];
    for (int c = 0; c < NC; c++)
        col[c] = (const float *)(y + (size_t)c * by);
    __m256 acc[FR][FC];
    for (int r = 0; r < FR; r++)
        for (int c = 0; c < NC; c++)
            acc[r][c] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 yv[FC];
        for (int c = 0; c < NC; c++)
            yv[c] = _mm256_loadu_ps(col[c] + i);
        for (int r = 0; r < FR; r++) {
            const __m256 w = load8(T, row[r], i);
            for (int c = 0; c < NC; c++)
                acc[r][c] = _mm256_fmadd_ps(w, yv[c], acc[r][c]);
        }
    }
    for (int c = 0; c < NC; c++)
        for (int r = 0; r < nr; r++) {
            float sum = qa_hsum_ps(acc[r][c]);
            for (int k = i; k < n; k++)
                sum += load1(T, row[r], k) * col[c][k];
            s[(size_t)c * ldc + r] = sum;
        }
}

/* float_tile with NC = nc, a constant in each instance. */
GEMM_INLINE void float_tile_any(const int T, int n, int nr, int nc, float *restrict s, size_t ldc,
                                const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
#define FLOAT_TILE(NCV) float_tile(T, NCV, n, nr, s, ldc, x, bx, y, by)
    GEMM_DISPATCH(nc, FC, FLOAT_TILE)
#undef FLOAT_TILE
}

void gemm_f32_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                       const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    float_tile_any(F_F32, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_f16_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                       const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    float_tile_any(F_F16, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_bf16_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    float_tile_any(F_BF16, n, nr, nc, s, ldc, x, bx, y, by);
}
