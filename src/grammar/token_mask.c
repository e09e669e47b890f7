/* The allowed-token walk: the vocabulary in byte order is a flattened token
 * trie, so a token shares the states of its common prefix with the previous
 * one (lcp) and only its new bytes are stepped. A byte the grammar refuses
 * rejects, without a look, every following token with the same prefix; the
 * first byte is checked against what any stack admits, which skips whole
 * first-byte groups at once. Steps go through the lazily built DFA
 * (grammar_dfa.h), so a step is a table lookup once its transition is
 * known; constraint.c caches the finished mask per DFA state. */
#include "grammar/token_mask.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

int token_mask_walk_dfa(gdfa *d, const token_vocab *v, int root, uint32_t *mask) {
    memset(mask, 0, (size_t)(v->n_vocab + 31) / 32 * sizeof *mask);
    int32_t *sid = malloc(((size_t)v->max_len + 1) * sizeof *sid);
    if (!sid) return -1;
    sid[0] = root;
    byte_set first;
    gstate_next_bytes(gdfa_grammar(d), gdfa_state(d, root), &first);
    int valid = 0; /* sid[1..valid] hold the states after the previous token's first bytes */
    int i = 0, rc = 0;
    while (i < v->n_order) {
        const int32_t id = v->order[i];
        int len;
        const unsigned char *p = token_vocab_sorted(v, i, &len);
        if (!byte_set_has(&first, p[0])) {
            i = v->first_end[p[0]];
            valid = 0;
            continue;
        }
        int k = v->lcp[i] < valid ? v->lcp[i] : valid;
        int to = 0;
        for (; k < len; k++) {
            to = gdfa_step(d, sid[k], p[k]);
            if (to < 0) break;
            sid[k + 1] = to;
        }
        if (to == GDFA_DEAD) {
            valid = k; /* bytes 0..k refused: skip every token starting with them */
            int j = i + 1;
            while (j < v->n_order && v->lcp[j] >= k + 1) j++;
            i = j;
            continue;
        }
        if (to < 0) {
            rc = to; /* GDFA_FULL or an error */
            break;
        }
        mask[id >> 5] |= 1u << (id & 31);
        valid = len;
        i++;
    }
    free(sid);
    if (rc) return rc;
    if (gdfa_state(d, root)->accept)
        for (int e = 0; e < v->n_eog; e++) mask[v->eog_ids[e] >> 5] |= 1u << (v->eog_ids[e] & 31);
    return 0;
}

int token_mask_walk(const grammar *g, const token_vocab *v, const gstate *st, uint32_t *mask) {
    for (int max_states = 4096;; max_states *= 4) {
        gdfa *d = gdfa_create(g, max_states);
        if (!d) return -1;
        const int root = gdfa_intern(d, st);
        const int rc = root < 0 ? root : token_mask_walk_dfa(d, v, root, mask);
        gdfa_free(d);
        if (rc != GDFA_FULL) return rc;
        if (max_states >= (1 << 18)) return err_set("grammar too complex: one mask needs over %d states", max_states);
    }
}
