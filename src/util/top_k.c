/* See top_k.h. */
#include "util/top_k.h"

#include <math.h>

int top_k_indices(const float *x, int n, int k, top_k_skip_fn skip, const void *ctx, int32_t *top) {
    if (k <= 0) return 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i])) continue; /* no rank: the sampler never picks it either */
        if (m == k && x[i] <= x[top[m - 1]]) continue;
        if (skip && skip(ctx, i)) continue;
        int j = m < k ? m++ : m - 1;
        while (j > 0 && x[top[j - 1]] < x[i]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    return m;
}
