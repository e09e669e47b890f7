/* Prototypes of the quantized-format kernels, for the registry tables
 * (kernels_ref.c, kernels_avx2.c, kernels_vnni.c) and the kernel tests: the
 * rest of the engine reaches them through the wtype registry. Signatures
 * match wtype.h's function types. Naming:
 *   <type>_to_float_<isa>        dequantize n elements
 *   <type>_from_float_<isa>      quantize n elements (n a multiple of the block)
 *   vec_dot_<w>_<a>_<isa>        dot of n weights of type w with activations a
 *   gemm_<w>_<a>_<isa>           a tile of such dots (wtype_gemm_fn)
 *   gemm_pack_<w>_<isa>          packs weight rows into a panel for gemm_panel_<w>_<a>_<isa>
 *   gemm_prep_<a>_<isa>          rewrites activation rows as those panels read them
 * <isa> is ref (scalar, the definition of the format), avx2 or vnni (AVX2
 * with AVX-VNNI). */
#ifndef CLLM_KERNELS_QUANTS_KERNELS_H
#define CLLM_KERNELS_QUANTS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

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

/* The x8 layout (x8_layout.c): bytes per block of 8 interleaved rows (8
 * times the type's block), activation rows per gemm_x8 tile, and bytes per
 * prepared activation block (f32 d, int32 sum of the quants, 32 quants). */
#define X8_BLOCK_Q4_0 144
#define X8_BLOCK_Q5_0 176
#define X8_BLOCK_Q8_0 272
#define X8_BLOCK_Q4_K 1184 /* 8 * 144 + 32: the scales and mins as bytes */
#define X8_BLOCK_Q5_K 1440 /* 8 * 176 + 32 */
#define X8_BLOCK_Q6_K 1680
#ifndef X8_COLS
#define X8_COLS 4
#endif
/* The AVX512-VNNI builds' x8 tiles are compiled for up to X8_COLS_EVEX
 * activation rows: 32 vector registers hold 8 accumulators beside a block's
 * weight vectors, where AVX2's 16 spill them. Which types take them is the
 * overlay's x8_cols (kernels_vnni.c). */
#define X8_COLS_EVEX 8
#define X8_ACT_BLOCK 40
/* Activation rows from which an x8 weight takes panels (x8_panel_min_tok).
 * The AVX2 x8 tiles need three instructions per group where the VNNI panels
 * need one, so plain AVX2 takes panels from 12 rows (build/matmul_bench
 * gemma-3-270m, 2 threads, all matmuls of a step, AMD EPYC Zen 4: 10 rows
 * 23.3 ms x8 against 23.7 panels, 16 rows 38.1 against 35.1, 24 rows 62.1
 * against 53.3). The VNNI tables' x8 tiles are VNNI code too (Q8_0's one
 * instruction per group since its levels go in as w + 128), and they skip
 * the panels' packing, so they hold up to 8 rows: same bench and CPU, 1 and
 * 2 threads, 4 rows 13.1-13.4 and 7.9-11.1 ms x8 against 22.4-37.2 and
 * 17.8-22.3 panels (the Q8_0 output head 8.3-9.3 against 14.4-22.1 at one
 * thread), 8 rows at 2 threads 19.2-21.4 against 22.4-23.1, 12 rows 30.0-33.6
 * against 25.4-28.0. */
#define X8_PANEL_MIN_TOK_AVX2 12
#define X8_PANEL_MIN_TOK_VNNI 9

/* quants_legacy_ref.c */
void q4_0_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q4_0_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q4_1_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q4_1_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q5_0_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q5_0_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q5_1_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q5_1_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q8_0_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q8_0_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q8_1_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q8_1_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_q4_0_q8_0_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q4_1_q8_1_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q5_0_q8_0_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q5_1_q8_1_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q8_0_q8_0_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);

/* quants_k_ref.c (the quantizers' scale searches in quants_k_search.c) */
void q2_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q2_K_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q3_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q3_K_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q4_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q4_K_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q5_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q5_K_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q6_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q6_K_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void q8_K_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void q8_K_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_q2_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q3_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q4_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q5_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);
void vec_dot_q6_K_q8_K_ref(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);

/* quants_mxfp4_ref.c: the doubled E2M1 levels, the block scale 2^(e - 128)
 * they take, and the type's reference kernels */
extern const int8_t k_mxfp4_values[16];
float mxfp4_half_scale(uint8_t e);
void mxfp4_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void mxfp4_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_mxfp4_q8_0_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);

/* quants_mxfp4_avx2.c */
void vec_dot_mxfp4_q8_0_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y);

/* quants_legacy_avx2.c */
void q4_0_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
void q8_0_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
void q8_0_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void q8_1_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_q4_0_q8_0_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q4_1_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q5_0_q8_0_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q5_1_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q8_0_q8_0_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);

/* quants_k_avx2.c */
void q8_K_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_q2_K_q8_K_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q3_K_q8_K_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q4_K_q8_K_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q5_K_q8_K_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);
void vec_dot_q6_K_q8_K_avx2(int n, float *restrict s, const void *restrict x,
                            const void *restrict y);

