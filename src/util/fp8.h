/* 8-bit floats of the OCP 8-bit floating point specification (OFP8), as
 * vLLM's fp8 KV cache stores them:
 *   E4M3: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinity, the
 *         only NaN is S.1111.111, largest finite 448 (S.1111.110).
 *   E5M2: 1 sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like, the top
 *         byte of an f16: S.11111.00 is infinity, S.11111.xx (xx != 0) NaN,
 *         largest finite 57344.
 * Both have subnormals (exponent field 0). Encoding rounds to nearest, ties to
 * even, and saturates: a magnitude above the largest finite, infinity
 * included, becomes the largest finite of its sign (vLLM's scaled conversion
 * clamps the same way); NaN stays NaN. */
#ifndef CLLM_UTIL_FP8_H
#define CLLM_UTIL_FP8_H

#include <stdint.h>

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

float fp8_e4m3_to_f32(uint8_t code);
float fp8_e5m2_to_f32(uint8_t code);
uint8_t f32_to_fp8_e4m3(float x);
uint8_t f32_to_fp8_e5m2(float x);

#endif
