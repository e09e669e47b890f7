/* GPTQ (Frantar et al., 2022): quantizes a linear layer's columns one at a
 * time and spreads each column's rounding error over the columns not yet
 * quantized, weighted by the inverse Hessian of the layer's squared output
 * error, H = 2 X^T X over calibration inputs X. Rows are independent given H,
 * so they are split over threads. */
#ifndef CLLM_QUANT_GPTQ_H
#define CLLM_QUANT_GPTQ_H

#include "quant/qformat.h"
#include "util/threadpool.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double damp;    /* added to H's diagonal: damp * mean(diag(H)); 0.01 by default */
    int block;      /* columns per lazy batch of error updates (128; a multiple of the group) */
    bool act_order; /* quantize columns by descending diag(H) (GPTQ desc_act) */
} gptq_opts;

/* In place: the n x n symmetric positive definite h becomes U, upper
 * triangular, with U^T U = h^-1 (the upper Cholesky factor of the inverse;
 * the lower triangle is zeroed). Returns 0, or -1 when h is not positive
 * definite. */
int gptq_inverse_cholesky(double *h, int64_t n);

/* Quantizes w [n_out][n_in] (overwritten: it is the working copy) with the
 * Hessian h [n_in][n_in] (overwritten). Writes rows of format f into dst and,
 * when deq is not NULL, the dequantized values; both in stored column order,
 * which with act_order is permuted: stored column k is input column perm[k]
 * (perm[n_in] is always written; the identity without act_order). Returns 0,
 * or -1 with err_get(). */
int gptq_quantize(const qformat *f, float *w, int64_t n_out, int64_t n_in, double *h, const gptq_opts *o,
                  threadpool *threads, void *dst, float *deq, int32_t *perm);

#endif
