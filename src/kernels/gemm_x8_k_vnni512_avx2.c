/* K-quant x8 tiles (see gemm_x8_k_impl.h), built for CPUs with AVX512-VNNI
 * and AVX512VL (chosen over AVX-VNNI where a CPU has both): the AVX-VNNI
 * build's 256-bit code with the EVEX encodings (gemm_vnni.h). The registry's VNNI overlay names them. */
#pragma GCC target("avx512vnni,avx512vl")
#define GEMM_VNNI_EVEX 1
#define GEMM_VNNI 1
#include "kernels/gemm_x8_k_impl.h"

void gemm_x8_q4_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                               size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8k_any(X8K_Q4, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q5_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                               size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8k_any(X8K_Q5, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q6_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                               size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8k_any(X8K_Q6, n, nc, s, ldc, x, y, by);
}
