/* Row-wise operations (see ops.h): the scalar reference of those with an AVX2
 * version in ops_avx2.c (the plain names pick one through the ops tables,
 * ops.c), and the ones that have only this version (rope, vec_add,
 * vec_scale). Sums of squares accumulate in double: they are short and the
 * extra precision keeps the reference checks tight. */
#include "kernels/ops.h"

#include <math.h>
#include <stddef.h>

void rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / n + eps));
    if (w)
        for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
    else
        for (int i = 0; i < n; i++) out[i] = x[i] * r;
}

void rope_angles(float *cs, int pos, int rope_dim, float base, float pos_scale, const float *freq_factors) {
    const int half = rope_dim / 2;
    for (int i = 0; i < half; i++) {
        double theta = (double)pos * pos_scale * pow((double)base, -2.0 * i / rope_dim);
        if (freq_factors) theta /= freq_factors[i];
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
}

void rope_apply(float *x, int n_heads, int head_dim, int rope_dim, const float *cs, rope_pairs pairs) {
    const int half = rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const int a = pairs == ROPE_PAIRS_ADJACENT ? 2 * i : i;
            const int b = pairs == ROPE_PAIRS_ADJACENT ? 2 * i + 1 : i + half;
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void silu_mul_ref(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void gelu_tanh_mul_ref(float *g, const float *u, int n) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void swiglu_oai_mul_ref(float *g, const float *u, int n, float alpha, float limit) {
    for (int i = 0; i < n; i++) {
        const float x = fminf(g[i], limit), y = fmaxf(fminf(u[i], limit), -limit);
        g[i] = x / (1.0f + expf(-alpha * x)) * (y + 1.0f);
    }
}

double exp_weights_ref(float *p, const float *x, int n, float max, float t) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const float a = (x[i] - max) / t;
        const float w = x[i] > -INFINITY && a >= EXP_WEIGHT_MIN_ARG ? expf(a) : 0.0f; /* NaN fails both */
        if (p) p[i] = w;
        sum += w;
    }
    return sum;
}

int row_argmax_ref(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
    return best;
}

void layernorm_ref(float *out, const float *x, const float *w, const float *b, int n, float eps) {
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    const double mean = sum / n;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    const float m = (float)mean, r = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = (x[i] - m) * r * w[i] + b[i];
}

void gelu_erf_ref(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void vec_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void vec_scale(float *y, float s, int n) {
    for (int i = 0; i < n; i++) y[i] *= s;
}
