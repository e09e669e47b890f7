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

#define GDFA_UNKNOWN (-1) /* a transition not taken yet */
#define GDFA_FLAG_ACCEPT 1
#define GDFA_FLAG_STACKS 2

/* Laid out here only so that a step along a known transition, the
 * innermost operation of every mask walk, is inlined (a call per byte cost
 * a fifth of a classification); use the functions below. */
typedef struct {
    gstate st;
    int32_t next[256]; /* GDFA_UNKNOWN, GDFA_DEAD or a state id */
} gdfa_dstate;

typedef struct gdfa {
    const grammar *g;
    gdfa_dstate *states;
    int n_states, max_states;
    uint8_t *flags; /* per state: GDFA_FLAG_ACCEPT, GDFA_FLAG_STACKS */
    int32_t *index; /* slots: -1 empty, else a state id */
    uint32_t index_mask;
    gscratch scratch;
    gstate tmp;
} gdfa;

gdfa *gdfa_create(const grammar *g, int max_states);
void gdfa_free(gdfa *d);
/* Forgets every state (ids from before are invalid). */
void gdfa_clear(gdfa *d);
int gdfa_n_states(const gdfa *d);
/* The id of a state (added when new): >= 0, GDFA_FULL, or -1 with err_get(). */
int gdfa_intern(gdfa *d, const gstate *s);
/* The state after byte b: an id, GDFA_DEAD, GDFA_FULL or -1. */
int gdfa_step_new(gdfa *d, int id, unsigned char b); /* a transition not taken yet */
static inline int gdfa_step(gdfa *d, int id, unsigned char b) {
    const int32_t known = d->states[id].next[b];
    return known != GDFA_UNKNOWN ? known : gdfa_step_new(d, id, b);
}
const gstate *gdfa_state(const gdfa *d, int id);
const grammar *gdfa_grammar(const gdfa *d);
/* Whether state id may end here (some stack emptied) / has stacks left:
 * from a dense array, so a walk reading them per step stays in cache. */
static inline bool gdfa_accepts(const gdfa *d, int id) { return d->flags[id] & GDFA_FLAG_ACCEPT; }
static inline bool gdfa_has_stacks(const gdfa *d, int id) { return d->flags[id] & GDFA_FLAG_STACKS; }
/* The longest stack any of this DFA's advances met or refused, ever (not
 * reset by gdfa_clear): a bound on how deep its walks went. */
uint32_t gdfa_peak(const gdfa *d);

#endif
