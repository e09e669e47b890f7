/* Prototypes of the quantized-format kernels, for quants_register.c and
 * nothing else: the rest of the engine reaches them through the wtype
 * registry. Signatures match wtype.h's function types. Naming:
 *   <type>_to_float_<impl>      dequantize n elements
 *   <type>_from_float_<impl>    quantize n elements (n a multiple of the block)
 *   vec_dot_<w>_<a>_<impl>      dot of n weights of type w with activations a
 *   gemm_<w>_<a>_<impl>         a tile of such dots (wtype_gemm_fn)
 *   gemm_pack_<w>_<impl>        packs weight rows into a panel for gemm_panel_<w>_<a>_<impl>
 * <impl> is ref (scalar, the definition of the format), avx2 or vnni (AVX2
 * with AVX-VNNI). */
#ifndef CLLM_KERNELS_QUANTS_KERNELS_H
#define CLLM_KERNELS_QUANTS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define QUANTS_CONVERT(T, impl)                                                                    \
    void T##_to_float_##impl(const void *restrict x, float *restrict y, int64_t n);                \
    void T##_from_float_##impl(const float *restrict x, void *restrict y, int64_t n);
#define QUANTS_DOT(W, A, impl)                                                                     \
    void vec_dot_##W##_##A##_##impl(int n, float *restrict s, const void *restrict x,              \
                                    const void *restrict y);
#define QUANTS_GEMM(W, A, impl)                                                                    \
    void gemm_##W##_##A##_##impl(int n, int nr, int nc, float *restrict s, size_t ldc,             \
                                 const void *restrict x, size_t bx, const void *restrict y,        \
                                 size_t by);

/* Tile shapes of the AVX2 gemm kernels (rows x activation rows); the
 * reference tiles take the same shapes. */
#ifndef GEMM_LEGACY_ROWS
#define GEMM_LEGACY_ROWS 4
#define GEMM_LEGACY_COLS 4
#endif
#define GEMM_K_ROWS 4
#ifndef GEMM_K_COLS
#define GEMM_K_COLS 2
#endif
/* Packed panels (gemm_panel_impl.h): rows per panel, activation rows per
 * tile, and panel bytes per 32-element block (Q8_0 on plain AVX2 keeps |w|
 * as well). */
#define GEMM_PANEL_ROWS 8
#ifndef GEMM_PANEL_COLS
#define GEMM_PANEL_COLS 4
#endif
#define GEMM_PANEL_BLOCK 320
#define GEMM_PANEL_BLOCK_SIGNED_Q8 576
/* Prepared activations (gemm_prep_*) per 32-element block: f32 d, 32 bytes */
#define GEMM_PANEL_ACT_BLOCK 36
/* ... and per 256-element super-block for the K-quants (gemm_k_impl.h) */
#define GEMM_KPANEL_BLOCK 2624
#define GEMM_KPANEL_BLOCK_Q6 2848
#define QUANTS_PANEL(W, A, impl)                                                                   \
    void gemm_pack_##W##_##impl(int n, int nr, const void *restrict x, size_t bx,                  \
                                void *restrict panel);                                             \
    void gemm_panel_##W##_##A##_##impl(int n, int nr, int nc, float *restrict s, size_t ldc,       \
                                       const void *restrict panel, size_t bx,                      \
                                       const void *restrict y, size_t by);

/* quants_legacy_ref.c */
QUANTS_CONVERT(q4_0, ref)
QUANTS_CONVERT(q4_1, ref)
QUANTS_CONVERT(q5_0, ref)
QUANTS_CONVERT(q5_1, ref)
QUANTS_CONVERT(q8_0, ref)
QUANTS_CONVERT(q8_1, ref)
QUANTS_DOT(q4_0, q8_0, ref)
QUANTS_DOT(q4_1, q8_1, ref)
QUANTS_DOT(q5_0, q8_0, ref)
QUANTS_DOT(q5_1, q8_1, ref)
QUANTS_DOT(q8_0, q8_0, ref)

