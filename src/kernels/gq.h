/* Kernels and helpers of the GQ group-quantized formats (spec: qgroup.h).
 *
 * Writers of GQ tensors (`cllm quantize`, GPTQ/AWQ checkpoint loaders) build
 * blocks from integer levels with gq_pack_block, or quantize float rows with
 * gq_quantize_row; everything else reaches these types through the wtype
 * registry (the kernels, listed in gq_kernels.h: scalar in gq_ref.c, AVX2 dot
 * products and tiles in gq_avx2.c). */
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

#endif

