/* See spec_medusa.h. */
#include "engine/spec_medusa.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

medusa_drafter *medusa_drafter_create(const model *m, const char *path, int max_rows, int k, const char *token_tree) {
    medusa_params p;
    if (medusa_load(&p, m, path)) return NULL;
    medusa_drafter *d = calloc(1, sizeof *d);
    if (!d) {
        medusa_params_free(&p);
        err_oom("out of memory");
        return NULL;
    }
    d->max_rows = max_rows < 1 ? 1 : max_rows;
    d->k = k < p.n_heads ? k : p.n_heads;
    d->top = 1;
    if (token_tree && token_tree[0]) {
        if (!strcmp(token_tree, "auto")) spec_tree_auto(p.top1, p.top5, p.n_heads, k, &d->tree);
        else if (spec_tree_parse(token_tree, k, &d->tree)) {
            medusa_params_free(&p);
            free(d);
            return NULL;
        }
        d->k = spec_tree_depth(&d->tree);
        d->top = spec_tree_ranks(&d->tree);
        if (d->k > p.n_heads) {
            err_set("speculative_token_tree is %d deep, but %s has %d heads", d->k, path, p.n_heads);
            medusa_params_free(&p);
            free(d);
            return NULL;
        }
    }
    d->heads = medusa_create(&p, m, d->max_rows);
    medusa_params_free(&p); /* what medusa_create did not take */
    if (!d->heads) {
        free(d);
        return NULL;
    }
    d->seqs = calloc((size_t)d->max_rows, sizeof *d->seqs);
    d->rows = calloc((size_t)d->max_rows, sizeof *d->rows);
    d->hidden = malloc((size_t)d->max_rows * m->hp.n_embd * sizeof *d->hidden);
    d->tokens = malloc((size_t)d->max_rows * d->k * d->top * sizeof *d->tokens);
    if (!d->seqs || !d->rows || !d->hidden || !d->tokens) {
        medusa_drafter_free(d);
        err_oom("out of memory");
        return NULL;
    }
    return d;
}

void medusa_drafter_free(medusa_drafter *d) {
    if (!d) return;
    medusa_free(d->heads);
    free(d->seqs);
    free(d->rows);
    free(d->hidden);
    free(d->tokens);
    free(d);
}

void medusa_drafter_note(medusa_drafter *d, sequence *s, int32_t row) {
    if (d->n >= d->max_rows) return; /* more than may speculate: the rest decode plainly */
    d->seqs[d->n] = s;
    d->rows[d->n++] = row;
}

void medusa_drafter_run(medusa_drafter *d, forward_ctx *f, threadpool *threads) {
    const int n = d->n;
    d->n = 0;
    if (n == 0 || forward_hidden(f, d->rows, n, d->hidden)) return;
    medusa_propose_top(d->heads, threads, d->hidden, n, d->k, d->top, d->tokens);
    for (int i = 0; i < n; i++) {
        sequence *s = d->seqs[i];
        const int32_t *cand = d->tokens + (size_t)i * d->k * d->top; /* [head][rank] */
        if (d->tree.n > 0)
            for (int j = 0; j < d->tree.n; j++) s->spec.guess[j] = cand[d->tree.depth[j] * d->top + d->tree.rank[j]];
        else memcpy(s->spec.guess, cand, (size_t)d->k * sizeof *cand);
        s->spec.n_guess = d->tree.n > 0 ? d->tree.n : d->k;
        s->spec.guess_at = s->n_tokens;
    }
}

int medusa_drafter_take(const medusa_drafter *d, sequence *s, int k) {
    if (s->spec.guess_at != s->n_tokens || s->spec.n_guess == 0) return 0;
    const int n = k < s->spec.n_guess ? k : s->spec.n_guess;
    memcpy(s->spec.draft, s->spec.guess, (size_t)n * sizeof *s->spec.draft);
    s->spec.tree = d->tree.n > 0;
    if (s->spec.tree) memcpy(s->spec.parent, d->tree.parent, (size_t)n * sizeof *s->spec.parent);
    return n;
}
