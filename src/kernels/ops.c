/* The plain names of the row operations (ops.h) and attn_tile_best
 * (attention.h): each calls the active ops table's entry (ops_tables.h),
 * chosen once by wtype_init. */
#include "kernels/ops_tables.h"

#include <math.h>

void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    kernel_ops_active()->rmsnorm(out, x, w, n, eps);
}

void layernorm(float *out, const float *x, const float *w, const float *b, int n, float eps) {
    kernel_ops_active()->layernorm(out, x, w, b, n, eps);
}

void gelu_erf(float *x, int n) { kernel_ops_active()->gelu_erf(x, n); }

void silu_mul(float *g, const float *u, int n) { kernel_ops_active()->silu_mul(g, u, n); }

void gelu_tanh_mul(float *g, const float *u, int n) { kernel_ops_active()->gelu_tanh_mul(g, u, n); }

void swiglu_oai_mul(float *g, const float *u, int n, float alpha, float limit) {
    kernel_ops_active()->swiglu_oai_mul(g, u, n, alpha, limit);
}

double exp_weights(float *p, const float *x, int n, float max, float t) {
    return kernel_ops_active()->exp_weights(p, x, n, max, t);
}

int row_argmax(const float *x, int n) { return kernel_ops_active()->row_argmax(x, n); }

float softmax_prob(const float *x, int n, int at) {
    if (isnan(x[at])) return 0;
    const float max = x[row_argmax(x, n)];
    if (max == -INFINITY) return 0;
    if (max == INFINITY) return x[at] == INFINITY ? 1 : 0;
    return (float)(expf(x[at] - max) / exp_weights(NULL, x, n, max, 1));
}

attn_tile_fn attn_tile_best(void) { return kernel_ops_active()->attn_tile; }
