/* The gemm tiles (wtype_gemm_fn) and matmul built on them:
 *  - every tile shape (1..gemm_rows weight rows by 1..gemm_cols activation
 *    rows), laid over a matrix whose sizes are not multiples of the tile,
 *    gives the reference dot product of every (row, activation row) pair to
 *    f32 rounding, on quantized weights, on random raw blocks and on blocks
 *    that drive the integer sums to their bounds;
 *  - an output is bit for bit the same whatever the tile shape and its place
 *    in the tile (the engine's batch-independence rests on it);
 *  - the packed panels, in their AVX2 and AVX-VNNI builds, give the tiles'
 *    bits, for every panel height and column count; so do the AVX-VNNI
 *    builds of the tiles;
 *  - the x8 layout restores the rows byte for byte, and its tiles give the
 *    AVX2 tiles' bits for every column count;
 *  - matmul over ragged row and token counts, with 1 and 3 threads, equals
 *    the reference, and a token's outputs do not depend on the batch; a
 *    weight repacked into the x8 layout gives the same bits, through the x8
 *    tiles (small batches) and through panels packed from it (larger ones);
 *  - matmul_multi gives every task matmul's bits;
 *  - the per-ISA kernel tables list the same types, each entry whole.
 * The tiles are compared with the reference on each kernel table this CPU
 * runs, and the builds with the AVX2 tiles, each test saying which ran
 * (kernel_paths.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/matmul.h"
#include "kernels/quants_kernels.h"
#include "kernels/wtype.h"
#include "kernels/wtype_tables.h"
#include "kernel_paths.h"
#include "quants_testdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The types with tiles (matmul's vec_dot path is tested with Q3_K, which
 * has none). */
static const wtype k_gemm_types[] = {WT_Q4_0, WT_Q4_1, WT_Q5_0, WT_Q5_1, WT_Q8_0, WT_Q4_K,
                                     WT_Q5_K, WT_Q6_K, WT_F32,  WT_F16,  WT_BF16};
#define N_GEMM_TYPES (sizeof k_gemm_types / sizeof k_gemm_types[0])

static const int k_lengths[] = {32, 96, 100, 256, 640, 768, 2048};
#define N_LENGTHS (sizeof k_lengths / sizeof k_lengths[0])

/* A weight matrix and a batch of activations, quantized, with the reference
 * dot of every pair and its tolerance. */
typedef struct {
    wtype type;
    int n, rows, toks;
    size_t wrow, xrow;
    uint8_t *wq, *xq;
    float *x;     /* the activations before quantization, [toks][n] */
    double *want; /* reference dots, [toks][rows] */
    double *tol;  /* 1e-5 of sum |w_i x_i| of the dequantized operands */
} gemm_case;

/* How the weights are made: quantized from weight-like rows, random raw
 * blocks, or blocks at the levels' extremes (met by activation rows of
 * constant +1 and -1, alternately, which quantize to +127 and -127: every
 * integer sum at its bound). */
enum { W_QUANTIZED, W_RAW, W_EXTREME };
static const char *const k_modes[] = {"quantized weights", "raw blocks", "extreme blocks"};

static gemm_case make_case(wtype t, int n, int rows, int toks, int mode, uint64_t seed) {
    const wtype_traits *ref = wtype_get_ref(t);
    const wtype_traits *act = wtype_get_ref(ref->vec_dot_type);
    gemm_case g = {.type = t, .n = n, .rows = rows, .toks = toks};
    g.wrow = wtype_row_size((uint32_t)t, n);
    g.xrow = wtype_row_size((uint32_t)ref->vec_dot_type, n);
    g.wq = malloc(g.wrow * rows);
    g.xq = malloc(g.xrow * toks);
    g.x = malloc(sizeof(float) * n * toks);
    g.want = malloc(sizeof(double) * rows * toks);
    g.tol = malloc(sizeof(double) * rows * toks);
    float *w = malloc(sizeof(float) * n), *wd = malloc(sizeof(float) * n * rows);
    float *xd = malloc(sizeof(float) * n);
    for (int r = 0; r < rows; r++) {
        uint8_t *dst = g.wq + r * g.wrow;
        if (mode != W_QUANTIZED) {
            fill_blocks(t, dst, n, seed + 100 + (uint64_t)r, mode == W_EXTREME);
        } else {
            fill_weights(w, n, seed + 100 + (uint64_t)r);
            ref->from_float(w, dst, n);
        }
        ref->to_float(dst, wd + (size_t)r * n, n);
    }
    for (int c = 0; c < toks; c++) {
        fill_acts(g.x + (size_t)c * n, n, seed + 200 + (uint64_t)c);
        for (int i = 0; mode == W_EXTREME && i < n; i++)
            g.x[(size_t)c * n + i] = c % 2 ? -1.0f : 1.0f;
        act->from_float(g.x + (size_t)c * n, g.xq + c * g.xrow, n);
        act->to_float(g.xq + c * g.xrow, xd, n);
        for (int r = 0; r < rows; r++) {
            float s;
            ref->vec_dot(n, &s, g.wq + r * g.wrow, g.xq + c * g.xrow);
            double abs_sum = 0;
            for (int i = 0; i < n; i++)
                abs_sum += fabs((double)wd[(size_t)r * n + i] * xd[i]);
            g.want[c * rows + r] = s;
            g.tol[c * rows + r] = 1e-5 * abs_sum + 1e-30;
        }
    }
    free(w), free(wd), free(xd);
    return g;
}

