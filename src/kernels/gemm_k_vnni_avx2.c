/* K-quant gemm tiles (see gemm_k_impl.h), built for CPUs with AVX-VNNI;
 * quants_register selects them where cpuid reports it. */
#pragma GCC target("avxvnni")
#define GEMM_VNNI 1
#include "kernels/gemm_k_impl.h"
