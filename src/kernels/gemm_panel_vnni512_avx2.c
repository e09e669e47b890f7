/* Packed-panel gemm (see gemm_panel_impl.h), built for CPUs with AVX512-VNNI
 * and AVX512VL (AMD Zen 4, Intel Ice Lake and Sapphire Rapids servers;
 * chosen over AVX-VNNI where a CPU has both): the AVX-VNNI build's 256-bit code with the EVEX encodings (gemm_vnni.h). The
 * registry's VNNI overlay (kernels_vnni.c) names it. */
#pragma GCC target("avx512vnni,avx512vl")
#define GEMM_VNNI_EVEX 1
#define GEMM_VNNI 1
#include "kernels/gemm_panel_impl.h"

void gemm_pack_q4_0_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    panel_pack(P_Q4_0, n, nr, x, bx, panel);
}

void gemm_pack_x8_q4_0_vnni512(int n, const void *restrict x8, void *restrict panel) {
    panel_pack_x8(P_Q4_0, n, x8, panel);
}

void gemm_panel_q4_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    panel_tile_any(P_Q4_0, n, nr, nc, s, ldc, panel, y, by);
}

void gemm_pack_q5_0_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    panel_pack(P_Q5_0, n, nr, x, bx, panel);
}

void gemm_pack_x8_q5_0_vnni512(int n, const void *restrict x8, void *restrict panel) {
    panel_pack_x8(P_Q5_0, n, x8, panel);
}

void gemm_panel_q5_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    panel_tile_any(P_Q5_0, n, nr, nc, s, ldc, panel, y, by);
}

void gemm_pack_q8_0_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    panel_pack(P_Q8_0, n, nr, x, bx, panel);
}

void gemm_pack_x8_q8_0_vnni512(int n, const void *restrict x8, void *restrict panel) {
    panel_pack_x8(P_Q8_0, n, x8, panel);
}

void gemm_panel_q8_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    panel_tile_any(P_Q8_0, n, nr, nc, s, ldc, panel, y, by);
}

/* The activations as the panels read them: quants + 128, for all three. */
void gemm_prep_q8_0_vnni512(int n, const void *restrict act, void *restrict out) {
    panel_prep(true, n, act, out);
}