static void free_case(gemm_case *g) {
    free(g->wq), free(g->xq), free(g->x), free(g->want), free(g->tol);
}

static void check_close(const gemm_case *g, const float *got, const char *table, const char *what) {
    for (int c = 0; c < g->toks; c++)
        for (int r = 0; r < g->rows; r++) {
            const double want = g->want[c * g->rows + r], tol = g->tol[c * g->rows + r];
            const float v = got[c * g->rows + r];
            if (!(fabs(v - want) <= tol))
                fail_msg(
                    "%s %s n=%d %s: row %d, activation row %d: %.9g, reference %.9g (tol %.3g)",
                    table, wtype_name(g->type), g->n, what, r, c, v, want, tol);
        }
}

/* Covers the case's matrix with nr x nc tiles (smaller at the edges). */
static void run_tiles(const wtype_traits *tr, const gemm_case *g, int nr, int nc, float *out) {
    for (int r = 0; r < g->rows; r += nr)
        for (int c = 0; c < g->toks; c += nc) {
            const int tr_rows = g->rows - r < nr ? g->rows - r : nr;
            const int tr_cols = g->toks - c < nc ? g->toks - c : nc;
            tr->gemm(g->n, tr_rows, tr_cols, out + c * g->rows + r, (size_t)g->rows,
                     g->wq + r * g->wrow, g->wrow, g->xq + c * g->xrow, g->xrow);
        }
}

static void test_registry_has_tiles(void **state) {
    (void)state;
    for (size_t i = 0; i < N_GEMM_TYPES; i++)
        for (int fast = 0; fast < 2; fast++) {
            const wtype_traits *tr =
                fast ? wtype_get(k_gemm_types[i]) : wtype_get_ref(k_gemm_types[i]);
            assert_non_null(tr->gemm);
            assert_true(tr->gemm_rows >= 1 && tr->gemm_cols >= 1);
        }
    assert_null(wtype_get(WT_Q3_K)->gemm);
}

/* An entry's tile and panel fields go together. */
static void check_entry(const char *table, int t, const wtype_traits *e) {
    if (e->gemm && !(e->gemm_rows >= 1 && e->gemm_cols >= 1))
        fail_msg("%s %s: a tile without its shape", table, wtype_name((uint32_t)t));
    if (!e->gemm_panel != !e->gemm_pack || (e->gemm_panel && !e->gemm))
        fail_msg("%s %s: panels need both halves and the tiles", table, wtype_name((uint32_t)t));
    if (e->gemm_panel && !(e->panel_rows >= 1 && e->panel_cols >= 1 && e->panel_block_bytes))
        fail_msg("%s %s: a panel without its shape", table, wtype_name((uint32_t)t));
    if (!e->panel_prep != !e->panel_act_block_bytes)
        fail_msg("%s %s: panel_prep and panel_act_block_bytes go together", table,
                 wtype_name((uint32_t)t));
    const bool x8 = e->gemm_x8;
    if (x8 != !!e->x8_pack || x8 != !!e->x8_unpack || x8 != (e->x8_cols >= 1) || x8 != (e->x8_block_bytes > 0) ||
        (x8 && !e->gemm_pack) || !e->x8_prep != !e->x8_act_block_bytes)
        fail_msg("%s %s: an x8 entry needs its layout, tiles, shape and panels together", table,
                 wtype_name((uint32_t)t));
    if (e->x8_gemm_pack && !(x8 && e->gemm_pack))
        fail_msg("%s %s: x8_gemm_pack without the x8 layout or panels", table, wtype_name((uint32_t)t));
}

/* The AVX2 table has an entry for every type of the reference one and no
 * other; the VNNI table only for some of them, each a whole entry with the
 * same activation format, and the VNNI512 table for the same types as the
 * VNNI one. The active table is the one wtype_isa names. */
