/* Log-probabilities from raw logits: the log-sum-exp that normalizes a row,
 * and its k most likely tokens. A request's logprobs (engine.c) and beam
 * search's candidates (beam.c) both come from here, so they rank and score
 * tokens the same way. */
#ifndef CLLM_ENGINE_LOGPROBS_H
#define CLLM_ENGINE_LOGPROBS_H

#include <stdbool.h>
#include <stdint.h>

/* log(sum(exp(logits[i]))), computed around the maximum so it cannot overflow;
 * logits[i] - this is token i's log-probability. NaN logits count as
 * impossible (as in the sampler); the maximum when it is not finite. */
float logprobs_logsumexp(const float *logits, int n);

/* Says whether a token may not be ranked (e.g. end-of-generation tokens
 * before min_tokens). */
typedef bool (*logprobs_skip_fn)(const void *ctx, int32_t token);

/* Writes the ids of the k largest logits to top, largest first, the lower id
 * first on ties, leaving out NaN and those skip(ctx, id) names (skip may be NULL).
 * Returns how many were written: k, or fewer when fewer tokens are left.
 * An insertion into a short sorted list: k is small (<= 128). */
int logprobs_top_k(const float *logits, int n, int k, logprobs_skip_fn skip, const void *ctx, int32_t *top);

/* vLLM's rank of token tok: how many tokens are at least as likely, itself
 * included (1: the most likely; ties count against it). NaN logits count as
 * impossible: a NaN token ranks after every other. */
int logprobs_rank(const float *logits, int n, int32_t tok);

#endif
