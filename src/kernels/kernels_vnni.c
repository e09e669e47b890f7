/* The VNNI overlay (see wtype_tables.h): for the six types whose kernels
 * differ where the CPU has VNNI, only the fields that differ from their
 * wtype_traits_avx2 entry, each kernel in its two builds side by side: the
 * AVX-VNNI one (cpuid 7.1 EAX bit 4, the 256-bit VEX vpdpbusd/vpdpwssd;
 * *_vnni_avx2.c) and the AVX512-VNNI one (the same 256-bit code
 * EVEX-encoded, gemm_vnni.h, with 512-bit K-quant panels, for CPUs with
 * AVX512-VNNI and AVX512VL: AMD Zen 4, Intel Ice Lake and Sapphire Rapids
 * servers, which take it over AVX-VNNI where they have both;
 * *_vnni512_avx2.c). wtype_init builds each VNNI table as the AVX2 table with
 * one column of this laid over it. The VNNI builds give the same bits as
 * the AVX2 ones (test_gemm checks each against the AVX2 tiles), so the
 * choice changes speed only. Data only. */
#include "kernels/wtype_tables.h"

#include "kernels/quants_kernels.h"

const wtype_vnni_overlay wtype_overlay_vnni[WT_COUNT] = {
    /* 32-element formats: the panels of gemm_panel_vnni{,512}_avx2.c, and
     * the activations as they read them (quants + 128); the x8 tiles of
     * gemm_x8_vnni{,512}_avx2.c, 8 columns in the AVX512-VNNI build (see
     * X8_COLS_EVEX) */
    [WT_Q4_0] =
        {
            .gemm_pack = {gemm_pack_q4_0_vnni, gemm_pack_q4_0_vnni512},
            .x8_gemm_pack = {gemm_pack_x8_q4_0_vnni, gemm_pack_x8_q4_0_vnni512},
            .gemm_panel = {gemm_panel_q4_0_q8_0_vnni, gemm_panel_q4_0_q8_0_vnni512},
            .gemm_x8 = {gemm_x8_q4_0_q8_0_vnni, gemm_x8_q4_0_q8_0_vnni512},
            .x8_cols = {0, X8_COLS_EVEX},
            .panel_prep = {gemm_prep_q8_0_vnni, gemm_prep_q8_0_vnni512},
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_VNNI,
        },
    [WT_Q5_0] =
        {
            .gemm_pack = {gemm_pack_q5_0_vnni, gemm_pack_q5_0_vnni512},
            .x8_gemm_pack = {gemm_pack_x8_q5_0_vnni, gemm_pack_x8_q5_0_vnni512},
            .gemm_panel = {gemm_panel_q5_0_q8_0_vnni, gemm_panel_q5_0_q8_0_vnni512},
            .gemm_x8 = {gemm_x8_q5_0_q8_0_vnni, gemm_x8_q5_0_q8_0_vnni512},
            .x8_cols = {0, X8_COLS_EVEX},
            .panel_prep = {gemm_prep_q8_0_vnni, gemm_prep_q8_0_vnni512},
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_VNNI,
        },
    [WT_Q8_0] =
        {
            .gemm_pack = {gemm_pack_q8_0_vnni, gemm_pack_q8_0_vnni512},
            .x8_gemm_pack = {gemm_pack_x8_q8_0_vnni, gemm_pack_x8_q8_0_vnni512},
            .gemm_panel = {gemm_panel_q8_0_q8_0_vnni, gemm_panel_q8_0_q8_0_vnni512},
            .gemm_x8 = {gemm_x8_q8_0_q8_0_vnni, gemm_x8_q8_0_q8_0_vnni512},
            .x8_cols = {0, X8_COLS_EVEX},
            .panel_prep = {gemm_prep_q8_0_vnni, gemm_prep_q8_0_vnni512},
            .panel_block_bytes = GEMM_PANEL_BLOCK, /* AVX2's Q8_0 panels hold |w| too */
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_VNNI,
        },
    /* K-quants: the tiles and panels of gemm_k_vnni{,512}_avx2.c, the x8
     * tiles of gemm_x8_k_vnni{,512}_avx2.c. Q4_K's AVX512-VNNI tiles keep 4
     * columns: at 8, gemma-3-270m's attn_output took 0.95 ms against 0.80
     * (8 rows, 1 thread, Zen 4), where Q6_K's ffn_down went 2.6-2.9 -> 2.4-2.6 */
    [WT_Q4_K] =
        {
            .gemm = {gemm_q4_K_q8_K_vnni, gemm_q4_K_q8_K_vnni512},
            .gemm_pack = {gemm_pack_q4_K_vnni, gemm_pack_q4_K_vnni512},
            .x8_gemm_pack = {gemm_pack_x8_q4_K_vnni, gemm_pack_x8_q4_K_vnni512},
            .gemm_panel = {gemm_panel_q4_K_q8_K_vnni, gemm_panel_q4_K_q8_K_vnni512},
            .gemm_x8 = {gemm_x8_q4_K_q8_K_vnni, gemm_x8_q4_K_q8_K_vnni512},
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_VNNI,
        },
    [WT_Q5_K] =
        {
            .gemm = {gemm_q5_K_q8_K_vnni, gemm_q5_K_q8_K_vnni512},
            .gemm_pack = {gemm_pack_q5_K_vnni, gemm_pack_q5_K_vnni512},
            .x8_gemm_pack = {gemm_pack_x8_q5_K_vnni, gemm_pack_x8_q5_K_vnni512},
            .gemm_panel = {gemm_panel_q5_K_q8_K_vnni, gemm_panel_q5_K_q8_K_vnni512},
            .gemm_x8 = {gemm_x8_q5_K_q8_K_vnni, gemm_x8_q5_K_q8_K_vnni512},
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_VNNI,
        },
    [WT_Q6_K] =
        {
            .gemm = {gemm_q6_K_q8_K_vnni, gemm_q6_K_q8_K_vnni512},
            .gemm_pack = {gemm_pack_q6_K_vnni, gemm_pack_q6_K_vnni512},
            .x8_gemm_pack = {gemm_pack_x8_q6_K_vnni, gemm_pack_x8_q6_K_vnni512},
            .gemm_panel = {gemm_panel_q6_K_q8_K_vnni, gemm_panel_q6_K_q8_K_vnni512},
            .gemm_x8 = {gemm_x8_q6_K_q8_K_vnni, gemm_x8_q6_K_q8_K_vnni512},
            .x8_cols = {0, X8_COLS_EVEX},
            .x8_panel_min_tok = X8_PANEL_MIN_TOK_VNNI,
        },
};