static void test_tables_list_the_same_types(void **state) {
    (void)state;
    int n_ref = 0, n_vnni = 0;
    for (int t = 0; t < WT_COUNT; t++) {
        const wtype_traits *r = &wtype_traits_ref[t], *a = &wtype_traits_avx2[t];
        const bool own_v = wtype_table_own(WTYPE_ISA_VNNI, (wtype)t);
        const bool own_v512 = wtype_table_own(WTYPE_ISA_VNNI512, (wtype)t);
        const wtype_traits *v = own_v ? &wtype_table(WTYPE_ISA_VNNI)[t] : &(const wtype_traits){0};
        const wtype_traits *v512 =
            own_v512 ? &wtype_table(WTYPE_ISA_VNNI512)[t] : &(const wtype_traits){0};
        if (own_v != own_v512)
            fail_msg("%s: in one of the VNNI and VNNI512 tables only", wtype_name((uint32_t)t));
        if (!r->to_float != !a->to_float)
            fail_msg("%s: in one of the reference and AVX2 tables only", wtype_name((uint32_t)t));
        if (v->to_float && !a->to_float)
            fail_msg("%s: in the VNNI table only", wtype_name((uint32_t)t));
        if (!r->to_float) {
            assert_null(wtype_get_ref((wtype)t));
            assert_null(wtype_get((wtype)t));
            continue;
        }
        n_ref++;
        assert_int_equal(r->vec_dot_type, a->vec_dot_type);
        assert_true(!r->vec_dot == !a->vec_dot && !r->from_float == !a->from_float);
        assert_true(!r->gemm || a->gemm); /* (GQ: AVX2 tiles, none in the reference) */
        check_entry("ref", t, r);
        check_entry("avx2", t, a);
        if (v->to_float) {
            n_vnni++;
            assert_int_equal(v->vec_dot_type, a->vec_dot_type);
            assert_true(v->vec_dot && v->from_float && v->gemm);
            check_entry("vnni", t, v);
            check_entry("vnni512", t, v512);
            assert_true(v512->vec_dot && v512->from_float && v512->gemm);
            assert_int_equal(v512->vec_dot_type, a->vec_dot_type);
        }
        /* the geometry comes from the format layer */
        const wtype_traits *tr = wtype_get((wtype)t);
        assert_string_equal(tr->name, wtype_name((uint32_t)t));
        assert_int_equal(tr->block_size, wtype_block_size((uint32_t)t));
        if (tr->block_size)
            assert_int_equal(tr->type_size, wtype_row_size((uint32_t)t, tr->block_size));
        const wtype_traits *want = a;
        if (!strcmp(wtype_isa(), "ref")) want = r;
        if (!strcmp(wtype_isa(), "vnni") && v->to_float) want = v;
        if (!strcmp(wtype_isa(), "vnni512") && v512->to_float) want = v512;
        assert_ptr_equal(tr->vec_dot, want->vec_dot);
        assert_ptr_equal(tr->gemm, want->gemm);
        assert_ptr_equal(tr->gemm_panel, want->gemm_panel);
    }
    print_message("  %d types, %d with VNNI entries; active table: %s\n", n_ref, n_vnni,
                  wtype_isa());
    assert_true(n_ref >= 30 && n_vnni >= 6);
}

/* Every tile shape against the reference dots, and all shapes bit for bit
 * against the largest: the reference tiles and those of each table this CPU
 * runs. */
static void test_every_tile_shape_matches_reference(void **state) {
    (void)state;
    kernel_paths_print("paths compared with ref", KP_SET_ALL);
    for (size_t i = 0; i < N_GEMM_TYPES; i++) {
        const wtype t = k_gemm_types[i];
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (n % wtype_block_size((uint32_t)t)) continue;
            /* float weights: no raw bit patterns (NaNs), no integer bounds */
            const int modes = wtype_block_size((uint32_t)t) == 1 ? W_QUANTIZED : W_EXTREME;
            for (int mode = W_QUANTIZED; mode <= modes; mode++) {
                for (int p = KP_REF; p < KP_COUNT; p++) {
                    wtype_traits entry;
                    if (!kernel_path_entry(p, t, &entry)) continue;
                    const wtype_traits *tr = &entry;
                    const char *table = kernel_path_name(p);
                    /* sizes that no tile shape divides */
                    const int rows = 2 * tr->gemm_rows + 3, toks = 2 * tr->gemm_cols + 3;
                    gemm_case g = make_case(t, n, rows, toks, mode, 1000 * (uint64_t)n + 10 * mode);
                    float *full = malloc(sizeof(float) * rows * toks);
                    float *out = malloc(sizeof(float) * rows * toks);
                    run_tiles(tr, &g, tr->gemm_rows, tr->gemm_cols, full);
                    check_close(&g, full, table, k_modes[mode]);
                    for (int nr = 1; nr <= tr->gemm_rows; nr++)
                        for (int nc = 1; nc <= tr->gemm_cols; nc++) {
                            for (int k = 0; k < rows * toks; k++)
                                out[k] = NAN;
                            run_tiles(tr, &g, nr, nc, out);
                            if (memcmp(out, full, sizeof(float) * rows * toks))
                                fail_msg("%s %s n=%d: %dx%d tiles differ from %dx%d tiles", table,
                                         tr->name, n, nr, nc, tr->gemm_rows, tr->gemm_cols);
                        }
                    free(full), free(out);
                    free_case(&g);
                }
            }
        }
    }
}

/* The kernel builds behind the registry, each where the CPU can run it. */
typedef struct {
    wtype type;
    const char *build;
    int isa; /* KP_AVX2, KP_VNNI or KP_VNNI512: the path it is on */
    wtype_gemm_pack_fn pack; /* NULL: a tile kernel, not a panel */
    wtype_gemm_fn gemm;
    size_t panel_block;
    wtype_gemm_fn tiles;      /* the AVX2 tiles it must equal, */
    int tile_rows, tile_cols; /* and their shape */
    wtype_gemm_prep_fn prep;  /* the panel's activation preparation, if any */
} kernel_build;

