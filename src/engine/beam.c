/* Beam search on the engine's sequences. A beam request keeps beam_width
 * sequences; each step every live beam computes one token, then its 2 * width
 * best continuations (by the model's log-probabilities) are collected, and
 * once all live beams have theirs, the best width continuations become the
 * next beams. A continuation of a parent is a fork of the parent's KV blocks
 * (shared, the last partial block copied on write when the child writes), so
 * beams that share history share memory. Continuations ending in an
 * end-of-generation token become finished hypotheses. The search ends at
 * max_tokens, or when no live beam can beat the worst of beam_width finished
 * hypotheses; the n best hypotheses are reported, each as one output. */
#include "engine/beam.h"

#include "engine/finish.h"
#include "engine/logprobs.h"
#include "tokenizer/detok.h"
#include "util/top_k.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double score; /* cumulative logprob */
    int parent;
    int32_t token;
} beam_cand;

static bool is_eog(const void *tok, int32_t token) { return tokenizer_is_eog(tok, token); }

void beam_collect(const beam_env *env, sequence *s, const float *logits) {
    const request_params *p = &s->req->params;
    const float lse = logprobs_logsumexp(logits, env->n_vocab);
    /* Before min_tokens no continuation may end the text. */
    const top_k_skip_fn skip = seq_n_output(s) < p->min_tokens ? is_eog : NULL;
    const int n = top_k_indices(logits, env->n_vocab, 2 * p->beam_width, skip, env->tok, s->beam.cand_tok);
    for (int i = 0; i < n; i++) s->beam.cand_lp[i] = logits[s->beam.cand_tok[i]] - lse;
    s->beam.n_cand = n;
    s->beam.pending = true;
}

static int cmp_cand(const void *a, const void *b) {
    const beam_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->parent != y->parent) return x->parent - y->parent;
    return x->token - y->token;
}

static double penalized(const request_params *p, double cum, int len) {
    return cum / pow(len > 0 ? len : 1, p->length_penalty);
}

/* Keeps the beam_width best hypotheses (by score). */
static void add_hyp(request *r, const int32_t *out, int n, double score, finish_reason why) {
    const int cap = r->params.beam_width;
    if (r->n_hyps == cap) {
        int worst = 0;
        for (int i = 1; i < r->n_hyps; i++)
            if (r->hyps[i].score < r->hyps[worst].score) worst = i;
        if (r->hyps[worst].score >= score) return;
        free(r->hyps[worst].tokens);
        r->hyps[worst] = r->hyps[--r->n_hyps];
    }
    int32_t *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    if (!t) return;
    memcpy(t, out, (size_t)n * sizeof *t);
    r->hyps[r->n_hyps++] = (beam_hyp){.tokens = t, .n = n, .score = score, .why = why};
}

static double worst_hyp(const request *r) {
    double w = INFINITY;
    for (int i = 0; i < r->n_hyps; i++)
        if (r->hyps[i].score < w) w = r->hyps[i].score;
    return w;
}

static int cmp_hyp(const void *a, const void *b) {
    const beam_hyp *x = a, *y = b;
    return x->score > y->score ? -1 : x->score < y->score;
}

/* Reports the n best hypotheses and ends the request. */
static void finish_beams(const beam_env *env, request *r) {
    qsort(r->hyps, (size_t)r->n_hyps, sizeof *r->hyps, cmp_hyp);
    for (int i = 0; i < r->n_seqs; i++) {
        sequence *s = &r->seqs[i];
        const bool report = i < r->params.n;
        if (!report || i >= r->n_hyps) {
            finish_sequence(env->sched, s, FINISH_LENGTH, NULL, 0, NULL, "", 0, report);
            continue;
        }
        const beam_hyp *h = &r->hyps[i];
        /* The reported sequence is the hypothesis: its tokens replace the slot's. */
        s->n_tokens = s->n_prompt;
        for (int k = 0; k < h->n; k++) seq_append_token(s, h->tokens[k]);
        size_t len = 0;
        detok_state ds = {0};
        for (int k = 0; k < h->n; k++) {
            len += detok_push(env->tok, &ds, h->tokens[k], r->params.include_special_text, env->text + len,
                              env->text_cap - len);
            if (env->text_cap - len < 256) break; /* keep room for the next piece */
        }
        len += detok_flush(&ds, env->text + len, env->text_cap - len);
        finish_sequence(env->sched, s, h->why, h->tokens, h->n, NULL, env->text, len, true);
    }
}

