/* Block-quantized GGUF formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (32-element
 * blocks), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (256-element super-blocks) and the
 * activation formats Q8_0, Q8_1, Q8_K. Layouts are in quants_blocks.h; the
 * scalar reference kernels in quants_legacy_ref.c and quants_k_ref.c (with the
 * quantizers' scale searches in quants_k_search.c); the AVX2 kernels in
 * quants_legacy_avx2.c and quants_k_avx2.c. quants_register fills the two
 * registry tables of wtype.c. */
#ifndef CLLM_KERNELS_QUANTS_H
#define CLLM_KERNELS_QUANTS_H

#include "kernels/wtype.h"

/* `ref` gets the scalar kernels; `fast` gets the AVX2 ones when use_avx2,
 * otherwise the scalar ones too. Geometry fields are already filled. */
void quants_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2);

#endif
