/* The AVX-VNNI kernel table (see wtype_tables.h): full entries for the
 * types whose kernels differ where the CPU has AVX-VNNI (cpuid 7.1 EAX bit 4,
 * the 256-bit VEX vpdpbusd/vpdpwssd; not AVX512-VNNI); every other type takes
 * its wtype_traits_avx2 entry. The VNNI builds give the same bits as the
 * AVX2 ones (test_gemm checks each against the AVX2 tiles), so the choice
 * changes speed only. Data only. */
#include "kernels/wtype_tables.h"

#include "kernels/float_kernels.h"
#include "kernels/gq_kernels.h"
#include "kernels/quants_kernels.h"

const wtype_traits wtype_traits_vnni[WT_COUNT] = {
    /* 32-element formats: the panels of gemm_panel_vnni_avx2.c */
    [WT_Q4_0] =
        {
            .vec_dot_type = WT_Q8_0,
            .to_float = q4_0_to_float_avx2,
            .from_float = q4_0_from_float_ref,
            .vec_dot = vec_dot_q4_0_q8_0_avx2,
            .gemm = gemm_q4_0_q8_0_avx2,
            .gemm_rows = GEMM_LEGACY_ROWS,
            .gemm_cols = GEMM_LEGACY_COLS,
            .gemm_pack = gemm_pack_q4_0_vnni,
            .gemm_panel = gemm_panel_q4_0_q8_0_vnni,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_PANEL_BLOCK,
            .panel_prep = gemm_prep_q8_0_vnni,
            .panel_act_block_bytes = GEMM_PANEL_ACT_BLOCK,
            .x8_pack = x8_pack_q4_0_ref,
            .x8_unpack = x8_unpack_q4_0_ref,
            .gemm_x8 = gemm_x8_q4_0_q8_0_avx2,
            .x8_cols = X8_COLS,
            .x8_prep = gemm_prep_x8_q8_0_avx2,
            .x8_act_block_bytes = X8_ACT_BLOCK,
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
            .gemm_pack = gemm_pack_q5_0_vnni,
            .gemm_panel = gemm_panel_q5_0_q8_0_vnni,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_PANEL_BLOCK,
            .panel_prep = gemm_prep_q8_0_vnni,
            .panel_act_block_bytes = GEMM_PANEL_ACT_BLOCK,
            .x8_pack = x8_pack_q5_0_ref,
            .x8_unpack = x8_unpack_q5_0_ref,
            .gemm_x8 = gemm_x8_q5_0_q8_0_avx2,
            .x8_cols = X8_COLS,
            .x8_prep = gemm_prep_x8_q8_0_avx2,
            .x8_act_block_bytes = X8_ACT_BLOCK,
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
            .gemm_pack = gemm_pack_q8_0_vnni,
            .gemm_panel = gemm_panel_q8_0_q8_0_vnni,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_PANEL_BLOCK,
            .panel_prep = gemm_prep_q8_0_vnni,
            .panel_act_block_bytes = GEMM_PANEL_ACT_BLOCK,
            .x8_pack = x8_pack_q8_0_ref,
            .x8_unpack = x8_unpack_q8_0_ref,
            .gemm_x8 = gemm_x8_q8_0_q8_0_avx2,
            .x8_cols = X8_COLS,
            .x8_prep = gemm_prep_x8_q8_0_avx2,
            .x8_act_block_bytes = X8_ACT_BLOCK,
        },
    /* K-quants: the tiles and panels of gemm_k_vnni_avx2.c */
    [WT_Q4_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q4_K_to_float_ref,
            .from_float = q4_K_from_float_ref,
            .vec_dot = vec_dot_q4_K_q8_K_avx2,
            .gemm = gemm_q4_K_q8_K_vnni,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
            .gemm_pack = gemm_pack_q4_K_vnni,
            .gemm_panel = gemm_panel_q4_K_q8_K_vnni,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_KPANEL_BLOCK,
        },
    [WT_Q5_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q5_K_to_float_ref,
            .from_float = q5_K_from_float_ref,
            .vec_dot = vec_dot_q5_K_q8_K_avx2,
            .gemm = gemm_q5_K_q8_K_vnni,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
            .gemm_pack = gemm_pack_q5_K_vnni,
            .gemm_panel = gemm_panel_q5_K_q8_K_vnni,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_KPANEL_BLOCK,
        },
    [WT_Q6_K] =
        {
            .vec_dot_type = WT_Q8_K,
            .to_float = q6_K_to_float_ref,
            .from_float = q6_K_from_float_ref,
            .vec_dot = vec_dot_q6_K_q8_K_avx2,
            .gemm = gemm_q6_K_q8_K_vnni,
            .gemm_rows = GEMM_K_ROWS,
            .gemm_cols = GEMM_K_COLS,
            .gemm_pack = gemm_pack_q6_K_vnni,
            .gemm_panel = gemm_panel_q6_K_q8_K_vnni,
            .panel_rows = GEMM_PANEL_ROWS,
            .panel_cols = GEMM_PANEL_COLS,
            .panel_block_bytes = GEMM_KPANEL_BLOCK_Q6,
        },
};
