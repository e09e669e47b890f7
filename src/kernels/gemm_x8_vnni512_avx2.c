/* x8 tiles of Q4_0, Q5_0 and Q8_0 (see gemm_x8_impl.h), built for CPUs with
 * AVX512-VNNI and AVX512VL but not AVX-VNNI: the AVX-VNNI build's 256-bit
 * code with the EVEX encodings (gemm_vnni.h). The registry's VNNI overlay
 * names them. */
#pragma GCC target("avx512vnni,avx512vl")
#define GEMM_VNNI_EVEX 1
#define GEMM_VNNI 1
#include "kernels/gemm_x8_impl.h"

void gemm_x8_q4_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                               size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q4_0, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q5_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                               size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q5_0, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q8_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                               size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q8_0, n, nc, s, ldc, x, y, by);
}
