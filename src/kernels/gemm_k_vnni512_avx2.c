/* K-quant gemm tiles and panels (see gemm_k_impl.h), built for CPUs with AVX512-VNNI
 * and AVX512VL (AMD Zen 4, Intel Ice Lake and Sapphire Rapids servers; chosen
 * over AVX-VNNI where a CPU has both): the AVX-VNNI build's 256-bit tiles with
 * the EVEX encodings (gemm_vnni.h), and its panels in 512-bit registers
 * (gemm_k_panel_zmm.h). The registry's VNNI overlay (kernels_vnni.c) names it. */
#pragma GCC target("avx512f,avx512bw,avx512vnni,avx512vl")
#define GEMM_VNNI_EVEX 1
#define GEMM_VNNI 1
#include "kernels/gemm_k_impl.h"
#include "kernels/gemm_k_panel_zmm.h"

void gemm_q4_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    k_tile_any(K_Q4, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q5_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    k_tile_any(K_Q5, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_q6_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    k_tile_any(K_Q6, n, nr, nc, s, ldc, x, bx, y, by);
}

void gemm_pack_q4_K_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    kpanel_pack(K_Q4, n, nr, x, bx, panel);
    kzmm_interleave(K_Q4, n / QK_K, panel);
}

void gemm_pack_x8_q4_K_vnni512(int n, const void *restrict x8, void *restrict panel) {
    kpanel_pack_x8(K_Q4, n, x8, panel);
    kzmm_interleave(K_Q4, n / QK_K, panel);
}

void gemm_panel_q4_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    kzmm_tile_any(K_Q4, n, nr, nc, s, ldc, panel, y, by);
}

void gemm_pack_q5_K_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    kpanel_pack(K_Q5, n, nr, x, bx, panel);
    kzmm_interleave(K_Q5, n / QK_K, panel);
}

void gemm_pack_x8_q5_K_vnni512(int n, const void *restrict x8, void *restrict panel) {
    kpanel_pack_x8(K_Q5, n, x8, panel);
    kzmm_interleave(K_Q5, n / QK_K, panel);
}

void gemm_panel_q5_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    kzmm_tile_any(K_Q5, n, nr, nc, s, ldc, panel, y, by);
}

void gemm_pack_q6_K_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel) {
    kpanel_pack(K_Q6, n, nr, x, bx, panel);
    kzmm_interleave(K_Q6, n / QK_K, panel);
}

void gemm_pack_x8_q6_K_vnni512(int n, const void *restrict x8, void *restrict panel) {
    kpanel_pack_x8(K_Q6, n, x8, panel);
    kzmm_interleave(K_Q6, n / QK_K, panel);
}

void gemm_panel_q6_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by) {
    (void)bx;
    kzmm_tile_any(K_Q6, n, nr, nc, s, ldc, panel, y, by);
}
