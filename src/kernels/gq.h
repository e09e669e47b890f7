/* Kernels and helpers of the GQ group-quantized formats (spec: qgroup.h).
 *
 * Writers of GQ tensors (`cllm quantize`, GPTQ/AWQ checkpoint loaders) build
 * blocks from integer levels with gq_pack_block, or quantize float rows with
 * gq_quantize_row; everything else reaches these types through the wtype
 * registry, which gq_register fills (scalar kernels in gq_ref.c, AVX2 dot
 * products in gq_avx2.c). */
#ifndef CLLM_KERNELS_GQ_H
#define CLLM_KERNELS_GQ_H

#include "format/gq_layout.h"
#include "kernels/wtype.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Round-to-nearest quantization of one group: the scale and zero point that
 * cover the group's range (asymmetric: [min(x, 0), max(x, 0)] onto
 * 0..2^bits-1; symmetric: z = 2^(bits-1) and the element of largest magnitude
 * onto level 0, as ggml's Q4_0), as the f16-rounded scale and integer zero
 * actually stored. */
void gq_group_params(int bits, bool sym, const float *x, int64_t n, float *d, int *z);
/* The level of x on the grid (d, z): clamp(round(x / d) + z, 0, 2^bits - 1). */
static inline int gq_level(float x, float d, int z, int bits) {
    const int qmax = (1 << bits) - 1;
    const float v = d != 0.0f ? x / d : 0.0f;
    int q = (int)lrintf(v) + z;
    if (v > 4096.0f) q = qmax; /* lrintf of huge values is undefined */
    if (v < -4096.0f) q = 0;
    return q < 0 ? 0 : q > qmax ? qmax : q;
}
/* Quantizes a row of n elements to GQ type t (round to nearest, per group). */
void gq_quantize_row(uint32_t t, const float *x, void *dst, int64_t n, bool sym);

/* Registry hook (wtype.c): fills the GQ entries of both tables. */
void gq_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2);

/* The AVX2 dot products and gemm tiles (gq_gemm_rows x gq_gemm_cols), one
 * per type, indexed by t - WT_GQ_BASE (gq_avx2.c; only call when the CPU has
 * AVX2). */
extern const wtype_vec_dot_fn gq_vec_dot_avx2_tmp[WT_GQ_COUNT];
extern const wtype_gemm_fn gq_gemm_avx2_tmp[WT_GQ_COUNT];
extern const int gq_gemm_rows, gq_gemm_cols;

#endif