static const kernel_build k_builds[] = {
    {WT_Q4_0, "avx2 panel", KP_AVX2, gemm_pack_q4_0_avx2, gemm_panel_q4_0_q8_0_avx2, GEMM_PANEL_BLOCK,
     gemm_q4_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_avx2},
    {WT_Q5_0, "avx2 panel", KP_AVX2, gemm_pack_q5_0_avx2, gemm_panel_q5_0_q8_0_avx2, GEMM_PANEL_BLOCK,
     gemm_q5_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_avx2},
    {WT_Q8_0, "avx2 panel", KP_AVX2, gemm_pack_q8_0_avx2, gemm_panel_q8_0_q8_0_avx2,
     GEMM_PANEL_BLOCK_SIGNED_Q8, gemm_q8_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS,
     gemm_prep_q8_0_signed_avx2},
    {WT_Q4_0, "vnni panel", KP_VNNI, gemm_pack_q4_0_vnni, gemm_panel_q4_0_q8_0_vnni, GEMM_PANEL_BLOCK,
     gemm_q4_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_vnni},
    {WT_Q5_0, "vnni panel", KP_VNNI, gemm_pack_q5_0_vnni, gemm_panel_q5_0_q8_0_vnni, GEMM_PANEL_BLOCK,
     gemm_q5_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_vnni},
    {WT_Q8_0, "vnni panel", KP_VNNI, gemm_pack_q8_0_vnni, gemm_panel_q8_0_q8_0_vnni, GEMM_PANEL_BLOCK,
     gemm_q8_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_vnni},
    {WT_Q4_K, "vnni tile", KP_VNNI, NULL, gemm_q4_K_q8_K_vnni, 0, gemm_q4_K_q8_K_avx2, GEMM_K_ROWS,
     GEMM_K_COLS, NULL},
    {WT_Q5_K, "vnni tile", KP_VNNI, NULL, gemm_q5_K_q8_K_vnni, 0, gemm_q5_K_q8_K_avx2, GEMM_K_ROWS,
     GEMM_K_COLS, NULL},
    {WT_Q6_K, "vnni tile", KP_VNNI, NULL, gemm_q6_K_q8_K_vnni, 0, gemm_q6_K_q8_K_avx2, GEMM_K_ROWS,
     GEMM_K_COLS, NULL},
    {WT_Q4_K, "avx2 panel", KP_AVX2, gemm_pack_q4_K_avx2, gemm_panel_q4_K_q8_K_avx2,
     GEMM_KPANEL_BLOCK, gemm_q4_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q5_K, "avx2 panel", KP_AVX2, gemm_pack_q5_K_avx2, gemm_panel_q5_K_q8_K_avx2,
     GEMM_KPANEL_BLOCK, gemm_q5_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q6_K, "avx2 panel", KP_AVX2, gemm_pack_q6_K_avx2, gemm_panel_q6_K_q8_K_avx2,
     GEMM_KPANEL_BLOCK_Q6, gemm_q6_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q4_K, "vnni panel", KP_VNNI, gemm_pack_q4_K_vnni, gemm_panel_q4_K_q8_K_vnni, GEMM_KPANEL_BLOCK,
     gemm_q4_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q5_K, "vnni panel", KP_VNNI, gemm_pack_q5_K_vnni, gemm_panel_q5_K_q8_K_vnni, GEMM_KPANEL_BLOCK,
     gemm_q5_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q6_K, "vnni panel", KP_VNNI, gemm_pack_q6_K_vnni, gemm_panel_q6_K_q8_K_vnni,
     GEMM_KPANEL_BLOCK_Q6, gemm_q6_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q4_0, "vnni512 panel", KP_VNNI512, gemm_pack_q4_0_vnni512, gemm_panel_q4_0_q8_0_vnni512, GEMM_PANEL_BLOCK,
     gemm_q4_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_vnni512},
    {WT_Q5_0, "vnni512 panel", KP_VNNI512, gemm_pack_q5_0_vnni512, gemm_panel_q5_0_q8_0_vnni512, GEMM_PANEL_BLOCK,
     gemm_q5_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_vnni512},
    {WT_Q8_0, "vnni512 panel", KP_VNNI512, gemm_pack_q8_0_vnni512, gemm_panel_q8_0_q8_0_vnni512, GEMM_PANEL_BLOCK,
     gemm_q8_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS, gemm_prep_q8_0_vnni512},
    {WT_Q4_K, "vnni512 tile", KP_VNNI512, NULL, gemm_q4_K_q8_K_vnni512, 0, gemm_q4_K_q8_K_avx2, GEMM_K_ROWS,
     GEMM_K_COLS, NULL},
    {WT_Q5_K, "vnni512 tile", KP_VNNI512, NULL, gemm_q5_K_q8_K_vnni512, 0, gemm_q5_K_q8_K_avx2, GEMM_K_ROWS,
     GEMM_K_COLS, NULL},
    {WT_Q6_K, "vnni512 tile", KP_VNNI512, NULL, gemm_q6_K_q8_K_vnni512, 0, gemm_q6_K_q8_K_avx2, GEMM_K_ROWS,
     GEMM_K_COLS, NULL},
    {WT_Q4_K, "vnni512 panel", KP_VNNI512, gemm_pack_q4_K_vnni512, gemm_panel_q4_K_q8_K_vnni512, GEMM_KPANEL_BLOCK,
     gemm_q4_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q5_K, "vnni512 panel", KP_VNNI512, gemm_pack_q5_K_vnni512, gemm_panel_q5_K_q8_K_vnni512, GEMM_KPANEL_BLOCK,
     gemm_q5_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
    {WT_Q6_K, "vnni512 panel", KP_VNNI512, gemm_pack_q6_K_vnni512, gemm_panel_q6_K_q8_K_vnni512,
     GEMM_KPANEL_BLOCK_Q6, gemm_q6_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS, NULL},
};

/* Every build against the AVX2 tiles (whose bits test_every_tile_shape
 * ties to the reference and to every shape), for panels of
 * 1..GEMM_PANEL_ROWS real rows and every column count. */
static void test_kernel_builds_give_the_tiles_bits(void **state) {
    (void)state;
    kernel_paths_print("builds compared with the AVX2 tiles", KP_SET_ALL);
    for (size_t i = 0; i < sizeof k_builds / sizeof k_builds[0]; i++) {
        const kernel_build *k = &k_builds[i];
        if (!kernel_path_runs(k->isa)) continue;
        const wtype_traits tiles = {
            .gemm = k->tiles, .gemm_rows = k->tile_rows, .gemm_cols = k->tile_cols};
        const int rows = k->pack ? GEMM_PANEL_ROWS : k->tile_rows;
        const int cols = k->pack ? GEMM_PANEL_COLS : k->tile_cols;
        const int n = wtype_block_size((uint32_t)k->type) == 256 ? 768 : 640;
        for (int mode = W_QUANTIZED; mode <= W_EXTREME; mode++) {
            const int toks = 2 * cols + 1;
            gemm_case g = make_case(k->type, n, rows, toks, mode, 500 + 7 * i + (uint64_t)mode);
            float *want = malloc(sizeof(float) * rows * toks);
            float *got = malloc(sizeof(float) * rows * toks);
            run_tiles(&tiles, &g, k->tile_rows, k->tile_cols, want);
            const int block = wtype_block_size((uint32_t)k->type);
            uint8_t *panel = k->pack ? malloc(k->panel_block * (size_t)(n / block)) : NULL;
            /* the activations as the build reads them */
            const size_t arow = k->prep ? GEMM_PANEL_ACT_BLOCK * (size_t)(n / 32) : g.xrow;
            uint8_t *act = g.xq;
            if (k->prep) {
                act = malloc(arow * toks);
                for (int c = 0; c < toks; c++)
                    k->prep(n, g.xq + c * g.xrow, act + c * arow);
            }
            for (int nr = 1; nr <= rows; nr++) {
                if (panel) k->pack(n, nr, g.wq, g.wrow, panel);
                for (int nc = 1; nc <= cols; nc++) {
                    for (int k2 = 0; k2 < rows * toks; k2++)
                        got[k2] = NAN;
                    for (int c = 0; c < toks; c += nc) {
                        const int m = toks - c < nc ? toks - c : nc;
                        k->gemm(n, nr, m, got + c * rows, (size_t)rows, panel ? panel : g.wq,
                                g.wrow, act + c * arow, arow);
                    }
                    for (int c = 0; c < toks; c++)
                        for (int r = 0; r < rows; r++) {
                            const float v = got[c * rows + r], w = want[c * rows + r];
                            if (r >= nr) continue;
                            if (memcmp(&v, &w, sizeof v))
                                fail_msg(
                                    "%s %s n=%d (%s), %d rows x %d columns: row %d, activation "
                                    "row %d: %.9g, tiles %.9g",
                                    wtype_name(k->type), k->build, n, k_modes[mode], nr, nc, r, c,
                                    v, w);
                        }
                }
            }
            if (act != g.xq) free(act);
            free(panel), free(want), free(got);
            free_case(&g);
        }
    }
}

/* The x8 builds: layout functions and the AVX2 tiles whose bits they must give. */
typedef struct {
    wtype type;
    size_t block_bytes;
    wtype_x8_pack_fn pack;
    wtype_x8_unpack_fn unpack;
    wtype_gemm_fn gemm_x8;
    wtype_gemm_prep_fn prep; /* NULL: the activation rows as they are */
    wtype_gemm_fn tiles;
    int tile_rows, tile_cols;
} x8_build;

static const x8_build k_x8_builds[] = {
    {WT_Q4_0, X8_BLOCK_Q4_0, x8_pack_q4_0_ref, x8_unpack_q4_0_ref, gemm_x8_q4_0_q8_0_avx2, gemm_prep_x8_q8_0_avx2,
     gemm_q4_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q5_0, X8_BLOCK_Q5_0, x8_pack_q5_0_ref, x8_unpack_q5_0_ref, gemm_x8_q5_0_q8_0_avx2, gemm_prep_x8_q8_0_avx2,
     gemm_q5_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q8_0, X8_BLOCK_Q8_0, x8_pack_q8_0_ref, x8_unpack_q8_0_ref, gemm_x8_q8_0_q8_0_avx2, gemm_prep_x8_q8_0_avx2,
     gemm_q8_0_q8_0_avx2, GEMM_LEGACY_ROWS, GEMM_LEGACY_COLS},
    {WT_Q4_K, X8_BLOCK_Q4_K, x8_pack_q4_K_ref, x8_unpack_q4_K_ref, gemm_x8_q4_K_q8_K_avx2, NULL,
     gemm_q4_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS},
    {WT_Q5_K, X8_BLOCK_Q5_K, x8_pack_q5_K_ref, x8_unpack_q5_K_ref, gemm_x8_q5_K_q8_K_avx2, NULL,
     gemm_q5_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS},
    {WT_Q6_K, X8_BLOCK_Q6_K, x8_pack_q6_K_ref, x8_unpack_q6_K_ref, gemm_x8_q6_K_q8_K_avx2, NULL,
     gemm_q6_K_q8_K_avx2, GEMM_K_ROWS, GEMM_K_COLS},
};

static int x8_length(wtype t) {
    return wtype_block_size((uint32_t)t) == 256 ? 768 : 640;
}

static void test_x8_layout_round_trips(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_x8_builds / sizeof k_x8_builds[0]; i++) {
        const x8_build *k = &k_x8_builds[i];
        const int n = x8_length(k->type);
        const size_t row = wtype_row_size((uint32_t)k->type, n);
        const size_t x8_bytes = k->block_bytes * (size_t)(n / wtype_block_size((uint32_t)k->type));
        uint8_t *rows = malloc(8 * row), *x8 = malloc(x8_bytes), *back = malloc(8 * row);
        for (int r = 0; r < 8; r++) fill_blocks(k->type, rows + r * row, n, 900 + (uint64_t)r, false);
        memset(x8, 0xAA, x8_bytes);
        k->pack(n, rows, row, x8);
        /* the layout moves bytes and bits; it is not a copy of the rows */
        if (!memcmp(x8, rows, 8 * row)) fail_msg("%s: x8 layout equals the row layout", wtype_name(k->type));
        k->unpack(n, x8, back, row);
        if (memcmp(back, rows, 8 * row)) fail_msg("%s: x8 unpack does not restore the rows", wtype_name(k->type));
        free(rows), free(x8), free(back);
    }
}

