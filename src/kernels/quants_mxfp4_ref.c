/* MXFP4 (block_mxfp4, quants_blocks.h): the reference dequantizer,
 * quantizer and dot product with Q8_0 activations. The 4-bit values are kept
 * doubled as integers (0, 1, 2, 3, 4, 6, 8, 12 and their negatives), so the
 * dot product sums integers and the scale is 2^(e - 128), as ggml computes
 * it. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_blocks.h"
#include "util/fp16.h"

#include <math.h>
#include <stdint.h>

const int8_t k_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128): half the block's E8M0 scale, for the doubled values. */
float mxfp4_half_scale(uint8_t e) {
    /* e < 2 is below the normal floats: 2^-128 and 2^-127 as denormals. */
    return fp32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

void mxfp4_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const float d = mxfp4_half_scale(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[i * QK_MXFP4 + j] = d * (float)k_mxfp4_values[x[i].qs[j] & 0x0F];
            y[i * QK_MXFP4 + j + 16] = d * (float)k_mxfp4_values[x[i].qs[j] >> 4];
        }
    }
}

/* The level nearest to x / d (the first of equals). */
static int nearest(float x, float d) {
    int best = 0;
    float best_err = fabsf(x);
    for (int q = 1; q < 16; q++) {
        const float err = fabsf(d * (float)k_mxfp4_values[q] - x);
        if (err < best_err) best = q, best_err = err;
    }
    return best;
}

/* The shared exponent puts the block's largest magnitude among the top
 * levels (6 = 1.5 * 2^2: e = floor(log2(amax)) - 2 + 127), then each value
 * takes its nearest level: what ggml's quantize_row_mxfp4_ref writes. */
void mxfp4_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_mxfp4 *y = vy;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const float *xb = x + i * QK_MXFP4;
        float amax = 0;
        for (int j = 0; j < QK_MXFP4; j++) amax = fmaxf(amax, fabsf(xb[j]));
        int e = amax > 0 ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
        e = e < 0 ? 0 : e > 254 ? 254 : e;
        const float d = mxfp4_half_scale((uint8_t)e);
        y[i].e = (uint8_t)e;
        for (int j = 0; j < QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(nearest(xb[j], d) | nearest(xb[j + 16], d) << 4);
    }
}

void vec_dot_mxfp4_q8_0_ref(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_mxfp4 *x = vx;
    const block_q8_0 *y = vy;
    double acc = 0;
    for (int i = 0; i < n / QK_MXFP4; i++) {
        int isum = 0;
        for (int j = 0; j < QK_MXFP4 / 2; j++)
            isum += k_mxfp4_values[x[i].qs[j] & 0x0F] * y[i].qs[j] + k_mxfp4_values[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        acc += (double)mxfp4_half_scale(x[i].e) * f16_to_f32(y[i].d) * isum;
    }
    *s = (float)acc;
}
