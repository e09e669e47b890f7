/* The reference kernel table (see wtype_tables.h): scalar kernels of every
 * type cllm computes with. The tiles (gemm) are one reference dot per output
 * and take the AVX2 tiles' shapes; there are no panels. Q8_1 and Q8_K are
 * activation formats: converters, no dot product. Then the reference ops
 * table (ops_tables.h). */
#include "kernels/wtype_tables.h"

#include "kernels/float_kernels.h"
#include "kernels/ops_tables.h"
#include "kernels/gq_kernels.h"
#include "kernels/quants_kernels.h"

const wtype_traits wtype_traits_ref[WT_COUNT] = {
    /* float formats (float_dot_ref.c; tiles gemm_ref.c) */
    [WT_F32] =
        {
            .vec_dot_type = WT_F32,
            .to_float = f32_to_float_ref,
            .from_float = f32_from_float_ref,
            .vec_dot = vec_dot_f32_f32_ref,
            .gemm = gemm_f32_f32_ref,
            .gemm_rows = GEMM_FLOAT_ROWS,
            .gemm_cols = GEMM_FLOAT_COLS,
        },
    [WT_F16] =
        {
            .vec_dot_type = WT_F32,
            .to_float = f16_to_float_ref,
            .from_float = f16_from_float_ref,
            .vec_dot = vec_dot_f16_f32_ref,
            .gemm = gemm_f16_f32_ref,
            .gemm_rows = GEMM_FLOAT_ROWS,
            .gemm_cols = GEMM_FLOAT_COLS,
        },
    [WT_BF16] =
        {
            .vec_dot_type = WT_F32,
            .to_float = bf16_to_float_ref,
            .from_float = bf16_from_float_ref,
            .vec_dot = vec_dot_bf16_f32_ref,
            .gemm = gemm_bf16_f32_ref,
            .gemm_rows = GEMM_FLOAT_ROWS,
            .gemm_cols = GEMM_FLOAT_COLS,
        },
    /* 32-element formats (quants_legacy_ref.c; tiles gemm_ref.c) */
    [WT_Q4_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q4_0_to_float_ref,
            .from_float = q4_0_from_float_ref,
            .vec_dot = vec_dot_q4_0_q8_0_ref,
            .gemm = gemm_q4_0_q8_0_ref,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    /* MXFP4 (quants_mxfp4_*.c): no tiles, one dot product per output */
    [WT_MXFP4] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = mxfp4_to_float_ref,
            .from_float = mxfp4_from_float_ref,
            .vec_dot = vec_dot_mxfp4_q8_0_ref,
        },
    [WT_Q4_1] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = q4_1_to_float_ref,
            .from_float = q4_1_from_float_ref,
            .vec_dot = vec_dot_q4_1_q8_1_ref,
            .gemm = gemm_q4_1_q8_1_ref,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    [WT_Q5_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q5_0_to_float_ref,
            .from_float = q5_0_from_float_ref,
            .vec_dot = vec_dot_q5_0_q8_0_ref,
            .gemm = gemm_q5_0_q8_0_ref,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    [WT_Q5_1] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = q5_1_to_float_ref,
            .from_float = q5_1_from_float_ref,
            .vec_dot = vec_dot_q5_1_q8_1_ref,
            .gemm = gemm_q5_1_q8_1_ref,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    [WT_Q8_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q8_0_to_float_ref,
            .from_float = q8_0_from_float_ref,
            .vec_dot = vec_dot_q8_0_q8_0_ref,
            .gemm = gemm_q8_0_q8_0_ref,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
        },
    [WT_Q8_1] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = q8_1_to_float_ref,
            .from_float = q8_1_from_float_ref,
        },
    /* K-quants (quants_k_ref.c; tiles gemm_ref.c) */
    [WT_Q2_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q2_K_to_float_ref,
            .from_float = q2_K_from_float_ref,
            .vec_dot = vec_dot_q2_K_q8_K_ref,
        },
    [WT_Q3_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q3_K_to_float_ref,
            .from_float = q3_K_from_float_ref,
            .vec_dot = vec_dot_q3_K_q8_K_ref,
        },
    [WT_Q4_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q4_K_to_float_ref,
            .from_float = q4_K_from_float_ref,
            .vec_dot = vec_dot_q4_K_q8_K_ref,
            .gemm = gemm_q4_K_q8_K_ref,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
        },
    [WT_Q5_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q5_K_to_float_ref,
            .from_float = q5_K_from_float_ref,
            .vec_dot = vec_dot_q5_K_q8_K_ref,
            .gemm = gemm_q5_K_q8_K_ref,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
        },
    [WT_Q6_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q6_K_to_float_ref,
            .from_float = q6_K_from_float_ref,
            .vec_dot = vec_dot_q6_K_q8_K_ref,
            .gemm = gemm_q6_K_q8_K_ref,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
        },
    [WT_Q8_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q8_K_to_float_ref,
            .from_float = q8_K_from_float_ref,
        },
    /* GQ formats (gq_ref.c) */
    [WT_GQ2_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_g32_to_float_ref,
            .from_float = gq2_g32_from_float_ref,
            .vec_dot = vec_dot_gq2_g32_q8_1_ref,
        },
    [WT_GQ2_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_g64_to_float_ref,
            .from_float = gq2_g64_from_float_ref,
            .vec_dot = vec_dot_gq2_g64_q8_1_ref,
        },
    [WT_GQ2_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_g128_to_float_ref,
            .from_float = gq2_g128_from_float_ref,
            .vec_dot = vec_dot_gq2_g128_q8_1_ref,
        },
    [WT_GQ2_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq2_row_to_float_ref,
            .from_float = gq2_row_from_float_ref,
            .vec_dot = vec_dot_gq2_row_q8_1_ref,
        },
    [WT_GQ3_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_g32_to_float_ref,
            .from_float = gq3_g32_from_float_ref,
            .vec_dot = vec_dot_gq3_g32_q8_1_ref,
        },
    [WT_GQ3_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_g64_to_float_ref,
            .from_float = gq3_g64_from_float_ref,
            .vec_dot = vec_dot_gq3_g64_q8_1_ref,
        },
    [WT_GQ3_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_g128_to_float_ref,
            .from_float = gq3_g128_from_float_ref,
            .vec_dot = vec_dot_gq3_g128_q8_1_ref,
        },
    [WT_GQ3_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq3_row_to_float_ref,
            .from_float = gq3_row_from_float_ref,
            .vec_dot = vec_dot_gq3_row_q8_1_ref,
        },
    [WT_GQ4_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_g32_to_float_ref,
            .from_float = gq4_g32_from_float_ref,
            .vec_dot = vec_dot_gq4_g32_q8_1_ref,
        },
    [WT_GQ4_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_g64_to_float_ref,
            .from_float = gq4_g64_from_float_ref,
            .vec_dot = vec_dot_gq4_g64_q8_1_ref,
        },
    [WT_GQ4_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_g128_to_float_ref,
            .from_float = gq4_g128_from_float_ref,
            .vec_dot = vec_dot_gq4_g128_q8_1_ref,
        },
    [WT_GQ4_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq4_row_to_float_ref,
            .from_float = gq4_row_from_float_ref,
            .vec_dot = vec_dot_gq4_row_q8_1_ref,
        },
    [WT_GQ8_G32] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_g32_to_float_ref,
            .from_float = gq8_g32_from_float_ref,
            .vec_dot = vec_dot_gq8_g32_q8_1_ref,
        },
    [WT_GQ8_G64] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_g64_to_float_ref,
            .from_float = gq8_g64_from_float_ref,
            .vec_dot = vec_dot_gq8_g64_q8_1_ref,
        },
    [WT_GQ8_G128] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_g128_to_float_ref,
            .from_float = gq8_g128_from_float_ref,
            .vec_dot = vec_dot_gq8_g128_q8_1_ref,
        },
    [WT_GQ8_ROW] =
        {
            .vec_dot_type = WT_Q8_1,
            .to_float = gq8_row_to_float_ref,
            .from_float = gq8_row_from_float_ref,
            .vec_dot = vec_dot_gq8_row_q8_1_ref,
        },
};

/* The row operations and attention (ops_tables.h): the scalar references (ops_ref.c, attention_tile_ref.c). */
const kernel_ops kernel_ops_ref = {
    .rmsnorm = rmsnorm_ref,
    .layernorm = layernorm_ref,
    .gelu_erf = gelu_erf_ref,
    .silu_mul = silu_mul_ref,
    .gelu_tanh_mul = gelu_tanh_mul_ref,
    .swiglu_oai_mul = swiglu_oai_mul_ref,
    .exp_weights = exp_weights_ref,
    .row_argmax = row_argmax_ref,
    .attn_tile = attn_tile_ref,
};
