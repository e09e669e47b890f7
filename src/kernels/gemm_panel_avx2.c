/* Packed-panel gemm (see gemm_panel_impl.h), AVX2 build. */
#define GEMM_VNNI 0
#include "kernels/gemm_panel_impl.h"
