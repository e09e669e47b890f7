/* Scalar reference kernels for the float weight formats. Sums accumulate in
 * double so the reference is more accurate than any fast path it checks. */
#include "kernels/float_kernels.h"

#include "util/fp16.h"

#include <string.h>

void f32_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
void f32_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
void f16_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    const f16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = f16_to_f32(h[i]);
}
void f16_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    f16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_f16(x[i]);
}
void bf16_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    const bf16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(h[i]);
}
void bf16_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    bf16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_bf16(x[i]);
}

void vec_dot_f32_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y) {
    const float *a = x, *b = y;
    double acc = 0;
    for (int i = 0; i < n; i++) acc += (double)a[i] * b[i];
    *s = (float)acc;
}
void vec_dot_f16_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y) {
    const f16_t *a = x;
    const float *b = y;
    double acc = 0;
    for (int i = 0; i < n; i++) acc += (double)f16_to_f32(a[i]) * b[i];
    *s = (float)acc;
}
void vec_dot_bf16_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y) {
    const bf16_t *a = x;
    const float *b = y;
    double acc = 0;
    for (int i = 0; i < n; i++) acc += (double)bf16_to_f32(a[i]) * b[i];
    *s = (float)acc;
}
