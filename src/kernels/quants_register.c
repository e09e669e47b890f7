/* Fills the weight type registry (wtype.c) with the quantized formats: the
 * scalar reference kernels in `ref`, and in `fast` the AVX2 ones where they
 * exist (the reference elsewhere). Weight types name the activation format
 * their dot product takes (vec_dot_type); activation-only types (Q8_1, Q8_K)
 * have converters but no dot product. */
#include "kernels/quants.h"

#include "kernels/quants_kernels.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    wtype type;
    wtype vec_dot_type;
    wtype_to_float_fn to_float, to_float_fast;
    wtype_from_float_fn from_float, from_float_fast;
    wtype_vec_dot_fn vec_dot, vec_dot_fast;
} quant_kernels;

/* The gemm tiles, for the types that have them: reference, AVX2 and
 * AVX-VNNI (NULL: the AVX2 one serves), and the tile shape (all take the
 * AVX2 one's). */
typedef struct {
    wtype type;
    wtype_gemm_fn gemm, gemm_fast, gemm_vnni;
    int rows, cols;
} quant_gemm;

/* One row per type: type, activation type, then to_float, from_float and
 * vec_dot, each as reference and AVX2 (NULL: the reference serves AVX2
 * machines too). */
static const quant_kernels k_kernels[] = {
    {WT_Q4_0, WT_Q8_0, q4_0_to_float_ref, q4_0_to_float_avx2, q4_0_from_float_ref, NULL,
     vec_dot_q4_0_q8_0_ref, vec_dot_q4_0_q8_0_avx2},
    {WT_Q4_1, WT_Q8_1, q4_1_to_float_ref, NULL, q4_1_from_float_ref, NULL, vec_dot_q4_1_q8_1_ref,
     vec_dot_q4_1_q8_1_avx2},
    {WT_Q5_0, WT_Q8_0, q5_0_to_float_ref, NULL, q5_0_from_float_ref, NULL, vec_dot_q5_0_q8_0_ref,
     vec_dot_q5_0_q8_0_avx2},
    {WT_Q5_1, WT_Q8_1, q5_1_to_float_ref, NULL, q5_1_from_float_ref, NULL, vec_dot_q5_1_q8_1_ref,
     vec_dot_q5_1_q8_1_avx2},
    {WT_Q8_0, WT_Q8_0, q8_0_to_float_ref, q8_0_to_float_avx2, q8_0_from_float_ref,
     q8_0_from_float_avx2, vec_dot_q8_0_q8_0_ref, vec_dot_q8_0_q8_0_avx2},
    {WT_Q8_1, WT_Q8_1, q8_1_to_float_ref, NULL, q8_1_from_float_ref, q8_1_from_float_avx2, NULL,
     NULL},
    {WT_Q2_K, WT_Q8_K, q2_K_to_float_ref, NULL, q2_K_from_float_ref, NULL, vec_dot_q2_K_q8_K_ref,
     vec_dot_q2_K_q8_K_avx2},
    {WT_Q3_K, WT_Q8_K, q3_K_to_float_ref, NULL, q3_K_from_float_ref, NULL, vec_dot_q3_K_q8_K_ref,
     vec_dot_q3_K_q8_K_avx2},
    {WT_Q4_K, WT_Q8_K, q4_K_to_float_ref, NULL, q4_K_from_float_ref, NULL, vec_dot_q4_K_q8_K_ref,
     vec_dot_q4_K_q8_K_avx2},
    {WT_Q5_K, WT_Q8_K, q5_K_to_float_ref, NULL, q5_K_from_float_ref, NULL, vec_dot_q5_K_q8_K_ref,
     vec_dot_q5_K_q8_K_avx2},
    {WT_Q6_K, WT_Q8_K, q6_K_to_float_ref, NULL, q6_K_from_float_ref, NULL, vec_dot_q6_K_q8_K_ref,
     vec_dot_q6_K_q8_K_avx2},
    {WT_Q8_K, WT_Q8_K, q8_K_to_float_ref, NULL, q8_K_from_float_ref, q8_K_from_float_avx2, NULL,
     NULL},
};

static const quant_gemm k_gemms[] = {
    {WT_Q4_0, gemm_q4_0_q8_0_ref, gemm_q4_0_q8_0_avx2, NULL, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q4_1, gemm_q4_1_q8_1_ref, gemm_q4_1_q8_1_avx2, NULL, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q5_0, gemm_q5_0_q8_0_ref, gemm_q5_0_q8_0_avx2, NULL, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q5_1, gemm_q5_1_q8_1_ref, gemm_q5_1_q8_1_avx2, NULL, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q8_0, gemm_q8_0_q8_0_ref, gemm_q8_0_q8_0_avx2, NULL, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q4_K, gemm_q4_K_q8_K_ref, gemm_q4_K_q8_K_avx2, gemm_q4_K_q8_K_vnni, GEMM_K_ROWS,
     GEMM_K_COLS},
    {WT_Q5_K, gemm_q5_K_q8_K_ref, gemm_q5_K_q8_K_avx2, gemm_q5_K_q8_K_vnni, GEMM_K_ROWS,
     GEMM_K_COLS},
    {WT_Q6_K, gemm_q6_K_q8_K_ref, gemm_q6_K_q8_K_avx2, gemm_q6_K_q8_K_vnni, GEMM_K_ROWS,
     GEMM_K_COLS},
};

