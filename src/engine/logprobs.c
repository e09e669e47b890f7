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

int logprobs_top_k(const float *logits, int n, int k, logprobs_skip_fn skip, const void *ctx, int32_t *top) {
    if (k <= 0) return 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(logits[i])) continue; /* no rank: the sampler never picks it either */
        if (m == k && logits[i] <= logits[top[m - 1]]) continue;
        if (skip && skip(ctx, i)) continue;
        int j = m < k ? m++ : m - 1;
        while (j > 0 && logits[top[j - 1]] < logits[i]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    return m;
}
