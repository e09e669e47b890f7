/* Packed-panel gemm (see gemm_panel_impl.h), built for CPUs with AVX-VNNI
 * (256-bit vpdpbusd); quants_register selects it where cpuid reports it. */
#pragma GCC target("avxvnni")
#define GEMM_VNNI 1
#include "kernels/gemm_panel_impl.h"
