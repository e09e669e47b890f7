/* See seq_constraint.h. */
#include "engine/seq_constraint.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>

void constrainer_free(constrainer *c) {
    token_vocab_free(c->vocab);
    free(c->mask);
    c->vocab = NULL;
    c->mask = NULL;
}

static int ensure_vocab(constrainer *c) {
    if (c->vocab) return 0;
    c->vocab = token_vocab_from_tokenizer(c->tok);
    if (!c->vocab) return -1;
    c->mask = malloc((size_t)(c->vocab->n_vocab + 31) / 32 * sizeof *c->mask);
    if (!c->mask) {
        constrainer_free(c);
        return err_oom("constraint: out of memory for the token mask");
    }
    /* A few milliseconds once per model, so no request pays them mid-answer;
     * an optimization only, so a failure here changes nothing. */
    if (constraint_warm_token_classes(c->vocab)) err_clear();
    return 0;
}

int constrain_logits(constrainer *c, constraint_state *st, float *logits, int n_logits) {
    if (ensure_vocab(c) || constraint_mask(st, c->vocab, c->mask)) return -1;
    const int nv = c->vocab->n_vocab < n_logits ? c->vocab->n_vocab : n_logits;
    for (int w = 0; w * 32 < nv; w++) {
        const uint32_t bits = c->mask[w];
        if (bits == 0xFFFFFFFFu) continue;
        const int end = w * 32 + 32 < nv ? w * 32 + 32 : nv;
        for (int i = w * 32; i < end; i++)
            if (!((bits >> (i & 31)) & 1)) logits[i] = -INFINITY;
    }
    for (int i = nv; i < n_logits; i++) logits[i] = -INFINITY; /* padding rows past the tokenizer */
    return 0;
}

int constrain_advance(constrainer *c, constraint_state *st, int32_t token) {
    if (ensure_vocab(c)) return -1;
    const int rc = constraint_accept(st, c->vocab, token);
    if (rc < 0) return -1;
    if (rc == 0) return err_set("constraint: token %d is not allowed here", token);
    return 0;
}
