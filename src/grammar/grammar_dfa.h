/* The recognizer determinized lazily: recognizer states (grammar_match.h)
 * are interned as numbered DFA states, and each state's 256 byte transitions
 * are filled in as they are first taken. A token-mask walk then costs a
 * table lookup per trie node instead of an advance: inside a JSON string
 * nearly every token of a 262k vocabulary is allowed, but all of them lead
 * through a handful of states (the string loop and its partial UTF-8
 * characters). The table is per constraint, bounded (max_states), and
 * cleared when full; states survive a clear only as the values callers hold. */
#ifndef CLLM_GRAMMAR_GRAMMAR_DFA_H
#define CLLM_GRAMMAR_GRAMMAR_DFA_H

#include "grammar/grammar.h"
#include "grammar/grammar_match.h"

#include <stdbool.h>
#include <stdint.h>

#define GDFA_DEAD (-3) /* the byte is refused */
#define GDFA_FULL (-2) /* no room for another state: gdfa_clear and retry */

typedef struct gdfa gdfa;

gdfa *gdfa_create(const grammar *g, int max_states);
void gdfa_free(gdfa *d);
/* Forgets every state (ids from before are invalid). */
void gdfa_clear(gdfa *d);
int gdfa_n_states(const gdfa *d);
/* The id of a state (added when new): >= 0, GDFA_FULL, or -1 with err_get(). */
int gdfa_intern(gdfa *d, const gstate *s);
/* The state after byte b: an id, GDFA_DEAD, GDFA_FULL or -1. */
int gdfa_step(gdfa *d, int id, unsigned char b);
const gstate *gdfa_state(const gdfa *d, int id);
const grammar *gdfa_grammar(const gdfa *d);
/* Whether state id may end here (some stack emptied) / has stacks left:
 * from a dense array, so a walk reading them per step stays in cache. */
bool gdfa_accepts(const gdfa *d, int id);
bool gdfa_has_stacks(const gdfa *d, int id);
/* The longest stack any of this DFA's advances met or refused, ever (not
 * reset by gdfa_clear): a bound on how deep its walks went. */
uint32_t gdfa_peak(const gdfa *d);

#endif
