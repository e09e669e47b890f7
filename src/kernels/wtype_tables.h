/* The weight type registry's kernel tables, one per instruction set: every
 * kernel of every type, by name, in a designated-initializer table indexed by
 * type id (ggml's type_traits_cpu is the model):
 *   wtype_traits_ref   kernels_ref.c   the scalar reference: the definition
 *                                      of each format, and what runs on a CPU
 *                                      without AVX2 (or with CLLM_NO_AVX2=1)
 *   wtype_traits_avx2  kernels_avx2.c  what runs on AVX2+FMA+F16C, the
 *                                      reference's kernels where there is no
 *                                      faster one
 *   wtype_traits_vnni  kernels_vnni.c  entries only for the types whose
 *                                      kernels differ on CPUs with AVX-VNNI
 *                                      (unless CLLM_NO_VNNI=1); the other
 *                                      types take the AVX2 entry
 *   wtype_traits_vnni512 kernels_vnni512.c  the same entries EVEX-encoded, for
 *                                      CPUs with AVX512-VNNI but not AVX-VNNI
 *                                      (unless CLLM_NO_VNNI=1 or
 *                                      CLLM_NO_AVX512=1)
 * A type the tables leave out (all zero) has no kernels. The tables hold
 * kernels only: wtype_init copies the chosen one and fills in each type's
 * name, block_size and type_size from format/wtype_geom.h, so read the
 * registry through wtype_get and wtype_get_ref (wtype.h), not here. Only
 * wtype.c and the kernel tests include this header. */
#ifndef CLLM_KERNELS_WTYPE_TABLES_H
#define CLLM_KERNELS_WTYPE_TABLES_H

#include "kernels/wtype.h"

extern const wtype_traits wtype_traits_ref[WT_COUNT];
extern const wtype_traits wtype_traits_avx2[WT_COUNT];
extern const wtype_traits wtype_traits_vnni[WT_COUNT];
extern const wtype_traits wtype_traits_vnni512[WT_COUNT];

#endif
