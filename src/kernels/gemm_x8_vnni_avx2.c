/* x8 tiles of Q4_0, Q5_0 and Q8_0 (see gemm_x8_impl.h), built for CPUs with
 * AVX-VNNI; the registry's VNNI overlay (kernels_vnni.c) names them. */
#pragma GCC target("avxvnni")
#define GEMM_VNNI 1
#include "kernels/gemm_x8_impl.h"

void gemm_x8_q4_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q4_0, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q5_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q5_0, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q8_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q8_0, n, nc, s, ldc, x, y, by);
}
