/* Reference tiles (wtype_gemm_fn): one reference dot product per output, the
 * definition the AVX2 tiles are tested against, and what matmul runs on a
 * CPU without AVX2. */
#include "kernels/quants_kernels.h"

typedef void (*dot_fn)(int n, float *restrict s, const void *restrict x, const void *restrict y);

static void tile_by_dots(dot_fn dot, int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *x, size_t bx, const void *y, size_t by) {
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            dot(n, &s[(size_t)c * ldc + r], (const uint8_t *)x + (size_t)r * bx,
                (const uint8_t *)y + (size_t)c * by);
}

#define GEMM_REF(W, A)                                                                             \
    void gemm_##W##_##A##_ref(int n, int nr, int nc, float *restrict s, size_t ldc,                \
                              const void *restrict x, size_t bx, const void *restrict y,           \
                              size_t by) {                                                         \
        tile_by_dots(vec_dot_##W##_##A##_ref, n, nr, nc, s, ldc, x, bx, y, by);                    \
    }

GEMM_REF(q4_0, q8_0)
GEMM_REF(q4_1, q8_1)
GEMM_REF(q5_0, q8_0)
GEMM_REF(q5_1, q8_1)
GEMM_REF(q8_0, q8_0)
GEMM_REF(q4_K, q8_K)
GEMM_REF(q5_K, q8_K)
GEMM_REF(q6_K, q8_K)
