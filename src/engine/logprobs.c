/* See logprobs.h. */
#include "engine/logprobs.h"

#include <math.h>

float logprobs_logsumexp(const float *logits, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i]; /* never true for NaN */
    if (!isfinite(mx)) return mx; /* -inf: nothing possible; +inf: the +inf tokens share it all */
    double sum = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(logits[i])) sum += exp((double)logits[i] - mx);
    return mx + (float)log(sum);
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

