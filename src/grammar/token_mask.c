/* The allowed-token walk: the vocabulary in byte order is a flattened token
 * trie, so a token shares the recognizer states of its common prefix with
 * the previous one (lcp) and only its new bytes are advanced. A byte the
 * state refuses rejects, without a look, every following token with the same
 * prefix; the first byte is checked against what any stack admits, which
 * skips whole first-byte groups at once. The result is cached per state by
 * constraint.c. */
#include "grammar/token_mask.h"

#include "util/vec.h"

#include <stdlib.h>
#include <string.h>

void mask_walker_free(mask_walker *w) {
    for (int i = 0; i < w->cap_depth; i++) gstate_free(&w->st[i]);
    free(w->st);
    gscratch_free(&w->scratch);
    *w = (mask_walker){0};
}

static int ensure_depth(mask_walker *w, int depth) {
    if (depth <= w->cap_depth) return 0;
    gstate *st = realloc(w->st, (size_t)depth * sizeof *st);
    if (!st) return -1;
    memset(st + w->cap_depth, 0, (size_t)(depth - w->cap_depth) * sizeof *st);
    w->st = st;
    w->cap_depth = depth;
    return 0;
}

int token_mask_walk_with(const grammar *g, const token_vocab *v, const gstate *root, uint32_t *mask,
                         mask_walker *w) {
    memset(mask, 0, (size_t)(v->n_vocab + 31) / 32 * sizeof *mask);
    if (ensure_depth(w, v->max_len + 1)) return -1;
    byte_set first;
    gstate_next_bytes(g, root, &first);
    int valid = 0; /* w->st[1..valid] hold the states after the previous token's first bytes */
    int i = 0;
    while (i < v->n_order) {
        const int32_t id = v->order[i];
        int len;
        const unsigned char *p = (const unsigned char *)token_vocab_bytes(v, id, &len);
        if (!byte_set_has(&first, p[0])) {
            i = v->first_end[p[0]];
            valid = 0;
            continue;
        }
        int k = v->lcp[i] < valid ? v->lcp[i] : valid;
        int rc = 1;
        for (; k < len; k++) {
            rc = gstate_advance(g, k ? &w->st[k] : root, p[k], &w->st[k + 1], &w->scratch);
            if (rc <= 0) break;
        }
        if (rc < 0) return -1;
        if (rc) {
            mask[id >> 5] |= 1u << (id & 31);
            valid = len;
            i++;
            continue;
        }
        valid = k; /* bytes 0..k refused: skip every token starting with them */
        int j = i + 1;
        while (j < v->n_order && v->lcp[j] >= k + 1) j++;
        i = j;
    }
    if (root->accept)
        for (int e = 0; e < v->n_eog; e++) mask[v->eog_ids[e] >> 5] |= 1u << (v->eog_ids[e] & 31);
    return 0;
}

int token_mask_walk(const grammar *g, const token_vocab *v, const gstate *st, uint32_t *mask) {
    mask_walker w = {0};
    const int rc = token_mask_walk_with(g, v, st, mask, &w);
    mask_walker_free(&w);
    return rc;
}
