/* See ngram.h. A backward scan per n-gram length: O(n_tokens * max_n) per
 * call at worst, a few microseconds for the contexts cllm serves, and far
 * below the cost of the forward pass it saves. */
#include "engine/ngram.h"

#include <string.h>

/* Start of the most recent occurrence of the last n tokens that k tokens
 * follow; failing that, of the most recent one that any token follows (as in
 * a short repeating loop); -1 when there is none. */
static int find_recent(const int32_t *t, int n_tokens, int n, int k) {
    const int32_t *suffix = t + n_tokens - n;
    int first = -1;
    for (int i = n_tokens - n - 1; i >= 0; i--)
        if (t[i] == suffix[0] && memcmp(t + i, suffix, (size_t)n * sizeof *t) == 0) {
            if (i + n + k <= n_tokens) return i;
            if (first < 0) first = i;
        }
    return first;
}

int ngram_propose(const int32_t *tokens, int n_tokens, int min_n, int max_n, int k, int32_t *out) {
    if (min_n < 1) min_n = 1;
    for (int n = max_n < n_tokens - 1 ? max_n : n_tokens - 1; n >= min_n; n--) {
        const int at = find_recent(tokens, n_tokens, n, k);
        if (at < 0) continue;
        /* What followed the occurrence; where that runs into the end of the
         * sequence, the proposal continues the repetition it is part of. */
        const int from = at + n, period = n_tokens - from;
        for (int j = 0; j < k; j++)
            out[j] = j < period ? tokens[from + j] : out[j - period];
        return k;
    }
    return 0;
}
