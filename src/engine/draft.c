/* See draft.h. The draft runs on a model runner of its own (model/runner.h:
 * a KV cache and block manager with no prefix cache, since draft blocks are
 * never shared, and a forward context), on the target's threads; the batch
 * layout mirrors engine.c's. */
#include "engine/draft.h"

#include "engine/sampler.h"
#include "kernels/ops.h"
#include "kv/kv_manager.h"
#include "model/head_slice.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

struct draft_runner {
    const model *m;    /* what the runner runs: the draft, or `view` */
    model view;        /* with a draft vocabulary: the draft with its output matrix sliced */
    head_slice head;
    runner run;
    int max_tokens, max_seqs;
    int32_t *tok, *pos, *seq, *rows;
    int *upto; /* [max_seqs]: draft_propose's per-sequence round targets */
    fwd_seq *seqs;
    sequence **row_seq;
    float *logits; /* [max_seqs][n_vocab] */
    medusa_heads *exit; /* an exit adapter: rows go through it, not the output head */
    float *hidden;      /* with exit: [max_seqs][n_embd] the rows' final-normed states */
    int32_t *guess;     /* with exit: [max_seqs] */
    float *prob;        /* with exit: [max_seqs] the guesses' probabilities */
    int *want;          /* [max_seqs]: draft_propose's per-sequence draft counts */
};

static int check_vocab(const model *draft, const model *target) {
    const int nd = tokenizer_n_vocab(draft->tok), nt = tokenizer_n_vocab(target->tok);
    if (nd != nt || draft->hp.n_vocab != target->hp.n_vocab)
        return err_set(
            "the draft model's vocabulary (%d tokens) differs from the target's (%d tokens)", nd,
            nt);
    for (int i = 0; i < nt; i++) {
        const char *a = tokenizer_token_text(draft->tok, i),
                   *b = tokenizer_token_text(target->tok, i);
        if (strcmp(a ? a : "", b ? b : ""))
            return err_set("the draft model's tokenizer differs from the target's: token %d is "
                           "'%s' in the draft, "
                           "'%s' in the target",
                           i, a ? a : "", b ? b : "");
    }
    return 0;
}

draft_runner *draft_create(const model *draft, const model *target, int n_seqs, int max_model_len,
                           int max_tokens, int block_size, threadpool *threads, const int32_t *vocab,
                           int n_vocab) {
    if (check_vocab(draft, target)) return NULL;
    draft_runner *d = calloc(1, sizeof *d);
    if (!d) {
        err_oom("out of memory");
        return NULL;
    }
    d->m = draft;
    if (n_vocab > 0) {
        if (head_slice_init(&d->head, draft, vocab, n_vocab)) goto fail;
        d->view = *draft; /* shares everything but the output matrix */
        d->view.w.output = d->head.w;
        d->view.hp.n_vocab = n_vocab;
        d->m = &d->view;
    }
    d->max_tokens = max_tokens;
    d->max_seqs = n_seqs;
    kv_cache layout;
    kv_cache_layout(&draft->kv, KV_F16, block_size, &layout);
    kv_manager probe = {.cache = &layout, .n_groups = layout.n_groups, .block_size = block_size};
    const int n_blocks = kvm_blocks_needed(&probe, max_model_len, max_tokens) * n_seqs;
    const runner_config rc = {.kv_type = KV_F16, .block_size = block_size, .n_blocks = n_blocks,
                              .block_manager = true, .max_tokens = max_tokens, .max_out = n_seqs, .threads = threads,
                              .n_ctx = max_model_len};
    if (runner_init(&d->run, d->m, &rc)) goto fail;
    const size_t T = (size_t)max_tokens, S = (size_t)n_seqs;
    d->tok = malloc(T * sizeof *d->tok);
    d->pos = malloc(T * sizeof *d->pos);
    d->seq = malloc(T * sizeof *d->seq);
    d->rows = malloc(S * sizeof *d->rows);
    d->upto = malloc(S * sizeof *d->upto);
    d->want = malloc(S * sizeof *d->want);
    d->seqs = calloc(S, sizeof *d->seqs);
    d->row_seq = calloc(S, sizeof *d->row_seq);
    d->logits = malloc(S * (size_t)d->m->hp.n_vocab * sizeof *d->logits);
    if (!d->tok || !d->pos || !d->seq || !d->rows || !d->upto || !d->want || !d->seqs || !d->row_seq ||
        !d->logits) {
        err_oom("out of memory for the draft model's buffers");
        goto fail;
    }
    return d;
fail:
    draft_free(d);
    return NULL;
}

