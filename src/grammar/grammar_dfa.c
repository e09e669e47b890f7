/* See grammar_dfa.h. States live in one array; an open-addressing table on
 * the state hash finds them. */
#include "grammar/grammar_dfa.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define UNKNOWN GDFA_UNKNOWN
#define FLAG_ACCEPT GDFA_FLAG_ACCEPT
#define FLAG_STACKS GDFA_FLAG_STACKS

gdfa *gdfa_create(const grammar *g, int max_states) {
    gdfa *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->g = g;
    d->max_states = max_states;
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)max_states) slots <<= 1;
    d->index = malloc(slots * sizeof *d->index);
    d->states = calloc((size_t)max_states, sizeof *d->states);
    d->flags = calloc((size_t)max_states, sizeof *d->flags);
    if (!d->index || !d->states || !d->flags) {
        gdfa_free(d);
        return NULL;
    }
    d->index_mask = slots - 1;
    memset(d->index, 0xff, slots * sizeof *d->index);
    return d;
}

void gdfa_clear(gdfa *d) {
    for (int i = 0; i < d->n_states; i++) gstate_free(&d->states[i].st);
    d->n_states = 0;
    memset(d->index, 0xff, (d->index_mask + 1) * sizeof *d->index);
}

void gdfa_free(gdfa *d) {
    if (!d) return;
    if (d->states) gdfa_clear(d);
    free(d->states);
    free(d->flags);
    free(d->index);
    gscratch_free(&d->scratch);
    gstate_free(&d->tmp);
    free(d);
}

int gdfa_n_states(const gdfa *d) { return d->n_states; }
const gstate *gdfa_state(const gdfa *d, int id) { return &d->states[id].st; }
const grammar *gdfa_grammar(const gdfa *d) { return d->g; }
uint32_t gdfa_peak(const gdfa *d) {
    return d->scratch.peak;
}

int gdfa_intern(gdfa *d, const gstate *s) {
    uint32_t slot = (uint32_t)(s->hash ^ (s->hash >> 29)) & d->index_mask;
    for (; d->index[slot] >= 0; slot = (slot + 1) & d->index_mask)
        if (gstate_equal(&d->states[d->index[slot]].st, s)) return d->index[slot];
    if (d->n_states >= d->max_states) return GDFA_FULL;
    gdfa_dstate *n = &d->states[d->n_states];
    n->st = (gstate){0};
    if (gstate_copy(&n->st, s)) return err_oom("grammar: out of memory");
    for (int b = 0; b < 256; b++) n->next[b] = UNKNOWN;
    d->flags[d->n_states] =
        (uint8_t)((s->accept ? FLAG_ACCEPT : 0) | (s->n_stacks > 0 ? FLAG_STACKS : 0));
    d->index[slot] = d->n_states;
    return d->n_states++;
}

int gdfa_step_new(gdfa *d, int id, unsigned char b) {
    const int rc = gstate_advance(d->g, &d->states[id].st, b, &d->tmp, &d->scratch);
    if (rc < 0) return -1;
    const int to = rc == 0 ? GDFA_DEAD : gdfa_intern(d, &d->tmp);
    if (to == GDFA_FULL || to == -1) return to;
    d->states[id].next[b] = to;
    return to;
}
