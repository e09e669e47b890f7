/* Computing the set of tokens a grammar state allows (see token_mask.c). */
#ifndef CLLM_GRAMMAR_TOKEN_MASK_H
#define CLLM_GRAMMAR_TOKEN_MASK_H

#include "grammar/grammar.h"
#include "grammar/grammar_match.h"
#include "grammar/token_vocab.h"

#include <stdint.h>

/* Per-depth states and scratch, reused across walks by one thread. */
typedef struct {
    gstate *st;
    int cap_depth;
    gscratch scratch;
} mask_walker;

void mask_walker_free(mask_walker *w);
/* mask: (n_vocab + 31) / 32 words, bit id set when token id is allowed;
 * end-of-generation tokens where the state may end. 0, or -1 with err_get(). */
int token_mask_walk_with(const grammar *g, const token_vocab *v, const gstate *root, uint32_t *mask,
                         mask_walker *w);
int token_mask_walk(const grammar *g, const token_vocab *v, const gstate *st, uint32_t *mask);

#endif
