/* Row-wise operations of the forward pass: RMSNorm, rotary embeddings,
 * gated activations, residual adds. Each works on one row; the forward pass
 * spreads rows over threads. The hot elementwise ones have a scalar reference
 * (_ref, in ops_ref.c) and an AVX2 version (_avx2, in ops_avx2.c); the plain names
 * (ops.c) call the one the active ops table lists (ops_tables.h): the AVX2
 * one when the CPU has it. */
#ifndef CLLM_KERNELS_OPS_H
#define CLLM_KERNELS_OPS_H

#include <stdint.h>

typedef enum { ROPE_PAIRS_ADJACENT = 0, ROPE_PAIRS_HALVES = 1 } rope_pairs;

/* out = x / sqrt(mean(x^2) + eps) * w (w may be NULL). out may alias x. */
void rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* Fills cs[2*i], cs[2*i+1] = cos, sin of pos*scale*base^(-2i/rope_dim) / ff[i]
 * for i < rope_dim/2 (ff may be NULL). */
void rope_angles(float *cs, int pos, int rope_dim, float base, float pos_scale, const float *freq_factors);
/* Rotates the first rope_dim dims of each of n_heads heads of head_dim. */
void rope_apply(float *x, int n_heads, int head_dim, int rope_dim, const float *cs, rope_pairs pairs);

/* out = (x - mean(x)) / sqrt(var(x) + eps) * w + b: LayerNorm (BERT). out may
 * alias x. */
void layernorm(float *out, const float *x, const float *w, const float *b, int n, float eps);

/* x = x * Phi(x), the exact (erf) GELU of BERT's FFN, in place. */
void gelu_erf(float *x, int n);

/* g = act(g) * u, elementwise. */
void silu_mul(float *g, const float *u, int n);
void gelu_tanh_mul(float *g, const float *u, int n);
/* gpt-oss's clamped SwiGLU: with x = min(g, limit) and y = clamp(u, -limit,
 * limit), g = x * sigmoid(alpha * x) * (y + 1). */
void swiglu_oai_mul(float *g, const float *u, int n, float alpha, float limit);

/* The softmax weights of a row before their division by the sum:
 * p[i] = exp((x[i] - max) / t), 0 where x[i] is NaN or -inf and where the
 * exponent is below EXP_WEIGHT_MIN_ARG (the weight would be under 1e-38 of
 * the largest). Returns the sum of the weights, accumulated in double. For a
 * finite max >= every x[i] and t > 0; p may be NULL (only the sum). The
 * sampler and log-probabilities run it over the whole vocabulary per row. */
#define EXP_WEIGHT_MIN_ARG (-87.0f)
/* The index of the largest of x[0..n) that is not NaN, the lowest on ties;
 * 0 when every one is NaN. For n >= 1. */
int row_argmax(const float *x, int n);
double exp_weights(float *p, const float *x, int n, float max, float t);
/* The softmax probability of x[at] at temperature 1 (two passes of the
 * above: the max, then the sum); 0 when x[at] is NaN. How sure a draft is
 * of its token. */
float softmax_prob(const float *x, int n, int at);

void vec_add(float *y, const float *x, int n);
void vec_scale(float *y, float s, int n);

void rmsnorm_ref(float *out, const float *x, const float *w, int n, float eps);
void layernorm_ref(float *out, const float *x, const float *w, const float *b, int n, float eps);
void gelu_erf_ref(float *x, int n);
void layernorm_avx2(float *out, const float *x, const float *w, const float *b, int n, float eps);
void gelu_erf_avx2(float *x, int n);
void silu_mul_ref(float *g, const float *u, int n);
void gelu_tanh_mul_ref(float *g, const float *u, int n);
void swiglu_oai_mul_ref(float *g, const float *u, int n, float alpha, float limit);
double exp_weights_ref(float *p, const float *x, int n, float max, float t);
int row_argmax_ref(const float *x, int n);
int row_argmax_avx2(const float *x, int n);
double exp_weights_avx2(float *p, const float *x, int n, float max, float t);
void rmsnorm_avx2(float *out, const float *x, const float *w, int n, float eps);
void silu_mul_avx2(float *g, const float *u, int n);
void gelu_tanh_mul_avx2(float *g, const float *u, int n);
void swiglu_oai_mul_avx2(float *g, const float *u, int n, float alpha, float limit);

#endif
