/* See spec_medusa.h. */
#include "engine/spec_medusa.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

medusa_drafter *medusa_drafter_create(const model *m, const char *path, int max_rows, int k, const char *token_tree,
                                      int vocab_size) {
    medusa_params p;
    if (medusa_load(&p, m, path)) return NULL;
    if (p.exit_layer) {
        err_set("%s is an exit adapter (after layer %d), for method \"layer_skip\", not Medusa heads", path,
                p.exit_layer);
        medusa_params_free(&p);
        return NULL;
    }
    medusa_params_keep_vocab(&p, vocab_size);
    medusa_drafter *d = calloc(1, sizeof *d);
    if (!d) {
        medusa_params_free(&p);
        err_oom("out of memory");
        return NULL;
    }
    d->max_rows = max_rows < 1 ? 1 : max_rows;
    d->k = k < p.n_heads ? k : p.n_heads;
    if (token_tree && token_tree[0]) {
        if (!strcmp(token_tree, "auto")) spec_tree_auto(p.top1, p.top5, p.n_heads, k, &d->tree);
        else if (spec_tree_parse(token_tree, k, &d->tree)) {
            medusa_params_free(&p);
            free(d);
            return NULL;
        }
        d->k = spec_tree_depth(&d->tree);
        if (d->k > p.n_heads) {
            err_set("speculative_token_tree is %d deep, but %s has %d heads", d->k, path, p.n_heads);
            medusa_params_free(&p);
            free(d);
            return NULL;
        }
    }
    if (d->tree.n == 0) /* a chain: node j the best guess of head j */
        for (int j = 0; j < d->k; j++)
            d->tree.parent[j] = (int8_t)(j - 1), d->tree.rank[j] = 0, d->tree.depth[j] = (int8_t)j;
    d->n_nodes = d->tree.n > 0 ? d->tree.n : d->k;
    d->heads = medusa_create(&p, m, d->max_rows, d->n_nodes, WT_Q8_0);
    medusa_params_free(&p); /* what medusa_create did not take */
    if (!d->heads) {
        free(d);
        return NULL;
    }
    d->seqs = calloc((size_t)d->max_rows, sizeof *d->seqs);
    d->rows = calloc((size_t)d->max_rows, sizeof *d->rows);
    d->hidden = malloc((size_t)d->max_rows * m->hp.n_embd * sizeof *d->hidden);
    d->last = malloc((size_t)d->max_rows * sizeof *d->last);
    d->tokens = malloc((size_t)d->max_rows * d->n_nodes * sizeof *d->tokens);
    d->probs = malloc((size_t)d->max_rows * d->n_nodes * sizeof *d->probs);
    if (!d->seqs || !d->rows || !d->hidden || !d->last || !d->tokens || !d->probs) {
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
    free(d->last);
    free(d->tokens);
    free(d->probs);
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
    for (int i = 0; i < n; i++) d->last[i] = d->seqs[i]->tokens[d->seqs[i]->n_tokens - 1];
    const bool want_prob = d->p_min > 0 && d->tree.n == 0;
    medusa_draft(d->heads, threads, d->hidden, d->last, n, d->tree.parent, d->tree.rank, d->n_nodes, d->tokens,
                 want_prob ? d->probs : NULL);
    for (int i = 0; i < n; i++) {
        sequence *s = d->seqs[i];
        memcpy(s->spec.guess, d->tokens + (size_t)i * d->n_nodes, (size_t)d->n_nodes * sizeof *d->tokens);
        s->spec.n_guess = d->n_nodes;
        if (want_prob)
            memcpy(s->spec.guess_conf, d->probs + (size_t)i * d->n_nodes, (size_t)d->n_nodes * sizeof *d->probs);
        s->spec.guess_at = s->n_tokens;
    }
}

int medusa_drafter_take(const medusa_drafter *d, sequence *s, int k) {
    if (s->spec.guess_at != s->n_tokens || s->spec.n_guess == 0) return 0;
    int n = k < s->spec.n_guess ? k : s->spec.n_guess;
    if (d->p_min > 0 && d->tree.n == 0) {
        for (int j = 0; j < n; j++)
            if (s->spec.guess_conf[j] < d->p_min) n = j + 1; /* ends the loop */
        memcpy(s->spec.conf, s->spec.guess_conf, (size_t)n * sizeof *s->spec.conf);
    }
    memcpy(s->spec.draft, s->spec.guess, (size_t)n * sizeof *s->spec.draft);
    s->spec.tree = d->tree.n > 0; /* a chain's parents are implied */
    if (s->spec.tree) memcpy(s->spec.parent, d->tree.parent, (size_t)n * sizeof *s->spec.parent);
    return n;
}
