/* Weight type registry (the kernels; each type's id, name and block geometry
 * are in format/wtype_geom.h). Each storage format (GGUF's, and our own GQ
 * group formats) is described by its block geometry, a dequantizer, a
 * quantizer where one exists, and a dot product against the activation format
 * it pairs with (`vec_dot_type`; e.g. Q4_0 weights meet Q8_0 activations, the
 * K-quants meet Q8_K), and for batched matmul tiles and packed panels.
 *
 * The kernels are listed in one table per instruction set (wtype_tables.h:
 * kernels_ref.c, kernels_avx2.c, and the VNNI overlay on the AVX2 table,
 * kernels_vnni.c; README.md has the matrix).
 * wtype_init picks the active one by cpuid; the reference stays reachable
 * through wtype_get_ref, and tests compare the two. Type ids are ggml's, so
 * GGUF tensor types index the tables directly. */
#ifndef CLLM_KERNELS_WTYPE_H
#define CLLM_KERNELS_WTYPE_H

#include "format/wtype_geom.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Converts n elements (n a multiple of block_size). */
typedef void (*wtype_to_float_fn)(const void *restrict x, float *restrict y, int64_t n);
typedef void (*wtype_from_float_fn)(const float *restrict x, void *restrict y, int64_t n);
/* *s = dot(x, y) over n elements; x in this type, y in vec_dot_type. */
typedef void (*wtype_vec_dot_fn)(int n, float *restrict s, const void *restrict x,
                                 const void *restrict y);
/* A tile of dot products: s[c * ldc + r] = dot(x + r * bx, y + c * by) over n
 * elements, for r < nr and c < nc, with 1 <= nr <= gemm_rows and
 * 1 <= nc <= gemm_cols. Each output is computed by the same arithmetic
 * whatever the tile's shape and the output's place in it, so a token's result
 * does not depend on the batch it is in (the engine's determinism rests on
 * it); it may differ from vec_dot's in the last bits. */
typedef void (*wtype_gemm_fn)(int n, int nr, int nc, float *restrict s, size_t ldc,
                              const void *restrict x, size_t bx, const void *restrict y, size_t by);
/* Lays out nr <= panel_rows weight rows (bx bytes apart) as a panel for
 * gemm_panel: panel_block_bytes per block of block_size elements. */
typedef void (*wtype_gemm_pack_fn)(int n, int nr, const void *restrict x, size_t bx,
                                   void *restrict panel);
/* Rewrites an activation row of n elements (in vec_dot_type) into the form
 * gemm_panel reads: panel_act_block_bytes per block. */
typedef void (*wtype_gemm_prep_fn)(int n, const void *restrict act, void *restrict out);
/* The x8 layout: 8 weight rows (bx bytes apart) of n elements to and from
 * n / block_size blocks of 8 interleaved rows (x8_block_bytes each). */
typedef void (*wtype_x8_pack_fn)(int n, const void *restrict rows, size_t bx, void *restrict out);
typedef void (*wtype_x8_unpack_fn)(int n, const void *restrict x8, void *restrict rows, size_t bx);
/* gemm_pack's panel straight from 8 rows in the x8 layout. */
typedef void (*wtype_x8_gemm_pack_fn)(int n, const void *restrict x8, void *restrict panel);

typedef struct {
    const char *name;
    int block_size;   /* elements per block */
    size_t type_size; /* bytes per block */
    wtype vec_dot_type;
    wtype_to_float_fn to_float;
    wtype_from_float_fn from_float; /* NULL when we cannot produce this type */
    wtype_vec_dot_fn vec_dot;       /* NULL for activation-only types */
    /* Register-blocked tiles for batched matmul; NULL where the type has
     * none (matmul then calls vec_dot per output). */
    wtype_gemm_fn gemm;
    int gemm_rows, gemm_cols; /* the largest tile gemm takes */
    /* Optional, for larger batches: gemm_pack lays weight rows out as a
     * panel once, and gemm_panel (a wtype_gemm_fn whose x is the panel; bx
     * unused) multiplies it with up to panel_cols activation rows at a time,
     * giving gemm's bits. NULL where the type has no panels. */
    wtype_gemm_pack_fn gemm_pack;
    wtype_gemm_fn gemm_panel;
    int panel_rows, panel_cols;
    size_t panel_block_bytes;
    /* gemm_panel's activation rows: vec_dot_type rows, or where panel_prep
     * is set, those rows rewritten by it (once per matmul, not once per
     * panel). */
    wtype_gemm_prep_fn panel_prep;
    size_t panel_act_block_bytes;
    /* Optional, for one-token and small-batch matmuls: the x8 layout
     * (x8_layout.c), 8 rows interleaved so that a matmul streams them in
     * order and meets 8 rows per vector. weight_repack lays a weight out this
     * way once, where the active table has gemm_x8; gemm_x8 (a wtype_gemm_fn
     * whose x is 8 rows of x8 data; nr is 8, bx unused) multiplies them with
     * up to x8_cols activation rows prepared by x8_prep (x8_act_block_bytes
     * per block; without x8_prep, vec_dot_type rows as they are), giving
     * gemm's bits. x8_block_bytes: bytes per block of 8 rows. */
    size_t x8_block_bytes;
    wtype_x8_pack_fn x8_pack;
    wtype_x8_unpack_fn x8_unpack;
    wtype_gemm_fn gemm_x8;
    int x8_cols;
    wtype_gemm_prep_fn x8_prep;
    size_t x8_act_block_bytes;
    /* An x8 weight takes panels packed from its x8 groups (x8_gemm_pack, or
     * x8_unpack then gemm_pack) from this many activation rows on, gemm_x8
     * below: where the panels are cheaper the crossing comes sooner. */
    int x8_panel_min_tok;
    /* Optional: the panel of an x8 group without unpacking it to rows first
     * (the same bytes as gemm_pack of the rows it came from). */
    wtype_x8_gemm_pack_fn x8_gemm_pack;
} wtype_traits;

/* Chooses the active table: the AVX2 one when the CPU supports
 * AVX2+FMA+F16C, unless the environment sets CLLM_NO_AVX2=1; on top of it the
 * AVX-VNNI entries where the CPU has AVX-VNNI too, or else the AVX512-VNNI
 * ones where it has AVX512-VNNI and AVX512VL, unless CLLM_NO_VNNI=1 (or, for
 * the latter, CLLM_NO_AVX512=1; they all give the same bits); else the
 * reference. Idempotent and thread-safe. */
void wtype_init(void);
/* Whether the AVX2 kernels run: the AVX2 table or a VNNI one (which is the
 * AVX2 table with a few entries changed) is active, and so are the AVX2 row
 * ops and attention (ops_tables.h). */
bool wtype_using_avx2(void);
/* The active table's instruction set: "ref", "avx2", "vnni" (AVX-VNNI) or
 * "vnni512" (AVX512-VNNI: 256-bit EVEX forms, 512-bit K-quant panels; taken
 * over "vnni" where the CPU has both, unless CLLM_NO_AVX512 is set). */
const char *wtype_isa(void);

/* NULL when the type is unknown or has no kernels. */
const wtype_traits *wtype_get(wtype t);
const wtype_traits *wtype_get_ref(wtype t);

#endif