/* Makes the chosen continuations the new live beams. */
static int rebuild_beams(const beam_env *env, request *r, const beam_cand *next, int n_next) {
    seq_kv *kv = calloc((size_t)n_next, sizeof *kv);
    int32_t **toks = calloc((size_t)n_next, sizeof *toks);
    int *n_toks = calloc((size_t)n_next, sizeof *n_toks), *computed = calloc((size_t)n_next, sizeof *computed);
    int rc = (!kv || !toks || !n_toks || !computed) ? -1 : 0;
    for (int j = 0; !rc && j < n_next; j++) {
        const sequence *par = &r->seqs[next[j].parent];
        toks[j] = malloc((size_t)(par->n_tokens + 1) * sizeof **toks);
        if (!toks[j] || kvm_fork(env->kvm, &par->kv, &kv[j])) {
            rc = -1;
            break;
        }
        memcpy(toks[j], par->tokens, (size_t)par->n_tokens * sizeof **toks);
        toks[j][par->n_tokens] = next[j].token;
        n_toks[j] = par->n_tokens + 1;
        computed[j] = par->n_computed;
    }
    if (!rc) {
        /* Old beams go; their blocks stay alive through the forks. */
        for (int i = 0; i < r->n_live_beams; i++) sched_remove(env->sched, &r->seqs[i]);
        for (int j = 0; j < n_next; j++) {
            sequence *s = &r->seqs[j];
            free(s->tokens);
            s->tokens = toks[j];
            s->cap_tokens = s->n_tokens = n_toks[j];
            toks[j] = NULL;
            s->kv = kv[j];
            memset(&kv[j], 0, sizeof kv[j]);
            s->n_computed = computed[j];
            s->beam.cum_logprob = next[j].score;
            s->beam.pending = false;
            sched_add_running(env->sched, s);
        }
        r->n_live_beams = n_next;
        r->forked = true;
    }
    for (int j = 0; j < n_next; j++) {
        free(toks[j]);
        if (kv) kvm_release(env->kvm, &kv[j]);
    }
    free(kv), free(toks), free(n_toks), free(computed);
    return rc;
}

static bool is_stop(const beam_env *env, const request_params *p, int32_t tok) {
    for (int i = 0; i < p->n_stop_token_ids; i++)
        if (p->stop_token_ids[i] == tok) return true;
    return !p->ignore_eos && tokenizer_is_eog(env->tok, tok);
}

static void advance_request(const beam_env *env, request *r) {
    const request_params *p = &r->params;
    const int width = p->beam_width;
    int n_cand = 0;
    for (int i = 0; i < r->n_live_beams; i++) n_cand += r->seqs[i].beam.n_cand;
    beam_cand *c = malloc((size_t)(n_cand ? n_cand : 1) * sizeof *c);
    if (!c) {
        finish_beams(env, r);
        return;
    }
    n_cand = 0;
    for (int i = 0; i < r->n_live_beams; i++)
        for (int k = 0; k < r->seqs[i].beam.n_cand; k++)
            c[n_cand++] = (beam_cand){r->seqs[i].beam.cum_logprob + r->seqs[i].beam.cand_lp[k], i, r->seqs[i].beam.cand_tok[k]};
    qsort(c, (size_t)n_cand, sizeof *c, cmp_cand);
    const int out_len = seq_n_output(&r->seqs[0]); /* the same for every live beam */
    beam_cand next[2 * 64];
    int n_next = 0;
    for (int k = 0; k < n_cand && n_next < width; k++) {
        const sequence *par = &r->seqs[c[k].parent];
        if (is_stop(env, p, c[k].token)) /* the stop token is not part of the text; its logprob counts */
            add_hyp(r, par->tokens + par->n_prompt, out_len, penalized(p, c[k].score, out_len + 1), FINISH_STOP);
        else
            next[n_next++] = c[k];
    }
    free(c);
    const bool at_limit = out_len + 1 >= p->max_tokens || r->seqs[0].n_tokens + 1 >= env->max_model_len;
    bool done = n_next == 0;
    if (!done && r->n_hyps >= width && penalized(p, next[0].score, out_len + 1) <= worst_hyp(r)) done = true;
    if (!done && at_limit) {
        /* The last step: the continuations are hypotheses that ran out of length. */
        for (int j = 0; j < n_next; j++) {
            const sequence *par = &r->seqs[next[j].parent];
            int32_t *t = malloc((size_t)(out_len + 1) * sizeof *t);
            if (!t) continue;
            memcpy(t, par->tokens + par->n_prompt, (size_t)out_len * sizeof *t);
            t[out_len] = next[j].token;
            add_hyp(r, t, out_len + 1, penalized(p, next[j].score, out_len + 1), FINISH_LENGTH);
            free(t);
        }
        done = true;
    }
    if (done || rebuild_beams(env, r, next, n_next)) finish_beams(env, r);
}

void beam_advance(const beam_env *env, request *const *live, int n_live) {
    for (int i = 0; i < n_live; i++) {
        request *r = live[i];
        if (r->params.beam_width <= 1 || r->n_finished == r->n_seqs) continue;
        bool ready = r->n_live_beams > 0;
        for (int k = 0; k < r->n_live_beams && ready; k++)
            ready = r->seqs[k].status == SEQ_RUNNING && r->seqs[k].beam.pending;
        if (ready) advance_request(env, r);
    }
}
