/* Block-quantized GGUF formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K,
 * Q6_K, Q8_K): dequantizers, quantizers and dot products, scalar reference in
 * quants_ref.c and AVX2 in quants_avx2.c. quants_register fills the two
 * registry tables of wtype.c. */
#ifndef CLLM_KERNELS_QUANTS_H
#define CLLM_KERNELS_QUANTS_H

#include "kernels/wtype.h"

/* `ref` gets the scalar kernels; `fast` gets the AVX2 ones when use_avx2,
 * otherwise the scalar ones too. Geometry fields are already filled. */
void quants_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2);

#endif