/* gemm_ref.c: one reference dot product per output */
void gemm_q4_0_q8_0_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q4_1_q8_1_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_0_q8_0_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_1_q8_1_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q8_0_q8_0_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q4_K_q8_K_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_K_q8_K_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q6_K_q8_K_ref(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);

/* gemm_legacy_avx2.c */
void gemm_q4_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q4_1_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_1_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q8_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);

/* gemm_panel_avx2.c */
void gemm_pack_q4_0_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q4_0_avx2(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q4_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q5_0_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q5_0_avx2(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q5_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q8_0_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q8_0_avx2(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q8_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_prep_q8_0_avx2(int n, const void *restrict act, void *restrict out);
void gemm_prep_q8_0_signed_avx2(int n, const void *restrict act, void *restrict out);

/* gemm_panel_vnni_avx2.c */
void gemm_pack_q4_0_vnni(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q4_0_vnni(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q4_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q5_0_vnni(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q5_0_vnni(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q5_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q8_0_vnni(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q8_0_vnni(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q8_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_prep_q8_0_vnni(int n, const void *restrict act, void *restrict out);

/* gemm_k_avx2.c */
void gemm_q4_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q6_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_pack_q4_K_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q4_K_avx2(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q4_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q5_K_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q5_K_avx2(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q5_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q6_K_avx2(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q6_K_avx2(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q6_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);

/* gemm_k_vnni_avx2.c */
void gemm_q4_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q6_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_pack_q4_K_vnni(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q4_K_vnni(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q4_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q5_K_vnni(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q5_K_vnni(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q5_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q6_K_vnni(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q6_K_vnni(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q6_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);


/* x8_layout.c: the x8 layout's definition (8 rows <-> n / 32 x8 blocks) */
void x8_pack_q4_0_ref(int n, const void *restrict rows, size_t bx, void *restrict out);
void x8_unpack_q4_0_ref(int n, const void *restrict x8, void *restrict rows, size_t bx);
void x8_pack_q5_0_ref(int n, const void *restrict rows, size_t bx, void *restrict out);
void x8_unpack_q5_0_ref(int n, const void *restrict x8, void *restrict rows, size_t bx);
void x8_pack_q8_0_ref(int n, const void *restrict rows, size_t bx, void *restrict out);
void x8_unpack_q8_0_ref(int n, const void *restrict x8, void *restrict rows, size_t bx);
void x8_pack_q4_K_ref(int n, const void *restrict rows, size_t bx, void *restrict out);
void x8_unpack_q4_K_ref(int n, const void *restrict x8, void *restrict rows, size_t bx);
void x8_pack_q5_K_ref(int n, const void *restrict rows, size_t bx, void *restrict out);
void x8_unpack_q5_K_ref(int n, const void *restrict x8, void *restrict rows, size_t bx);
void x8_pack_q6_K_ref(int n, const void *restrict rows, size_t bx, void *restrict out);
void x8_unpack_q6_K_ref(int n, const void *restrict x8, void *restrict rows, size_t bx);

/* gemm_x8_avx2.c: 8 x8 rows by up to X8_COLS prepared activation rows */
void gemm_x8_q4_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q5_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q8_0_q8_0_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_prep_x8_q8_0_avx2(int n, const void *restrict act, void *restrict out);
/* gemm_x8_vnni_avx2.c, gemm_x8_vnni512_avx2.c: the VNNI builds of the x8 tiles */
void gemm_x8_q4_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q5_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q8_0_q8_0_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q4_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q5_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q8_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict x, size_t bx, const void *restrict y, size_t by);

/* gemm_x8_k_avx2.c: the same for the K-quants, on Q8_K rows as they are;
 * gemm_x8_k_vnni_avx2.c and gemm_x8_k_vnni512_avx2.c: their VNNI builds */
void gemm_x8_q4_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q5_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q6_K_q8_K_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q4_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q5_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q6_K_q8_K_vnni(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q4_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q5_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_x8_q6_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict x, size_t bx, const void *restrict y, size_t by);


/* gemm_panel_vnni512_avx2.c, gemm_k_vnni512_avx2.c: the VNNI builds EVEX-encoded */
void gemm_pack_q4_0_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q4_0_vnni512(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q4_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q5_0_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q5_0_vnni512(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q5_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q8_0_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q8_0_vnni512(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q8_0_q8_0_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_prep_q8_0_vnni512(int n, const void *restrict act, void *restrict out);
void gemm_q4_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q5_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_q6_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *restrict x, size_t bx, const void *restrict y, size_t by);
void gemm_pack_q4_K_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q4_K_vnni512(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q4_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q5_K_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q5_K_vnni512(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q5_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);
void gemm_pack_q6_K_vnni512(int n, int nr, const void *restrict x, size_t bx, void *restrict panel);
void gemm_pack_x8_q6_K_vnni512(int n, const void *restrict x8, void *restrict panel);
void gemm_panel_q6_K_q8_K_vnni512(int n, int nr, int nc, float *restrict s, size_t ldc,
                               const void *restrict panel, size_t bx, const void *restrict y,
                               size_t by);

#endif