/* The packed panels (AVX2 only; the reference has none: matmul then takes
 * the gemm tiles, which compute the same): the plain AVX2 and the AVX-VNNI
 * builds. */
typedef struct {
    wtype type;
    wtype_gemm_pack_fn pack, pack_vnni;
    wtype_gemm_fn panel, panel_vnni;
    size_t block_bytes, block_bytes_vnni;
    wtype_gemm_prep_fn prep, prep_vnni; /* NULL: activations as they are */
} quant_panel;

static const quant_panel k_panels[] = {
    {WT_Q4_0, gemm_pack_q4_0_avx2, gemm_pack_q4_0_vnni, gemm_panel_q4_0_q8_0_avx2,
     gemm_panel_q4_0_q8_0_vnni, GEMM_PANEL_BLOCK, GEMM_PANEL_BLOCK, gemm_prep_q8_0_avx2,
     gemm_prep_q8_0_vnni},
    {WT_Q5_0, gemm_pack_q5_0_avx2, gemm_pack_q5_0_vnni, gemm_panel_q5_0_q8_0_avx2,
     gemm_panel_q5_0_q8_0_vnni, GEMM_PANEL_BLOCK, GEMM_PANEL_BLOCK, gemm_prep_q8_0_avx2,
     gemm_prep_q8_0_vnni},
    {WT_Q8_0, gemm_pack_q8_0_avx2, gemm_pack_q8_0_vnni, gemm_panel_q8_0_q8_0_avx2,
     gemm_panel_q8_0_q8_0_vnni, GEMM_PANEL_BLOCK_SIGNED_Q8, GEMM_PANEL_BLOCK,
     gemm_prep_q8_0_signed_avx2, gemm_prep_q8_0_vnni},
    {WT_Q4_K, gemm_pack_q4_K_avx2, gemm_pack_q4_K_vnni, gemm_panel_q4_K_q8_K_avx2,
     gemm_panel_q4_K_q8_K_vnni, GEMM_KPANEL_BLOCK, GEMM_KPANEL_BLOCK, NULL, NULL},
    {WT_Q5_K, gemm_pack_q5_K_avx2, gemm_pack_q5_K_vnni, gemm_panel_q5_K_q8_K_avx2,
     gemm_panel_q5_K_q8_K_vnni, GEMM_KPANEL_BLOCK, GEMM_KPANEL_BLOCK, NULL, NULL},
    {WT_Q6_K, gemm_pack_q6_K_avx2, gemm_pack_q6_K_vnni, gemm_panel_q6_K_q8_K_avx2,
     gemm_panel_q6_K_q8_K_vnni, GEMM_KPANEL_BLOCK_Q6, GEMM_KPANEL_BLOCK_Q6, NULL, NULL},
};

/* AVX-VNNI (cpuid 7.1 EAX bit 4), unless the environment sets CLLM_NO_VNNI=1. */
static bool cpu_has_avxvnni(void) {
    const char *off = getenv("CLLM_NO_VNNI");
    if (off && *off && strcmp(off, "0")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avxvnni");
}

void quants_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2) {
    for (size_t i = 0; i < sizeof k_kernels / sizeof k_kernels[0]; i++) {
        const quant_kernels *k = &k_kernels[i];
        wtype_traits *r = &ref[k->type], *f = &fast[k->type];
        r->vec_dot_type = f->vec_dot_type = k->vec_dot_type;
        r->to_float = f->to_float = k->to_float;
        r->from_float = f->from_float = k->from_float;
        r->vec_dot = f->vec_dot = k->vec_dot;
        if (!use_avx2) continue;
        if (k->to_float_fast) f->to_float = k->to_float_fast;
        if (k->from_float_fast) f->from_float = k->from_float_fast;
        if (k->vec_dot_fast) f->vec_dot = k->vec_dot_fast;
    }
    const bool vnni = use_avx2 && cpu_has_avxvnni();
    for (size_t i = 0; i < sizeof k_gemms / sizeof k_gemms[0]; i++) {
        const quant_gemm *g = &k_gemms[i];
        wtype_traits *r = &ref[g->type], *f = &fast[g->type];
        r->gemm = f->gemm = g->gemm;
        r->gemm_rows = f->gemm_rows = g->rows;
        r->gemm_cols = f->gemm_cols = g->cols;
        if (use_avx2) f->gemm = vnni && g->gemm_vnni ? g->gemm_vnni : g->gemm_fast;
    }
    if (!use_avx2) return;
    for (size_t i = 0; i < sizeof k_panels / sizeof k_panels[0]; i++) {
        const quant_panel *p = &k_panels[i];
        wtype_traits *f = &fast[p->type];
        f->gemm_pack = vnni ? p->pack_vnni : p->pack;
        f->gemm_panel = vnni ? p->panel_vnni : p->panel;
        f->panel_block_bytes = vnni ? p->block_bytes_vnni : p->block_bytes;
        f->panel_prep = vnni ? p->prep_vnni : p->prep;
        f->panel_act_block_bytes = f->panel_prep ? GEMM_PANEL_ACT_BLOCK : 0;
        f->panel_rows = GEMM_PANEL_ROWS;
        f->panel_cols = GEMM_PANEL_COLS;
    }
}
