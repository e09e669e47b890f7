/* K-quant gemm tiles (see gemm_k_impl.h), AVX2 build. */
#define GEMM_VNNI 0
#include "kernels/gemm_k_impl.h"
