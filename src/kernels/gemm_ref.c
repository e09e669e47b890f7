/* Reference tiles (wtype_gemm_fn) of every type that has tiles: one
 * reference dot product per output, the definition the AVX2 tiles are tested
 * against, and what matmul runs on a CPU without AVX2. */
#include "kernels/float_kernels.h"
#include "kernels/quants_kernels.h"

typedef void (*dot_fn)(int n, float *restrict s, const void *restrict x, const void *restrict y);

static void tile_by_dots(dot_fn dot, int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *x, size_t bx, const void *y, size_t by) {
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            dot(n, &s[(size_t)c * ldc + r], (const uint8_t *)x + (size_t)r * bx,
                (const uint8_t *)y + (size_t)c * by);
}

/* ---- float formats ---- */

void gemm_f32_f32_ref(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                      size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_f32_f32_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_f16_f32_ref(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                      size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_f16_f32_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_bf16_f32_ref(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                       size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_bf16_f32_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

/* ---- 32-element formats ---- */

void gemm_q4_0_q8_0_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q4_0_q8_0_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q4_1_q8_1_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q4_1_q8_1_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q5_0_q8_0_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q5_0_q8_0_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q5_1_q8_1_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q5_1_q8_1_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q8_0_q8_0_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q8_0_q8_0_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

/* ---- K-quants ---- */

void gemm_q4_K_q8_K_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q4_K_q8_K_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q5_K_q8_K_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q5_K_q8_K_ref, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q6_K_q8_K_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    tile_by_dots(vec_dot_q6_K_q8_K_ref, n, nr, nc, s, ldc, x, bx, y, by);
}
