/* AWQ (Lin et al., 2023), activation-aware scaling: input channels that
 * carry large activations matter more, so before group quantization each
 * input column c of the linear maps that share an input is multiplied by
 * s_c = mean|x_c|^alpha (normalized so max * min = 1) and the input divided
 * by it, which the caller folds into the op that produces the input (an
 * RMSNorm weight, or the rows of the previous linear map). alpha is chosen
 * on a grid in [0, 1) to minimize the maps' output error on calibration
 * inputs, || X (Q(W diag(s)) diag(s)^-1)^T - X W^T ||^2 summed over the maps;
 * alpha = 0 is plain round-to-nearest, so the search never does worse than
 * RTN on the calibration data. */
#ifndef CLLM_QUANT_AWQ_H
#define CLLM_QUANT_AWQ_H

#include "quant/qformat.h"
#include "util/threadpool.h"

#include <stdint.h>

typedef struct {
    int n_grid; /* alphas 0, 1/n, ..., (n-1)/n; 20 by default */
} awq_opts;

typedef struct {
    double alpha;     /* the best exponent */
    double loss;      /* its output error, summed over the maps */
    double loss_rtn;  /* the error at alpha = 0 (round to nearest) */
} awq_result;

/* n_lin maps w[i] [n_out[i]][n_in] share the input x [n_tok][n_in] (a sample
 * of calibration rows); act_mean[n_in] is mean |x| per channel over all the
 * calibration rows. Writes the chosen scales to scales[n_in]. */
int awq_search(const qformat *f, const float *const *w, const int64_t *n_out, int n_lin, int64_t n_in,
               const float *x, int64_t n_tok, const float *act_mean, const awq_opts *o, threadpool *threads,
               float *scales, awq_result *res);

/* AWQ's second step, clipping: for every row and group of w [n_out][n_in]
 * (already scaled), the weights are clamped to +-r * max|w| for the r in
 * {1, 0.95, ..., 0.55} whose round-to-nearest quantization best preserves
 * the group's contribution to the outputs on x [n_tok][n_in] (the sample,
 * divided by the same scales): sum over tokens of (x_g . (w_g - q(w_g)))^2,
 * from the group's Gram matrix. Groups of a whole row are left alone (their
 * Gram matrix would be n_in^2 per row). */
int awq_clip(const qformat *f, float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok, threadpool *threads);

/* Mean |x| per channel of [n_rows][n_in] rows. */
void awq_act_mean(const float *x, int64_t n_rows, int64_t n_in, float *out);

#endif