/* The x8 tiles against the AVX2 tiles, bit for bit, for 1..x8_cols columns
 * (the table's) over 24 rows (3 groups) and 2 * X8_COLS_EVEX + 1 activation
 * rows: the AVX2 x8 tiles, and the VNNI tables' (each type has its own
 * there). */
static void test_x8_tiles_give_the_tiles_bits(void **state) {
    (void)state;
    kernel_paths_print("paths compared with the AVX2 tiles and ref", KP_SET_ALL);
    if (!kernel_path_runs(KP_AVX2)) return;
    const int isas[] = {KP_AVX2, KP_VNNI, KP_VNNI512};
    const char *const isa_names[] = {"avx2", "vnni", "vnni512"};
    int n_vnni_checked = 0;
    for (size_t i = 0; i < sizeof k_x8_builds / sizeof k_x8_builds[0]; i++) {
        const x8_build *k = &k_x8_builds[i];
        const wtype_traits tiles = {.gemm = k->tiles, .gemm_rows = k->tile_rows, .gemm_cols = k->tile_cols};
        const int n = x8_length(k->type), rows = 24, toks = 2 * X8_COLS_EVEX + 1;
        const size_t group = k->block_bytes * (size_t)(n / wtype_block_size((uint32_t)k->type));
        for (int mode = W_QUANTIZED; mode <= W_EXTREME; mode++) {
            gemm_case g = make_case(k->type, n, rows, toks, mode, 700 + 11 * i + (uint64_t)mode);
            float *want = malloc(sizeof(float) * rows * toks), *got = malloc(sizeof(float) * rows * toks);
            run_tiles(&tiles, &g, k->tile_rows, k->tile_cols, want);
            uint8_t *x8 = malloc(group * (rows / 8));
            for (int r = 0; r < rows; r += 8) k->pack(n, g.wq + r * g.wrow, g.wrow, x8 + (r / 8) * group);
            const size_t arow = k->prep ? X8_ACT_BLOCK * (size_t)(n / 32) : g.xrow;
            uint8_t *act = k->prep ? malloc(arow * toks) : g.xq;
            for (int c = 0; k->prep && c < toks; c++) k->prep(n, g.xq + c * g.xrow, act + c * arow);
            for (int ii = 0; ii < 3; ii++) {
                if (!kernel_path_runs(isas[ii])) continue;
                const wtype_gemm_fn fn = ii ? wtype_table((wtype_isa_id)isas[ii])[k->type].gemm_x8 : k->gemm_x8;
                if (ii && fn == k->gemm_x8) continue; /* the AVX2 tile itself */
                n_vnni_checked += ii > 0;
                const int cols = ii ? wtype_table((wtype_isa_id)isas[ii])[k->type].x8_cols : X8_COLS;
                for (int nc = 1; nc <= cols; nc++) {
                    for (int k2 = 0; k2 < rows * toks; k2++) got[k2] = NAN;
                    for (int r = 0; r < rows; r += 8)
                        for (int c = 0; c < toks; c += nc) {
                            const int m = toks - c < nc ? toks - c : nc;
                            fn(n, 8, m, got + c * rows + r, (size_t)rows, x8 + (r / 8) * group, 0,
                               act + c * arow, arow);
                        }
                    if (memcmp(got, want, sizeof(float) * rows * toks))
                        fail_msg("%s x8 (%s) n=%d (%s), %d columns: differs from the tiles", wtype_name(k->type),
                                 isa_names[ii], n, k_modes[mode], nc);
                }
            }
            check_close(&g, got, "x8", "tiles");
            if (act != g.xq) free(act);
            free(x8), free(want), free(got);
            free_case(&g);
        }
    }
    /* every type's VNNI x8 tile, in 3 weight modes, in each VNNI table that runs */
    const int n_builds = (int)(sizeof k_x8_builds / sizeof k_x8_builds[0]);
    const int want_vnni = 3 * n_builds * (kernel_path_runs(KP_VNNI) + kernel_path_runs(KP_VNNI512));
    if (n_vnni_checked != want_vnni)
        fail_msg("%d VNNI x8 tile checks ran, %d expected", n_vnni_checked, want_vnni);
}