/* quants_k_ref.c (quantizer searches in quants_k_search.c) */
QUANTS_CONVERT(q2_K, ref)
QUANTS_CONVERT(q3_K, ref)
QUANTS_CONVERT(q4_K, ref)
QUANTS_CONVERT(q5_K, ref)
QUANTS_CONVERT(q6_K, ref)
QUANTS_CONVERT(q8_K, ref)
QUANTS_DOT(q2_K, q8_K, ref)
QUANTS_DOT(q3_K, q8_K, ref)
QUANTS_DOT(q4_K, q8_K, ref)
QUANTS_DOT(q5_K, q8_K, ref)
QUANTS_DOT(q6_K, q8_K, ref)

/* quants_legacy_avx2.c */
void q8_0_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void q8_1_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void q4_0_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
void q8_0_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
QUANTS_DOT(q4_0, q8_0, avx2)
QUANTS_DOT(q4_1, q8_1, avx2)
QUANTS_DOT(q5_0, q8_0, avx2)
QUANTS_DOT(q5_1, q8_1, avx2)
QUANTS_DOT(q8_0, q8_0, avx2)

/* quants_k_avx2.c */
void q8_K_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
QUANTS_DOT(q2_K, q8_K, avx2)
QUANTS_DOT(q3_K, q8_K, avx2)
QUANTS_DOT(q4_K, q8_K, avx2)
QUANTS_DOT(q5_K, q8_K, avx2)
QUANTS_DOT(q6_K, q8_K, avx2)

/* gemm_ref.c: tiles of the reference dot products */
QUANTS_GEMM(q4_0, q8_0, ref)
QUANTS_GEMM(q4_1, q8_1, ref)
QUANTS_GEMM(q5_0, q8_0, ref)
QUANTS_GEMM(q5_1, q8_1, ref)
QUANTS_GEMM(q8_0, q8_0, ref)
QUANTS_GEMM(q4_K, q8_K, ref)
QUANTS_GEMM(q5_K, q8_K, ref)
QUANTS_GEMM(q6_K, q8_K, ref)

/* gemm_legacy_avx2.c */
QUANTS_GEMM(q4_0, q8_0, avx2)
QUANTS_GEMM(q4_1, q8_1, avx2)
QUANTS_GEMM(q5_0, q8_0, avx2)
QUANTS_GEMM(q5_1, q8_1, avx2)
QUANTS_GEMM(q8_0, q8_0, avx2)

/* gemm_k_avx2.c and gemm_k_vnni_avx2.c */
QUANTS_GEMM(q4_K, q8_K, avx2)
QUANTS_GEMM(q5_K, q8_K, avx2)
QUANTS_GEMM(q6_K, q8_K, avx2)
QUANTS_GEMM(q4_K, q8_K, vnni)
QUANTS_GEMM(q5_K, q8_K, vnni)
QUANTS_GEMM(q6_K, q8_K, vnni)
QUANTS_PANEL(q4_K, q8_K, avx2)
QUANTS_PANEL(q5_K, q8_K, avx2)
QUANTS_PANEL(q6_K, q8_K, avx2)
QUANTS_PANEL(q4_K, q8_K, vnni)
QUANTS_PANEL(q5_K, q8_K, vnni)
QUANTS_PANEL(q6_K, q8_K, vnni)

/* gemm_panel_avx2.c and gemm_panel_vnni_avx2.c */
QUANTS_PANEL(q4_0, q8_0, avx2)
QUANTS_PANEL(q5_0, q8_0, avx2)
QUANTS_PANEL(q8_0, q8_0, avx2)
QUANTS_PANEL(q4_0, q8_0, vnni)
QUANTS_PANEL(q5_0, q8_0, vnni)
QUANTS_PANEL(q8_0, q8_0, vnni)
void gemm_prep_q8_0_avx2(int n, const void *restrict act, void *restrict out);
void gemm_prep_q8_0_signed_avx2(int n, const void *restrict act, void *restrict out);
void gemm_prep_q8_0_vnni(int n, const void *restrict act, void *restrict out);

#undef QUANTS_CONVERT
#undef QUANTS_DOT
#undef QUANTS_GEMM
#undef QUANTS_PANEL

#endif