int draft_set_exit(draft_runner *d, medusa_params *p, int vocab_size) {
    if (p->exit_layer != d->m->hp.n_layer || p->n_heads != 1 || p->chained || d->head.ids)
        return err_set("an exit adapter after layer %d does not fit a draft of %d layers", p->exit_layer,
                       d->m->hp.n_layer);
    medusa_params_keep_vocab(p, vocab_size);
    d->hidden = malloc((size_t)d->max_seqs * d->m->hp.n_embd * sizeof *d->hidden);
    d->guess = malloc((size_t)d->max_seqs * sizeof *d->guess);
    d->prob = malloc((size_t)d->max_seqs * sizeof *d->prob);
    if (!d->hidden || !d->guess || !d->prob) return err_oom("out of memory for the exit adapter");
    d->exit = medusa_create(p, d->m, d->max_seqs, 1, WT_Q8_0);
    return d->exit ? 0 : -1;
}

void draft_free(draft_runner *d) {
    if (!d) return;
    runner_destroy(&d->run);
    medusa_free(d->exit);
    free(d->hidden);
    free(d->guess);
    free(d->prob);
    free(d->want);
    head_slice_free(&d->head);
    free(d->tok);
    free(d->pos);
    free(d->seq);
    free(d->rows);
    free(d->upto);
    free(d->seqs);
    free(d->row_seq);
    free(d->logits);
    free(d);
}

void draft_release(draft_runner *d, sequence *s) {
    kvm_release(&d->run.kvm, &s->spec.kv);
    s->spec.computed = 0;
}

/* Keeps the draft K/V of positions whose tokens are the sequence's own:
 * drafts fed from draft_base on count only where the sequence went on with
 * the same tokens (whether the drafts were verified, or dropped by the
 * scheduler and decoded plainly), and the last known token is always fed
 * again so that it gives the next row. */
static void sync(draft_runner *d, sequence *s) {
    int valid = s->spec.computed;
    if (valid > s->spec.base) {
        int j = 0;
        while (s->spec.base + j < valid && s->spec.base + j < s->n_tokens &&
               j < SPEC_MAX_TOKENS && s->tokens[s->spec.base + j] == s->spec.draft[j])
            j++;
        valid = s->spec.base + j;
    }
    if (valid > s->n_tokens - 1) valid = s->n_tokens - 1;
    s->spec.computed = valid;
    kvm_truncate(&d->run.kvm, &s->spec.kv, valid);
}

void draft_rollback(draft_runner *d, sequence *s) {
    sync(d, s);
}

/* The token at position `at` of s: a known token, or a draft already made. */
static int32_t token_at(const sequence *s, int at) {
    return at < s->n_tokens ? s->tokens[at] : s->spec.draft[at - s->n_tokens];
}

/* One forward over the tokens [draft_computed, upto) of each listed sequence
 * (at most the token budget); each sequence that reaches `upto` gets a row,
 * whose argmax becomes its next draft (with want_prob, and its probability
 * in spec.conf). */
