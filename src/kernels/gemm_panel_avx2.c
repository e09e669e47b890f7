/* Packed-panel gemm (see gemm_panel_impl.h), AVX2 build. */
#define GEMM_VNNI 0
#include "kernels/gemm_panel_impl.h"

void gemm_pack_q4_0_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    panel_pack(P_Q4_0, n, nr, x, bx, panel);
}

void gemm_pack_x8_q4_0_avx2(int n, const void *restrict x8, void *restrict panel) {
    panel_pack_x8(P_Q4_0, n, x8, panel);
}

void gemm_panel_q4_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    panel_tile_any(P_Q4_0, n, nr, nc, s, ldc, panel, y, by);
}

void gemm_pack_q5_0_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    panel_pack(P_Q5_0, n, nr, x, bx, panel);
}

void gemm_pack_x8_q5_0_avx2(int n, const void *restrict x8, void *restrict panel) {
    panel_pack_x8(P_Q5_0, n, x8, panel);
}

void gemm_panel_q5_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    panel_tile_any(P_Q5_0, n, nr, nc, s, ldc, panel, y, by);
}

void gemm_pack_q8_0_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    panel_pack(P_Q8_0, n, nr, x, bx, panel);
}

void gemm_pack_x8_q8_0_avx2(int n, const void *restrict x8, void *restrict panel) {
    panel_pack_x8(P_Q8_0, n, x8, panel);
}

void gemm_panel_q8_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    panel_tile_any(P_Q8_0, n, nr, nc, s, ldc, panel, y, by);
}

/* The activations as the panels read them: quants + 128 (Q4_0, Q5_0), or as
 * they are (Q8_0, whose plain AVX2 panel keeps them signed). */
void gemm_prep_q8_0_avx2(int n, const void *restrict act, void *restrict out) {
    panel_prep(true, n, act, out);
}

void gemm_prep_q8_0_signed_avx2(int n, const void *restrict act, void *restrict out) {
    panel_prep(false, n, act, out);
}
