/* x8 tiles of Q4_0, Q5_0 and Q8_0 (see gemm_x8_impl.h), AVX2 build, and the
 * activations as they read them: per block the scale as f32, the sum of the
 * quants as int32, and the 32 quants (the same for every build). */
#define GEMM_VNNI 0
#include "kernels/gemm_x8_impl.h"

#include <string.h>

void gemm_x8_q4_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q4_0, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q5_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q5_0, n, nc, s, ldc, x, y, by);
}

void gemm_x8_q8_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                            size_t bx, const void *restrict y, size_t by) {
    (void)nr, (void)bx;
    x8_tile_any(X_Q8_0, n, nc, s, ldc, x, y, by);
}

void gemm_prep_x8_q8_0_avx2(int n, const void *restrict act, void *restrict out) {
    const block_q8_0 *a = act;
    uint8_t *o = out;
    for (int b = 0; b < n / QK8_0; b++, o += X8_ACT_BLOCK) {
        const float d = qa_f16(a[b].d);
        int32_t sum = 0;
        for (int j = 0; j < QK8_0; j++) sum += a[b].qs[j];
        memcpy(o, &d, sizeof d);
        memcpy(o + 4, &sum, sizeof sum);
        memcpy(o + 8, a[b].qs, QK8_0);
    }
}
