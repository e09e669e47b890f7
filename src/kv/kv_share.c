/* See kv_share.h. */
#include "kv/kv_share.h"

void kv_share_split(size_t total, const size_t *bytes_per_token, int n, size_t *out) {
    long double sum = 0;
    for (int i = 0; i < n; i++) sum += (long double)bytes_per_token[i];
    for (int i = 0; i < n; i++) {
        const long double part = sum > 0 ? (long double)total * (long double)bytes_per_token[i] / sum
                                         : (long double)total / (long double)n;
        size_t share = (size_t)part; /* truncation: the shares stay within total */
        if (share > total) share = total;
        out[i] = share;
    }
}