static void draft_round(draft_runner *d, sequence **seqs, const int *upto, int n, bool want_prob) {
    int t = 0, n_rows = 0, n_seqs = 0;
    for (int i = 0; i < n; i++) {
        sequence *s = seqs[i];
        int count = upto[i] - s->spec.computed;
        if (count <= 0) continue;
        if (count > d->max_tokens - t) count = d->max_tokens - t;
        if (count <= 0) break;
        if (kvm_allocate(&d->run.kvm, &s->spec.kv, s->spec.computed, count)) {
            /* The pool is full: this sequence starts over later, its blocks freed for the others.
             */
            draft_release(d, s);
            continue;
        }
        for (int k = 0; k < count; k++, t++) {
            d->tok[t] = token_at(s, s->spec.computed + k);
            d->pos[t] = s->spec.computed + k;
            d->seq[t] = n_seqs;
        }
        for (int g = 0; g < d->run.kvm.n_groups; g++)
            d->seqs[n_seqs].block_table[g] = kvm_table(&s->spec.kv, g);
        n_seqs++;
        s->spec.computed += count;
        if (s->spec.computed == upto[i]) {
            d->rows[n_rows] = t - 1;
            d->row_seq[n_rows++] = s;
        }
    }
    if (t == 0) return;
    const fwd_batch fb = {.n_tokens = t,
                          .tokens = d->tok,
                          .pos = d->pos,
                          .seq = d->seq,
                          .n_seqs = n_seqs,
                          .seqs = d->seqs,
                          /* an exit adapter takes the rows' states: no output head in the forward */
                          .n_out = d->exit ? 0 : n_rows,
                          .out_rows = d->rows};
    if (runner_apply(&d->run) || runner_run(&d->run, &fb, d->exit ? NULL : d->logits) ||
        (d->exit && forward_hidden(d->run.fwd, d->rows, n_rows, d->hidden))) {
        for (int i = 0; i < n; i++)
            draft_release(d, seqs[i]); /* recomputed later */
        return;
    }
    static const int8_t root = -1, first = 0; /* the adapter's one guess: a chain of one */
    if (d->exit)
        medusa_draft(d->exit, d->run.threads, d->hidden, NULL, n_rows, &root, &first, 1, d->guess,
                     want_prob ? d->prob : NULL);
    const int nv = d->m->hp.n_vocab;
    for (int r = 0; r < n_rows; r++) {
        sequence *s = d->row_seq[r];
        const float *logits = d->logits + (size_t)r * nv;
        int32_t best = d->exit ? d->guess[r] : sampler_argmax(logits, nv);
        if (!d->exit && want_prob) s->spec.conf[s->spec.n_draft] = softmax_prob(logits, nv, best);
        if (!d->exit && d->head.ids) best = d->head.ids[best];
        if (d->exit) s->spec.conf[s->spec.n_draft] = d->prob[r];
        s->spec.draft[s->spec.n_draft++] = best;
    }
}

void draft_propose(draft_runner *d, sequence **seqs, const int *want_in, int n, float p_min) {
    if (n > d->max_seqs) n = d->max_seqs;
    int *upto = d->upto, *want = d->want;
    memcpy(want, want_in, (size_t)n * sizeof *want);
    for (int i = 0; i < n; i++) {
        sync(d, seqs[i]);
        seqs[i]->spec.n_draft = 0;
        seqs[i]->spec.base = seqs[i]->n_tokens;
    }
    /* Round 0 catches up to the last known token; round r feeds draft r. */
    int max_want = 0;
    for (int i = 0; i < n; i++)
        max_want = want[i] > max_want ? want[i] : max_want;
    for (int r = 0; r < max_want; r++) {
        for (int i = 0; i < n; i++) {
            sequence *s = seqs[i];
            /* Drafting goes on while the sequence got every earlier draft. */
            const bool go = r < want[i] && s->spec.n_draft == r;
            upto[i] = go ? s->n_tokens + r : 0;
        }
        draft_round(d, seqs, upto, n, p_min > 0);
        if (p_min > 0) /* an unsure draft is verified, but ends the sequence's drafting */
            for (int i = 0; i < n; i++)
                if (seqs[i]->spec.n_draft == r + 1 && seqs[i]->spec.conf[r] < p_min) want[i] = r + 1;
    }
}
