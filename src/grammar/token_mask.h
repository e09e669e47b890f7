/* Computing the set of tokens a grammar state allows (see token_mask.c). */
#ifndef CLLM_GRAMMAR_TOKEN_MASK_H
#define CLLM_GRAMMAR_TOKEN_MASK_H

#include "grammar/grammar.h"
#include "grammar/grammar_dfa.h"
#include "grammar/grammar_match.h"
#include "grammar/token_vocab.h"

#include <stdint.h>

/* mask: (n_vocab + 31) / 32 words, bit id set when token id is allowed from
 * DFA state `root`; end-of-generation tokens where it may end. 0, GDFA_FULL
 * (clear the DFA and retry), or -1 with err_get(). */
int token_mask_walk_dfa(gdfa *d, const token_vocab *v, int root, uint32_t *mask);
/* The same from a state, with a DFA of its own (tests compare the two). */
int token_mask_walk(const grammar *g, const token_vocab *v, const gstate *st, uint32_t *mask);

#endif
