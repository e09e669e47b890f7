/* Structured output in the engine: before sampling, the logits of tokens a
 * sequence's constraint forbids become -inf (end-of-generation tokens stay
 * only where the grammar may end); after sampling, the sequence's constraint
 * state advances by the chosen token. The state moves only with tokens the
 * engine emits: a speculative draft token is checked by sampling its row
 * under the mask, so a draft the constraint forbids is rejected and never
 * enters the state. The model's vocabulary is indexed (token_vocab) on the
 * first constrained request. */
#ifndef CLLM_ENGINE_SEQ_CONSTRAINT_H
#define CLLM_ENGINE_SEQ_CONSTRAINT_H

#include "grammar/constraint.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>

typedef struct {
    const tokenizer *tok;
    token_vocab *vocab; /* NULL until the first constrained request */
    uint32_t *mask;
} constrainer;

void constrainer_free(constrainer *c);
/* Masks `logits` (n_logits long) by the state's allowed tokens. 0, or -1
 * with err_get(). */
int constrain_logits(constrainer *c, constraint_state *st, float *logits, int n_logits);
/* Advances by the sampled token; -1 with err_get() when the token was not
 * allowed (cannot happen after constrain_logits) or on error. */
int constrain_advance(constrainer *c, constraint_state *st, int32_t token);

#endif
