/* Registers the float formats' gemm tiles (float_kernels.h). */
#ifndef CLLM_KERNELS_GEMM_H
#define CLLM_KERNELS_GEMM_H

#include "kernels/float_kernels.h"
#include "kernels/wtype.h"

/* Sets the tiles of F32, F16 and BF16 in both tables (AVX2 ones in `fast`
 * when use_avx2); their other fields are already filled. */
void gemm_float_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2);

#endif
