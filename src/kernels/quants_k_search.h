/* Scale searches of the K-quant quantizers: for a small group of values, pick
 * the scale (and min) whose rounded levels reconstruct the group with the
 * least weighted squared (or absolute) error. They follow ggml's reference
 * quantizers (make_qkx2_quants, make_qx_quants, make_q3_quants); the results
 * are the per-group scales, which quants_k_ref.c then quantizes to 4, 6 or 8
 * bits and uses to recompute the levels. */
#ifndef CLLM_KERNELS_QUANTS_K_SEARCH_H
#define CLLM_KERNELS_QUANTS_K_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

/* x ~ scale * L - min_out with L in [0, nmax] and min_out >= 0 (the group's
 * minimum is never raised above 0). Tries nstep + 1 trial inverse scales
 * (nmax + rmin + rdelta * k) / (max - min) and, for each, the least-squares
 * scale and min of the rounded levels under weights w; keeps the best by
 * weighted squared error, or absolute error when use_mad. Returns the scale;
 * 0 (and L all 0) for a constant group. */
float qk_search_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                          float *min_out, float rmin, float rdelta, int nstep, bool use_mad);

/* Symmetric: x ~ scale * (L - nmax) with L in [0, 2 * nmax - 1], weighted by
 * x^2 so large values are reproduced best. Tries 19 inverse scales around
 * nmax / max|x|. Returns the scale (its sign may be negative); 0 when the
 * group is all (near) zero. */
float qk_search_scale_sym(int n, int nmax, const float *x, int8_t *L);

/* Symmetric for the 3-bit type: starts from nmax / max|x| and then moves single
 * levels while that lowers the x^2-weighted error (at most 5 passes). Same
 * return convention as qk_search_scale_sym. */
float qk_search_scale_q3(int n, int nmax, const float *x, int8_t *L);

#endif
