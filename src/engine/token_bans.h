/* vLLM's two per-request token masks, applied to the logits before
 * sampling: allowed_token_ids (every other token impossible) and bad_words
 * (a word's last token impossible right after the output spelled the rest
 * of it; a one-token word never). */
#ifndef CLLM_ENGINE_TOKEN_BANS_H
#define CLLM_ENGINE_TOKEN_BANS_H

#include "engine/engine.h"

#include <stdint.h>

/* Sets the masked logits to -inf. `output` holds the sequence's output
 * tokens so far; p->allowed_token_ids must be sorted (request.c sorts its
 * copy). */
void token_bans_apply(const request_params *p, const int32_t *output, int n_output, float *logits, int n_vocab);

#endif
