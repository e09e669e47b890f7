/* Test data for the quantized formats, shared by test_quants.c and
 * test_gemm.c: a seeded generator, weight-like and activation-like rows, and
 * random raw blocks. Include after cmocka.h (fill_raw_blocks fails through
 * it). */
#ifndef CLLM_TESTS_QUANTS_TESTDATA_H
#define CLLM_TESTS_QUANTS_TESTDATA_H

#include "kernels/quants_blocks.h"
#include "kernels/wtype.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double rng_uniform(uint64_t *s) {
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static inline float rng_gauss(uint64_t *s) {
    double u = rng_uniform(s), v = rng_uniform(s);
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

/* Weight-like rows: gaussian, with each group of 16 scaled by a random factor
 * in [0.1, 3] (so K-quant sub-block scales differ), a few outliers, and a
 * random offset on some groups (so the min of the asymmetric types matters).
 * `plain` gives a plain gaussian instead. */
static inline void fill_weights_as(float *x, int n, uint64_t seed, bool plain) {
    uint64_t s = seed;
    for (int g = 0; g < n; g += 16) {
        float scale = plain ? 1.f : (float)(0.1 + 2.9 * rng_uniform(&s));
        float offset =
            !plain && rng_uniform(&s) < 0.25 ? (float)(rng_uniform(&s) - 0.5) * scale : 0.f;
        for (int i = g; i < g + 16 && i < n; i++) {
            x[i] = 0.02f * (scale * rng_gauss(&s) + offset);
            if (!plain && rng_uniform(&s) < 0.005) x[i] *= 8;
        }
    }
}

static inline void fill_weights(float *x, int n, uint64_t seed) {
    fill_weights_as(x, n, seed, false);
}

/* Activation-like rows: gaussian with a few large channels. */
static inline void fill_acts(float *x, int n, uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        x[i] = rng_gauss(&s);
        if (i % 97 == 13) x[i] *= 20;
    }
}

static inline size_t row_bytes(wtype t, int n) {
    return wtype_row_size((uint32_t)t, n);
}

/* Random bytes with finite f16 scales in [-2^-3, 2^-3] wherever the format
 * has them: a block our quantizers would never write, but a file might.
 * With `extreme`, every level byte holds the pattern with the largest level
 * magnitude instead (0x00 for the offset types Q4_0/Q5_0, whose level 0
 * stands for -8/-16; 0x80 = -128 for Q8_0; 0xFF otherwise): a row that meets
 * constant activations drives every integer sum to its bound. */
static inline void fill_blocks(wtype t, void *dst, int n, uint64_t seed, bool extreme) {
    uint64_t s = seed;
    uint8_t *p = dst;
    size_t bytes = row_bytes(t, n);
    const uint8_t fill = t == WT_Q4_0 || t == WT_Q5_0 ? 0x00 : t == WT_Q8_0 ? 0x80 : 0xFF;
    for (size_t i = 0; i < bytes; i++)
        p[i] = extreme ? fill : (uint8_t)rng_next(&s);
    size_t offs[2];
    int n_offs = 0;
    switch (t) {
    case WT_Q4_0:
        offs[n_offs++] = offsetof(block_q4_0, d);
        break;
    case WT_Q5_0:
        offs[n_offs++] = offsetof(block_q5_0, d);
        break;
    case WT_Q8_0:
        offs[n_offs++] = offsetof(block_q8_0, d);
        break;
    case WT_Q4_1:
        offs[n_offs++] = offsetof(block_q4_1, d);
        offs[n_offs++] = offsetof(block_q4_1, m);
        break;
    case WT_Q5_1:
        offs[n_offs++] = offsetof(block_q5_1, d);
        offs[n_offs++] = offsetof(block_q5_1, m);
        break;
    case WT_Q2_K:
        offs[n_offs++] = offsetof(block_q2_K, d);
        offs[n_offs++] = offsetof(block_q2_K, dmin);
        break;
    case WT_Q3_K:
        offs[n_offs++] = offsetof(block_q3_K, d);
        break;
    case WT_Q4_K:
        offs[n_offs++] = offsetof(block_q4_K, d);
        offs[n_offs++] = offsetof(block_q4_K, dmin);
        break;
    case WT_Q5_K:
        offs[n_offs++] = offsetof(block_q5_K, d);
        offs[n_offs++] = offsetof(block_q5_K, dmin);
        break;
    case WT_Q6_K:
        offs[n_offs++] = offsetof(block_q6_K, d);
        break;
    case WT_MXFP4: /* shared exponents near 2^-3, as scales of the f16 ones' size */
        for (size_t b = 0; b < bytes; b += sizeof(block_mxfp4))
            p[b] = (uint8_t)(118 + rng_next(&s) % 8);
        return;
    default:
        fail_msg("no raw layout for %s", wtype_name(t));
    }
    const size_t bsz = wtype_get_ref(t)->type_size;
    for (size_t b = 0; b < bytes; b += bsz)
        for (int k = 0; k < n_offs; k++) {
            f16_t h = f32_to_f16((float)(rng_uniform(&s) - 0.5) * 0.25f);
            memcpy(p + b + offs[k], &h, sizeof h);
        }
}

static inline void fill_raw_blocks(wtype t, void *dst, int n, uint64_t seed) {
    fill_blocks(t, dst, n, seed, false);
}

#endif
