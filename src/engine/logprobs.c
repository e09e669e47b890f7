/* See logprobs.h. */
#include "engine/logprobs.h"

#include "kernels/ops.h"

#include <math.h>
#include <stddef.h>

float logprobs_logsumexp(const float *logits, int n) {
    if (n < 1) return -INFINITY;
    float mx = logits[row_argmax(logits, n)];
    if (isnan(mx)) mx = -INFINITY; /* every logit NaN */
    if (!isfinite(mx)) return mx; /* -inf: nothing possible; +inf: the +inf tokens share it all */
    /* Weights under 1e-38 of the best's are left out: they move the sum by
     * less than float's precision, across any vocabulary. */
    return mx + (float)log(exp_weights(NULL, logits, n, mx, 1.0f));
}

int logprobs_rank(const float *logits, int n, int32_t tok) {
    const float x = logits[tok];
    int rank = 0;
    if (isnan(x)) {
        for (int i = 0; i < n; i++) rank += !isnan(logits[i]);
        return rank + 1;
    }
    for (int i = 0; i < n; i++) rank += logits[i] >= x; /* never true for NaN */
    return rank;
}

