/* Recognizing a grammar byte by byte: a state is a set of stacks (llama.cpp's
 * scheme, on bytes). A stack lists positions in grammar.elems, bottom first;
 * the top is always a byte set, the next byte to match; the frames below are
 * where each enclosing rule continues. Advancing by a byte keeps the stacks
 * whose top admits it, steps past it and expands rule references and rule
 * ends until every top is a byte set again (an empty stack: the input may end
 * here). A call in tail position replaces its frame, so right-recursive
 * repetition (`x*`) keeps the stack flat.
 *
 * States are plain values: copying one is the snapshot that speculative
 * decoding rolls back to, and equal states hash equal (the token-mask cache
 * keys on the hash). */
#ifndef CLLM_GRAMMAR_GRAMMAR_MATCH_H
#define CLLM_GRAMMAR_GRAMMAR_MATCH_H

#include "grammar/grammar.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t *data;  /* stacks: [len, pos_0 .. pos_{len-1}] one after another */
    size_t n, cap;
    uint64_t *hashes; /* per stack */
    int n_stacks, cap_stacks;
    bool accept;      /* some stack is empty: the input may end here */
    uint64_t hash;    /* of the whole state */
} gstate;

/* A stack of the state being built, by hash: finds a duplicate in O(1)
 * where a scan of every stack made an ambiguous grammar's advance quadratic
 * (up to GRAMMAR_MAX_STACKS squared comparisons per byte). */
typedef struct {
    uint64_t hash;
    uint32_t off; /* of the stack in gstate.data */
    uint32_t gen; /* the slot holds a stack of this expansion when equal to gscratch.gen */
} gslot;

/* Working memory for advancing; one per thread. */
typedef struct {
    uint32_t *work; /* stacks waiting to be expanded */
    size_t n, cap;
    uint32_t *cur;  /* the stack being expanded */
    size_t cap_cur;
    gslot *slots;   /* open addressing, a power of two, at most half full */
    uint32_t n_slots, gen;
    uint32_t peak;  /* the longest stack any expansion with this scratch met or refused (depth bound) */
} gscratch;

void gstate_free(gstate *s);
void gscratch_free(gscratch *w);
/* The state before any input. -1 with err_get() (too deep, too ambiguous). */
int gstate_init(gstate *s, const grammar *g, gscratch *w);
/* Adds the stack pos[0..len) (bottom first; the top a byte set) to s, or
 * makes it s's only stack when `fresh`: stacks cut from longer ones, whose
 * empty stack then means "the cut-off frames continue"
 * (token_mask_class.c). -1 out of memory. */
int gstate_add_stack(gstate *s, const uint32_t *pos, uint32_t len, gscratch *w, bool fresh);
/* *to = *from advanced by `byte`. Returns 1 when some stack (or the end)
 * survives, 0 when the byte is refused (to->n_stacks 0, to->accept false),
 * -1 with err_get() when the state grows past the limits. */
int gstate_advance(const grammar *g, const gstate *from, unsigned char byte, gstate *to, gscratch *w);
/* Advances by n bytes in place; 1 when all are accepted, else 0 (the state is
 * then unchanged) or -1. */
int gstate_advance_bytes(const grammar *g, gstate *s, const unsigned char *bytes, size_t n, gscratch *w);
int gstate_copy(gstate *dst, const gstate *src);
bool gstate_equal(const gstate *a, const gstate *b);
/* The bytes that some stack's top admits (what can come next). */
void gstate_next_bytes(const grammar *g, const gstate *s, byte_set *out);

#endif
