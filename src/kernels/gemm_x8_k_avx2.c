/* K-quant x8 tiles (see gemm_x8_k_impl.h), AVX2 build. */
#define GEMM_VNNI 0
#include "kernels/gemm_x8_k_impl.h"

void gemm_x8_q4_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8k_any(X8K_Q4, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q5_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8k_any(X8K_Q5, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q6_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8k_any(X8K_Q6, n, nc, s, ldc, x, y, by);
}
