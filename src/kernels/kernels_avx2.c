/* The AVX2 kernel table (see wtype_tables.h): what runs on CPUs with
 * AVX2+FMA+F16C, every type of the reference table with the AVX2 kernel
 * where one exists and the reference one (named *_ref) where not. The types
 * with packed panels (gemm_pack, gemm_panel) are the ones matmul runs that
 * way from MM_PANEL_MIN_TOK activation rows (an x8 weight from
 * x8_panel_min_tok). Then the AVX2 ops table (ops_tables.h). This file holds
 * data only; it is compiled with the AVX2 flags like every *_avx2.c. */
#include "kernels/wtype_tables.h"

#include "kernels/float_kernels.h"
#include "kernels/ops_tables.h"
#include "kernels/gq_kernels.h"
#include "kernels/quants_kernels.h"

const wtype_traits wtype_traits_avx2[WT_COUNT] = {
    /* float formats (float_dot_avx2.c, gemm_float_avx2.c) */
    [WT_F32] =
        {
            .vec_dot_type = WT_F32,
            .to_float = f32_to_float_ref,
            .from_float = f32_from_float_ref,
            .vec_dot = vec_dot_f32_f32_avx2,
            .gemm = gemm_f32_f32_avx2,
            .gemm_rows = GEMM_FLOAT_ROWS,
            .gemm_cols = GEMM_FLOAT_COLS,
        },
    [WT_F16] =
        {
            .vec_dot_type = WT_F32,
            .to_float = f16_to_float_avx2,
            .from_float = f16_from_float_avx2,
            .vec_dot = vec_dot_f16_f32_avx2,
            .gemm = gemm_f16_f32_avx2,
            .gemm_rows = GEMM_FLOAT_ROWS,
            .gemm_cols = GEMM_FLOAT_COLS,
        },
    [WT_BF16] =
        {
            .vec_dot_type = WT_F32,
            .to_float = bf16_to_float_ref,
            .from_float = bf16_from_float_ref,
            .vec_dot = vec_dot_bf16_f32_avx2,
            .gemm = gemm_bf16_f32_avx2,
            .gemm_rows = GEMM_FLOAT_ROWS,
            .gemm_cols = GEMM_FLOAT_COLS,
        },
    /* 32-element formats (quants_legacy_avx2.c, gemm_legacy_avx2.c, gemm_panel_avx2.c) */
    [WT_Q4_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q4_0_to_float_avx2,
            .from_float = q4_0_from_float_ref,
            .vec_dot = vec_dot_q4_0_q8_0_avx2,
            .gemm = gemm_q4_0_q8_0_avx2,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
            .gemm_pack = gemm_pack_q4_0_avx2,
            .x8_gemm_pack = gemm_pack_x8_q4_0_avx2,
            .gemm_panel = gemm_panel_q4_0_q8_0_avx2,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_PANEL_BLOCK,
            .panel_prep = gemm_prep_q8_0_avx2,
            .panel_act_block_bytes = GEMM_PANEL_ACT_BLOCK,
            .x8_block_bytes = X8_BLOCK_Q4_0,
            .x8_pack = x8_pack_q4_0_ref,
            .x8_unpack = x8_unpack_q4_0_ref,
            .gemm_x8 = gemm_x8_q4_0_q8_0_avx2,
            .x8_cols = X8_COLS,
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_AVX2,
            .x8_prep = gemm_prep_x8_q8_0_avx2,
            .x8_act_block_bytes = X8_ACT_BLOCK,
        },
    /* MXFP4 (quants_mxfp4_*.c): no tiles, one dot product per output */
    [WT_MXFP4] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = mxfp4_to_float_ref,
            .from_float = mxfp4_from_float_ref,
            .vec_dot = vec_dot_mxfp4_q8_0_avx2,
        },
    [WT_Q4_1] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = q4_1_to_float_ref,
            .from_float = q4_1_from_float_ref,
            .vec_dot = vec_dot_q4_1_q8_1_avx2,
            .gemm = gemm_q4_1_q8_1_avx2,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    [WT_Q5_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q5_0_to_float_ref,
            .from_float = q5_0_from_float_ref,
            .vec_dot = vec_dot_q5_0_q8_0_avx2,
            .gemm = gemm_q5_0_q8_0_avx2,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
            .gemm_pack = gemm_pack_q5_0_avx2,
            .x8_gemm_pack = gemm_pack_x8_q5_0_avx2,
            .gemm_panel = gemm_panel_q5_0_q8_0_avx2,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_PANEL_BLOCK,
            .panel_prep = gemm_prep_q8_0_avx2,
            .panel_act_block_bytes = GEMM_PANEL_ACT_BLOCK,
            .x8_block_bytes = X8_BLOCK_Q5_0,
            .x8_pack = x8_pack_q5_0_ref,
            .x8_unpack = x8_unpack_q5_0_ref,
            .gemm_x8 = gemm_x8_q5_0_q8_0_avx2,
            .x8_cols = X8_COLS,
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_AVX2,
            .x8_prep = gemm_prep_x8_q8_0_avx2,
            .x8_act_block_bytes = X8_ACT_BLOCK,
        },
    [WT_Q5_1] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = q5_1_to_float_ref,
            .from_float = q5_1_from_float_ref,
            .vec_dot = vec_dot_q5_1_q8_1_avx2,
            .gemm = gemm_q5_1_q8_1_avx2,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    [WT_Q8_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q8_0_to_float_avx2,
            .from_float = q8_0_from_float_avx2,
            .vec_dot = vec_dot_q8_0_q8_0_avx2,
            .gemm = gemm_q8_0_q8_0_avx2,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
            .gemm_pack = gemm_pack_q8_0_avx2,
            .x8_gemm_pack = gemm_pack_x8_q8_0_avx2,
            .gemm_panel = gemm_panel_q8_0_q8_0_avx2,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_PANEL_BLOCK_SIGNED_Q8,
            .panel_prep = gemm_prep_q8_0_signed_avx2,
            .panel_act_block_bytes = GEMM_PANEL_ACT_BLOCK,
            .x8_block_bytes = X8_BLOCK_Q8_0,
            .x8_pack = x8_pack_q8_0_ref,
            .x8_unpack = x8_unpack_q8_0_ref,
            .gemm_x8 = gemm_x8_q8_0_q8_0_avx2,
            .x8_cols = X8_COLS,
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_AVX2,
            .x8_prep = gemm_prep_x8_q8_0_avx2,
            .x8_act_block_bytes = X8_ACT_BLOCK,
        },
    [WT_Q8_1] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = q8_1_to_float_ref,
            .from_float = q8_1_from_float_avx2,
        },
    /* K-quants (quants_k_avx2.c, gemm_k_avx2.c) */
    [WT_Q2_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q2_K_to_float_ref,
            .from_float = q2_K_from_float_ref,
            .vec_dot = vec_dot_q2_K_q8_K_avx2,
        },
    [WT_Q3_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q3_K_to_float_ref,
            .from_float = q3_K_from_float_ref,
            .vec_dot = vec_dot_q3_K_q8_K_avx2,
        },
    [WT_Q4_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q4_K_to_float_ref,
            .from_float = q4_K_from_float_ref,
            .vec_dot = vec_dot_q4_K_q8_K_avx2,
            .gemm = gemm_q4_K_q8_K_avx2,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
            .gemm_pack = gemm_pack_q4_K_avx2,
            .x8_gemm_pack = gemm_pack_x8_q4_K_avx2,
            .gemm_panel = gemm_panel_q4_K_q8_K_avx2,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_KPANEL_BLOCK,
            .x8_block_bytes = X8_BLOCK_Q4_K,
            .x8_pack = x8_pack_q4_K_ref,
            .x8_unpack = x8_unpack_q4_K_ref,
            .gemm_x8 = gemm_x8_q4_K_q8_K_avx2,
            .x8_cols = X8_COLS,
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_AVX2,
        },
    [WT_Q5_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q5_K_to_float_ref,
            .from_float = q5_K_from_float_ref,
            .vec_dot = vec_dot_q5_K_q8_K_avx2,
            .gemm = gemm_q5_K_q8_K_avx2,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
            .gemm_pack = gemm_pack_q5_K_avx2,
            .x8_gemm_pack = gemm_pack_x8_q5_K_avx2,
            .gemm_panel = gemm_panel_q5_K_q8_K_avx2,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_KPANEL_BLOCK,
            .x8_block_bytes = X8_BLOCK_Q5_K,
            .x8_pack = x8_pack_q5_K_ref,
            .x8_unpack = x8_unpack_q5_K_ref,
            .gemm_x8 = gemm_x8_q5_K_q8_K_avx2,
            .x8_cols = X8_COLS,
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_AVX2,
        },
    [WT_Q6_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q6_K_to_float_ref,
            .from_float = q6_K_from_float_ref,
            .vec_dot = vec_dot_q6_K_q8_K_avx2,
            .gemm = gemm_q6_K_q8_K_avx2,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
            .gemm_pack = gemm_pack_q6_K_avx2,
            .x8_gemm_pack = gemm_pack_x8_q6_K_avx2,
            .gemm_panel = gemm_panel_q6_K_q8_K_avx2,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_KPANEL_BLOCK_Q6,
            .x8_block_bytes = X8_BLOCK_Q6_K,
            .x8_pack = x8_pack_q6_K_ref,
            .x8_unpack = x8_unpack_q6_K_ref,
            .gemm_x8 = gemm_x8_q6_K_q8_K_avx2,
            .x8_cols = X8_COLS,
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_AVX2,
        },
    [WT_Q8_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q8_K_to_float_ref,
            .from_float = q8_K_from_float_avx2,
        },
    /* GQ formats (gq_avx2.c) */
    [WT_GQ2_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_g32_to_float_ref,
            .from_float = gq2_g32_from_float_ref,
            .vec_dot = vec_dot_gq2_g32_q8_1_avx2,
            .gemm = gemm_gq2_g32_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ2_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_g64_to_float_ref,
            .from_float = gq2_g64_from_float_ref,
            .vec_dot = vec_dot_gq2_g64_q8_1_avx2,
            .gemm = gemm_gq2_g64_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ2_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_g128_to_float_ref,
            .from_float = gq2_g128_from_float_ref,
            .vec_dot = vec_dot_gq2_g128_q8_1_avx2,
            .gemm = gemm_gq2_g128_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ2_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_row_to_float_ref,
            .from_float = gq2_row_from_float_ref,
            .vec_dot = vec_dot_gq2_row_q8_1_avx2,
            .gemm = gemm_gq2_row_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ3_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_g32_to_float_ref,
            .from_float = gq3_g32_from_float_ref,
            .vec_dot = vec_dot_gq3_g32_q8_1_avx2,
            .gemm = gemm_gq3_g32_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ3_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_g64_to_float_ref,
            .from_float = gq3_g64_from_float_ref,
            .vec_dot = vec_dot_gq3_g64_q8_1_avx2,
            .gemm = gemm_gq3_g64_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ3_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_g128_to_float_ref,
            .from_float = gq3_g128_from_float_ref,
            .vec_dot = vec_dot_gq3_g128_q8_1_avx2,
            .gemm = gemm_gq3_g128_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ3_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_row_to_float_ref,
            .from_float = gq3_row_from_float_ref,
            .vec_dot = vec_dot_gq3_row_q8_1_avx2,
            .gemm = gemm_gq3_row_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ4_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_g32_to_float_ref,
            .from_float = gq4_g32_from_float_ref,
            .vec_dot = vec_dot_gq4_g32_q8_1_avx2,
            .gemm = gemm_gq4_g32_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ4_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_g64_to_float_ref,
            .from_float = gq4_g64_from_float_ref,
            .vec_dot = vec_dot_gq4_g64_q8_1_avx2,
            .gemm = gemm_gq4_g64_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ4_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_g128_to_float_ref,
            .from_float = gq4_g128_from_float_ref,
            .vec_dot = vec_dot_gq4_g128_q8_1_avx2,
            .gemm = gemm_gq4_g128_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ4_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_row_to_float_ref,
            .from_float = gq4_row_from_float_ref,
            .vec_dot = vec_dot_gq4_row_q8_1_avx2,
            .gemm = gemm_gq4_row_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ8_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_g32_to_float_ref,
            .from_float = gq8_g32_from_float_ref,
            .vec_dot = vec_dot_gq8_g32_q8_1_avx2,
            .gemm = gemm_gq8_g32_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ8_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_g64_to_float_ref,
            .from_float = gq8_g64_from_float_ref,
            .vec_dot = vec_dot_gq8_g64_q8_1_avx2,
            .gemm = gemm_gq8_g64_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ8_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_g128_to_float_ref,
            .from_float = gq8_g128_from_float_ref,
            .vec_dot = vec_dot_gq8_g128_q8_1_avx2,
            .gemm = gemm_gq8_g128_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
    [WT_GQ8_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_row_to_float_ref,
            .from_float = gq8_row_from_float_ref,
            .vec_dot = vec_dot_gq8_row_q8_1_avx2,
            .gemm = gemm_gq8_row_q8_1_avx2,
            .gemm_rows = GQ_TILE_ROWS,
            .gemm_cols = GQ_TILE_COLS,
        },
};

/* The row operations and attention (ops_tables.h): the AVX2 versions
 * (ops_avx2.c, attention_avx2.c). */
const kernel_ops kernel_ops_avx2 = {
    .rmsnorm = rmsnorm_avx2,
    .layernorm = layernorm_avx2,
    .gelu_erf = gelu_erf_avx2,
    .silu_mul = silu_mul_avx2,
    .gelu_tanh_mul = gelu_tanh_mul_avx2,
    .swiglu_oai_mul = swiglu_oai_mul_avx2,
    .exp_weights = exp_weights_avx2,
    .row_argmax = row_argmax_avx2,
    .attn_tile = attn_tile_avx2,
};
