/* Token sampling from logits: logit bias, repetition/presence/frequency
 * penalties, then greedy (temperature 0) or temperature, top-k, top-p and
 * min-p followed by a draw from a seeded generator. Deterministic: the same
 * logits, history, parameters and generator state give the same token. */
#ifndef CLLM_ENGINE_SAMPLER_H
#define CLLM_ENGINE_SAMPLER_H

#include "util/rng.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int32_t token;
    float bias;
} logit_bias_entry;

typedef struct {
    float temperature;        /* <= 0: greedy */
    int top_k;                /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repetition_penalty; /* 1: off; over prompt and output (HF/vLLM semantics) */
    float presence_penalty;   /* 0: off; over output tokens (OpenAI semantics) */
    float frequency_penalty;  /* 0: off; over output tokens */
    uint64_t seed;
    int n_logit_bias;
    const logit_bias_entry *logit_bias;
} sampling_params;

/* The defaults of a plain request: temperature 1, no filters, no penalties. */
sampling_params sampling_defaults(void);

/* Scratch sized for one vocabulary; one per thread that samples. */
typedef struct sampler sampler;
sampler *sampler_create(int n_vocab);
void sampler_free(sampler *s);

/* Modifies logits in place (bias, penalties) and returns the chosen token.
 * prompt/output are the sequence's tokens so far (for the penalties). Total
 * over any logits: NaN counts as impossible (like -inf), +inf logits share
 * all the probability; -1 when no token is possible at all (every logit NaN
 * or -inf), which the caller turns into an error for that request. */
int32_t sampler_sample(sampler *s, const sampling_params *p, rng_state *rng, float *logits,
                       const int32_t *prompt, int n_prompt, const int32_t *output, int n_output);

/* Index of the largest logit (lowest index on ties; NaN below everything). */
int32_t sampler_argmax(const float *logits, int n);

#endif