/* x8_gemm_pack makes, from an x8 group, the very panel gemm_pack makes from
 * the 8 rows it came from (ordinary and extreme levels), in every table this
 * CPU runs. */
static void test_x8_panels_equal_the_rows_panels(void **state) {
    (void)state;
    const struct {
        const char *name;
        const wtype_traits *table;
        int isa;
    } tables[] = {{"avx2", wtype_table(WTYPE_ISA_AVX2), KP_AVX2},
                  {"vnni", wtype_table(WTYPE_ISA_VNNI), KP_VNNI},
                  {"vnni512", wtype_table(WTYPE_ISA_VNNI512), KP_VNNI512}};
    kernel_paths_print("tables checked", KP_SET_ALL);
    for (size_t ti = 0; ti < sizeof tables / sizeof tables[0]; ti++) {
        if (!kernel_path_runs(tables[ti].isa)) continue;
        int n_checked = 0;
        for (int t = 0; t < WT_COUNT; t++) {
            const wtype_traits *e = &tables[ti].table[t];
            if (!e->x8_gemm_pack) continue;
            const int n = x8_length((wtype)t), nb = n / wtype_block_size((uint32_t)t);
            const size_t row = wtype_row_size((uint32_t)t, n), panel = e->panel_block_bytes * (size_t)nb;
            uint8_t *rows = malloc(8 * row), *x8 = malloc(e->x8_block_bytes * (size_t)nb);
            uint8_t *want = malloc(panel), *got = malloc(panel);
            for (int extreme = 0; extreme <= 1; extreme++) {
                for (int r = 0; r < 8; r++) fill_blocks((wtype)t, rows + r * row, n, 4100 + 8 * (uint64_t)extreme + (uint64_t)r, extreme);
                e->x8_pack(n, rows, row, x8);
                memset(want, 0x11, panel);
                memset(got, 0x22, panel);
                e->gemm_pack(n, 8, rows, row, want);
                e->x8_gemm_pack(n, x8, got);
                if (memcmp(want, got, panel))
                    fail_msg("%s %s (%s levels): the panel from x8 differs from the rows' panel", tables[ti].name,
                             wtype_name((uint32_t)t), extreme ? "extreme" : "ordinary");
            }
            free(rows), free(x8), free(want), free(got);
            n_checked++;
        }
        if (n_checked < 6) fail_msg("%s: only %d types pack panels from x8", tables[ti].name, n_checked);
    }
}

