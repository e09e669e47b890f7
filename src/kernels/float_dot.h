/* Dot products and conversions for the float weight formats (F32, F16, BF16).
 * Activations stay f32; F16/BF16 weights are widened on the fly. */
#ifndef CLLM_KERNELS_FLOAT_DOT_H
#define CLLM_KERNELS_FLOAT_DOT_H

#include <stdint.h>

void f32_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void f32_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void f16_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void f16_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void bf16_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void bf16_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_f16_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_bf16_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);

void f16_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
void f16_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_f16_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_bf16_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y);

#endif
