/* The weight type registry's kernel tables, one per instruction set: every
 * kernel of every type, by name, in a designated-initializer table indexed by
 * type id (ggml's type_traits_cpu is the model):
 *   wtype_traits_ref    kernels_ref.c   the scalar reference: the definition
 *                                       of each format, and what runs on a
 *                                       CPU without AVX2 (or with
 *                                       CLLM_NO_AVX2=1)
 *   wtype_traits_avx2   kernels_avx2.c  what runs on AVX2+FMA+F16C, the
 *                                       reference's kernels where there is no
 *                                       faster one
 *   wtype_overlay_vnni  kernels_vnni.c  not a table but an overlay on the
 *                                       AVX2 one: for the few types whose
 *                                       kernels differ on a CPU with VNNI,
 *                                       only the fields that differ, in the
 *                                       AVX-VNNI build and the AVX512-VNNI
 *                                       one side by side
 * A type the tables leave out (all zero) has no kernels. The tables hold
 * kernels only. wtype_init builds the table of each instruction set once: the
 * reference and AVX2 ones as they are, the AVX-VNNI (WTYPE_ISA_VNNI) and
 * AVX512-VNNI (WTYPE_ISA_VNNI512) ones as the AVX2 table with the overlay's
 * column laid over it; and it fills in each type's name, block_size and
 * type_size from format/wtype_geom.h. So read the registry through wtype_get
 * and wtype_get_ref (wtype.h), or wtype_table here, not through the arrays.
 * Only wtype.c, the table files and the kernel tests include this header. */
#ifndef CLLM_KERNELS_WTYPE_TABLES_H
#define CLLM_KERNELS_WTYPE_TABLES_H

#include "kernels/wtype.h"

extern const wtype_traits wtype_traits_ref[WT_COUNT];
extern const wtype_traits wtype_traits_avx2[WT_COUNT];

/* The instruction sets, in the order wtype_init prefers them from last to
 * first (a VNNI table is AVX2's with the overlay on top). */
typedef enum {
    WTYPE_ISA_REF,
    WTYPE_ISA_AVX2,
    WTYPE_ISA_VNNI,    /* AVX-VNNI: column 0 of the overlay */
    WTYPE_ISA_VNNI512, /* AVX512-VNNI with AVX512VL: column 1 */
    WTYPE_ISA_COUNT
} wtype_isa_id;

/* One type's entry of the VNNI overlay: each kernel as [0] the AVX-VNNI
 * build, [1] the AVX512-VNNI build. A NULL kernel (or a zero size or
 * threshold) keeps the AVX2 entry's; a type whose entry is all zero
 * keeps its whole AVX2 entry. */
typedef struct {
    wtype_gemm_fn gemm[2];
    wtype_gemm_pack_fn gemm_pack[2];
    wtype_x8_gemm_pack_fn x8_gemm_pack[2];
    wtype_gemm_fn gemm_panel[2];
    wtype_gemm_prep_fn panel_prep[2];
    wtype_gemm_fn gemm_x8[2];
    int x8_cols[2];           /* at most what the build's tiles take (X8_COLS, X8_COLS_EVEX) */
    size_t panel_block_bytes; /* the same in both builds */
    int x8_panel_min_tok;
} wtype_vnni_overlay;

extern const wtype_vnni_overlay wtype_overlay_vnni[WT_COUNT];

/* The table of instruction set `isa` as wtype_init built it, geometry filled
 * in, whether or not this CPU runs it (an entry whose to_float is NULL: the
 * type has no kernels). */
const wtype_traits *wtype_table(wtype_isa_id isa);
/* Whether isa's entry for t is its own: true for every type with kernels in
 * the reference and AVX2 tables, and in a VNNI table for the types the
 * overlay names (the others are the AVX2 entry as it is). */
bool wtype_table_own(wtype_isa_id isa, wtype t);

#endif
