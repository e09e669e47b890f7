/* Log-probabilities from raw logits: the log-sum-exp that normalizes a row,
 * and a token's rank (util/top_k.h ranks the k most likely). */
#ifndef CLLM_ENGINE_LOGPROBS_H
#define CLLM_ENGINE_LOGPROBS_H

#include <stdint.h>

/* log(sum(exp(logits[i]))), computed around the maximum so it cannot overflow;
 * logits[i] - this is token i's log-probability. NaN logits count as
 * impossible (as in the sampler); the maximum when it is not finite. */
float logprobs_logsumexp(const float *logits, int n);

/* vLLM's rank of token tok: how many tokens are at least as likely, itself
 * included (1: the most likely; ties count against it). NaN logits count as
 * impossible: a NaN token ranks after every other. */
int logprobs_rank(const float *logits, int n, int32_t tok);

#endif