/* matmul on ragged sizes (rows over several chunks and a partial tile,
 * tokens over several tiles) with 1 and 3 threads, against the reference
 * dots; then each token alone gives the same bits as in the batch. */
static void check_matmul(wtype t, int n, int rows, int toks) {
    gemm_case g = make_case(t, n, rows, toks, false, 77 + (uint64_t)rows);
    const weight w = {
        .name = "w", .data = g.wq, .type = t, .n_in = n, .n_out = rows, .row_bytes = g.wrow};
    void *scratch = malloc(matmul_scratch_size(&w, toks) + 64);
    float *y[2], *solo = malloc(sizeof(float) * rows);
    for (int th = 0; th < 2; th++) {
        threadpool *threads = threadpool_create(th ? 3 : 1);
        y[th] = malloc(sizeof(float) * rows * toks);
        matmul(threads, &w, g.x, toks, y[th], scratch);
        char what[64];
        snprintf(what, sizeof what, "matmul %dx%d, %d threads", rows, toks, th ? 3 : 1);
        check_close(&g, y[th], "fast", what);
        for (int c = 0; th && c < toks; c++) {
            matmul(threads, &w, g.x + (size_t)c * n, 1, solo, scratch);
            if (memcmp(solo, y[th] + (size_t)c * rows, sizeof(float) * rows))
                fail_msg("%s n=%d: token %d alone differs from the batch of %d", wtype_name(t), n,
                         c, toks);
        }
        threadpool_free(threads);
    }
    if (memcmp(y[0], y[1], sizeof(float) * rows * toks))
        fail_msg("%s n=%d: 1 and 3 threads differ", wtype_name(t), n);
    /* the same weight repacked into the x8 layout, where the active table has one */
    weight wx = w;
    void *buf = weight_repack_size(&wx) ? aligned_alloc(64, (weight_repack_size(&wx) + 63) / 64 * 64) : NULL;
    if (buf) {
        threadpool *threads = threadpool_create(3);
        weight_repack(&wx, buf, threads);
        float *yx = malloc(sizeof(float) * rows * toks);
        matmul(threads, &wx, g.x, toks, yx, scratch);
        if (memcmp(yx, y[0], sizeof(float) * rows * toks))
            fail_msg("%s n=%d, %d tokens: the x8 layout changes matmul's result", wtype_name(t), n, toks);
        for (int c = 0; c < toks; c++) {
            matmul(threads, &wx, g.x + (size_t)c * n, 1, solo, scratch);
            if (memcmp(solo, y[0] + (size_t)c * rows, sizeof(float) * rows))
                fail_msg("%s n=%d: x8, token %d alone differs from the batch of %d", wtype_name(t), n, c, toks);
        }
        free(yx);
        threadpool_free(threads);
    }
    free(buf);
    free(y[0]), free(y[1]), free(solo), free(scratch);
    free_case(&g);
}

