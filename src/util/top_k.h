/* The indices of the k largest values of a row: a request's logprobs and
 * beam search's candidates (engine/) and Medusa's draft candidates (model/)
 * all rank with it, so they break ties and treat NaN the same way. */
#ifndef CLLM_UTIL_TOP_K_H
#define CLLM_UTIL_TOP_K_H

#include <stdbool.h>
#include <stdint.h>

/* Says whether an index may not be ranked (e.g. end-of-generation tokens
 * before min_tokens). */
typedef bool (*top_k_skip_fn)(const void *ctx, int32_t index);

/* Writes the indices of the k largest of x[0..n) to top, largest first, the
 * lower index first on ties, leaving out NaN and those skip(ctx, i) names
 * (skip may be NULL). Returns how many were written: k, or fewer when fewer
 * are left. An insertion into a short sorted list: k is small (<= 128). */
int top_k_indices(const float *x, int n, int k, top_k_skip_fn skip, const void *ctx, int32_t *top);

#endif
