/* Token masks from context-independent classes, kept once per vocabulary
 * (XGrammar's adaptive token mask cache, on this recognizer's stacks).
 *
 * Whether a token is allowed from a stack depends mostly on the stack's top
 * few frames: inside a JSON string, every token without a quote, control
 * character or bad escape is allowed whatever object or array the string
 * sits in. So each stack is cut to a suffix (its top frames down to the
 * first one that still needs a byte before it can return, such as the
 * string's closing quote), and the vocabulary is classified against the
 * suffix alone: tokens matched wholly inside it (allowed), refused inside it
 * (refused), or reaching past its bottom frame (context-dependent: checked
 * against the whole state, a few thousand tokens at most). The classes are
 * keyed by the suffix's canonical form (its frames and every rule they
 * reach, renumbered), so they are shared by every state, constraint and
 * request of the model whose stacks end the same way: the first JSON string
 * of any schema pays the full walk, every later one the check of its
 * context-dependent tokens. Stacks of a cut that read the same as another
 * (one schema compiled in several places) are classified once. */
#ifndef CLLM_GRAMMAR_TOKEN_MASK_CLASS_H
#define CLLM_GRAMMAR_TOKEN_MASK_CLASS_H

#include "grammar/grammar_dfa.h"
#include "grammar/token_vocab.h"

#include <stdint.h>

#define TOKEN_CLASS_UNUSED 1 /* the state does not suit the classes: walk the whole vocabulary */

typedef struct token_class_cache token_class_cache;

token_class_cache *token_class_cache_create(void);
void token_class_cache_free(token_class_cache *c);

typedef struct {
    uint64_t walks;  /* suffixes classified (a walk of the whole vocabulary each) */
    uint64_t hits;   /* stacks whose suffix was classified already */
    uint64_t unused; /* states left to the whole walk */
    uint64_t copies; /* stacks left out of a classification as copies of another */
} token_class_stats;

void token_class_stats_get(const token_vocab *v, token_class_stats *out);

/* The mask of DFA state `root`, as token_mask_walk_dfa gives it: 0,
 * GDFA_FULL, -1 with err_get(), or TOKEN_CLASS_UNUSED. */
int token_mask_by_class(gdfa *d, const token_vocab *v, int root, uint32_t *mask);

#endif
