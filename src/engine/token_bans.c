/* See token_bans.h. Both follow vLLM: allowed_token_ids as its
 * AllowedTokenIdsLogitsProcessor, bad_words as _apply_bad_words (the
 * output's last tokens against each word's prefix). */
#include "engine/token_bans.h"

#include <math.h>
#include <string.h>

static void keep_allowed(const int32_t *sorted, int n, float *logits, int n_vocab) {
    int k = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        while (k < n && sorted[k] < t) k++;
        if (k == n || sorted[k] != t) logits[t] = -INFINITY;
    }
}

static void ban_bad_words(const request_params *p, const int32_t *output, int n_output, float *logits,
                          int n_vocab) {
    const int32_t *word = p->bad_word_ids;
    for (int i = 0; i < p->n_bad_words; word += p->bad_word_lens[i], i++) {
        const int len = p->bad_word_lens[i];
        const int prefix = len - 1;
        if (len <= 0 || prefix > n_output) continue;
        if (prefix && memcmp(output + n_output - prefix, word, (size_t)prefix * sizeof *word)) continue;
        if (word[prefix] >= 0 && word[prefix] < n_vocab) logits[word[prefix]] = -INFINITY;
    }
}

void token_bans_apply(const request_params *p, const int32_t *output, int n_output, float *logits, int n_vocab) {
    if (p->n_allowed_token_ids > 0) keep_allowed(p->allowed_token_ids, p->n_allowed_token_ids, logits, n_vocab);
    if (p->n_bad_words > 0) ban_bad_words(p, output, n_output, logits, n_vocab);
}