static void test_matmul_ragged_sizes_match_reference(void **state) {
    (void)state;
    /* rows multiples of 8 take the x8 layout where the type has one: x8
     * tiles below x8_panel_min_tok activation rows (12 on AVX2, 9 with
     * VNNI), panels packed from the x8 groups from there on */
    static const int shapes[][2] = {{37, 1}, {37, 5}, {53, 19}, {16, 33}, {48, 1}, {48, 2}, {48, 3},
                                    {40, 4}, {40, 8}, {32, 9}, {64, 21}, {24, 50}};
    for (size_t i = 0; i <= N_GEMM_TYPES; i++) {
        const wtype t = i < N_GEMM_TYPES ? k_gemm_types[i] : WT_Q3_K;
        const int n = wtype_block_size((uint32_t)t) == 256 ? 512 : 96;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            check_matmul(t, n, shapes[s][0], shapes[s][1]);
    }
}

/* matmul_multi over tasks of ragged rows and token counts (one weight in
 * the x8 layout where the type has one, a batch past the streaming size)
 * gives each task matmul's bits, with 1 and 3 threads. */
static void test_matmul_multi_gives_matmuls_bits(void **state) {
    (void)state;
    static const int shapes[][2] = {{37, 1}, {48, 3}, {16, 20}, {40, 70}, {24, 2}};
    enum { N_TASKS = sizeof shapes / sizeof shapes[0] };
    for (size_t i = 0; i <= N_GEMM_TYPES; i++) {
        const wtype t = i < N_GEMM_TYPES ? k_gemm_types[i] : WT_Q3_K;
        const int n = wtype_block_size((uint32_t)t) == 256 ? 512 : 96;
        gemm_case g[N_TASKS];
        weight w[N_TASKS];
        matmul_task tasks[N_TASKS];
        float *want[N_TASKS];
        void *x8 = NULL;
        size_t scratch_bytes = 0;
        /* tasks 2 and 3 act-order (GPTQ's desc_act experts): their inputs gathered by perm */
        int32_t *perm = malloc(sizeof(int32_t) * n);
        for (int k = 0; k < n; k++) perm[k] = (int32_t)((7 * k + 3) % n);
        for (int k = 0; k < N_TASKS; k++) {
            g[k] = make_case(t, n, shapes[k][0], shapes[k][1], false, 900 + (uint64_t)k);
            w[k] = (weight){.name = "w", .data = g[k].wq, .type = t, .n_in = n, .n_out = shapes[k][0],
                            .row_bytes = g[k].wrow, .perm = k == 2 || k == 3 ? perm : NULL};
            if (k == 1 && weight_repack_size(&w[k])) {
                x8 = aligned_alloc(64, (weight_repack_size(&w[k]) + 63) / 64 * 64);
                weight_repack(&w[k], x8, NULL);
            }
            want[k] = malloc(sizeof(float) * shapes[k][0] * shapes[k][1]);
            tasks[k] = (matmul_task){&w[k], g[k].x, shapes[k][1], malloc(sizeof(float) * shapes[k][0] * shapes[k][1])};
            if (matmul_scratch_size(&w[k], shapes[k][1]) > scratch_bytes)
                scratch_bytes = matmul_scratch_size(&w[k], shapes[k][1]);
        }
        void *scratch = malloc(scratch_bytes + 64), *multi = malloc(matmul_multi_scratch_size(tasks, N_TASKS));
        for (int th = 1; th <= 3; th += 2) {
            threadpool *threads = threadpool_create(th);
            for (int k = 0; k < N_TASKS; k++) {
                matmul(threads, &w[k], g[k].x, shapes[k][1], want[k], scratch);
                memset(tasks[k].y, 0x7f, sizeof(float) * shapes[k][0] * shapes[k][1]);
            }
            matmul_multi(threads, tasks, N_TASKS, multi);
            for (int k = 0; k < N_TASKS; k++)
                if (memcmp(tasks[k].y, want[k], sizeof(float) * shapes[k][0] * shapes[k][1]))
                    fail_msg("%s, %d threads: task %d (%d rows x %d tokens%s%s) differs from matmul's",
                             wtype_name(t), th, k, shapes[k][0], shapes[k][1], w[k].x8 ? ", x8" : "",
                             w[k].perm ? ", act-order" : "");
            threadpool_free(threads);
        }
        for (int k = 0; k < N_TASKS; k++) {
            free(want[k]);
            free(tasks[k].y);
            free_case(&g[k]);
        }
        free(x8), free(scratch), free(multi), free(perm);
    }
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_has_tiles),
        cmocka_unit_test(test_tables_list_the_same_types),
        cmocka_unit_test(test_every_tile_shape_matches_reference),
        cmocka_unit_test(test_kernel_builds_give_the_tiles_bits),
        cmocka_unit_test(test_x8_layout_round_trips),
        cmocka_unit_test(test_x8_tiles_give_the_tiles_bits),
        cmocka_unit_test(test_x8_panels_equal_the_rows_panels),
        cmocka_unit_test(test_matmul_ragged_sizes_match_reference),
        cmocka_unit_test(test_matmul_multi_gives_matmuls_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
