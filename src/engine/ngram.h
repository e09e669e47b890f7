/* N-gram prompt lookup, the draft of speculative decoding that needs no draft
 * model: the sequence's last n tokens (n from max_n down to min_n) are looked
 * up in its own earlier tokens (prompt and output), and the tokens that
 * followed the most recent earlier occurrence are proposed as the next ones.
 * It pays on outputs that quote their input: code edits, summaries with
 * quotes, retrieval answers. */
#ifndef CLLM_ENGINE_NGRAM_H
#define CLLM_ENGINE_NGRAM_H

#include <stdint.h>

/* Writes k proposed tokens to out and returns k, or 0 when no n-gram of
 * length min_n..max_n recurs. The longest matching n-gram wins; among its
 * occurrences the most recent one followed by k tokens, else the most recent
 * one, whose continuation then repeats with the period it shows (after
 * "a b a b", "a b" is followed by "a b", so "a b a b ..." is proposed). */
int ngram_propose(const int32_t *tokens, int n_tokens, int min_n, int max_n, int k, int32_t *out);

#endif
