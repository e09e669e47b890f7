/* Half-precision (IEEE f16) and bfloat16 conversions. The scalar versions are
 * the reference; kernels compiled with F16C use the hardware instructions. */
#ifndef CLLM_UTIL_FP16_H
#define CLLM_UTIL_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t f16_t;
typedef uint16_t bf16_t;

static inline float fp32_from_bits(uint32_t w) {
    float f;
    memcpy(&f, &w, sizeof f);
    return f;
}

static inline uint32_t fp32_to_bits(float f) {
    uint32_t w;
    memcpy(&w, &f, sizeof w);
    return w;
}

/* Exact f16 -> f32 (handles subnormals, inf and nan). */
static inline float f16_to_f32(f16_t h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = fp32_from_bits(0x7800000u);
    const float normalized = fp32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized = fp32_from_bits((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    const uint32_t result =
        sign | (two_w < denormalized_cutoff ? fp32_to_bits(denormalized) : fp32_to_bits(normalized));
    return fp32_from_bits(result);
}

/* f32 -> f16 with round-to-nearest-even, as the F16C instruction does. */
static inline f16_t f32_to_f16(float f) {
    const float scale_to_inf = fp32_from_bits(0x77800000u);
    const float scale_to_zero = fp32_from_bits(0x08800000u);
    float base = ((f < 0 ? -f : f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = fp32_to_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = fp32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = fp32_to_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (f16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float bf16_to_f32(bf16_t h) { return fp32_from_bits((uint32_t)h << 16); }

/* Round-to-nearest-even; nan stays nan. */
static inline bf16_t f32_to_bf16(float f) {
    uint32_t u = fp32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 64);
    return (bf16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

#endif
