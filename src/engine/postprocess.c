/* What happens to a step's logits, after the runner's forward pass (the
 * engine loop is engine.c): every scheduled sequence counts the tokens it
 * computed; then, for each one that reached the end of its known tokens, in
 * batch order: a speculating sequence verifies its drafts (verify_drafts: each
 * row sampled as in plain decoding, see the top of engine.c), a beam collects
 * its row (beam.c), sample 0 of an n > 1 request forks the others, and every
 * other sequence samples and reports (sample_and_report: the logits
 * processors, the sampler, logprobs, detokenized text, stop conditions, one
 * output to the request's callback). */
#include "engine/engine_internal.h"

#include "engine/logprobs.h"
#include "engine/ngram.h"
#include "engine/spec.h"
#include "engine/spec_tree.h"
#include "engine/stop_strings.h"
#include "engine/token_bans.h"
#include "kv/kv_evict.h"
#include "kv/kv_manager.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/time.h"
#include "util/top_k.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void compute_logprobs(const float *raw, int nv, int32_t tok, int n_top, token_logprobs *lp,
                             int32_t *top_tok, float *top_lp) {
    const float lse = logprobs_logsumexp(raw, nv);
    const int k = top_k_indices(raw, nv, n_top, NULL, NULL, top_tok);
    for (int i = 0; i < k; i++) top_lp[i] = raw[top_tok[i]] - lse;
    *lp = (token_logprobs){.token = tok, .logprob = raw[tok] - lse, .n_top = k, .top_tokens = top_tok,
                           .top_logprobs = top_lp};
}

static bool is_stop_token(const request_params *p, int32_t tok) {
    for (int i = 0; i < p->n_stop_token_ids; i++)
        if (p->stop_token_ids[i] == tok) return true;
    return false;
}

/* Ends the sequence with an error: what every failure while sampling does. */
static int32_t fail(engine *e, sequence *s) {
    engine_finish_seq(e, s, FINISH_ERROR, NULL, NULL, "", 0);
    return -1;
}

/* The request's grammar went past a limit (too ambiguous, too deep): the
 * client's to know (a 400 naming it), not a server fault; out of memory is. */
static int32_t fail_grammar(engine *e, sequence *s) {
    if (!err_is_oom()) snprintf(s->error, sizeof s->error, "structured output: %s", err_get());
    return fail(e, s);
}

/* The logits processors before the sampler's own (penalties, bias,
 * temperature, top-k/top-p/min-p in sampler.c), in this order: min_tokens
 * hides the end-of-generation and stop tokens, then the request's allowed and
 * bad words (token_bans.c), then the grammar's mask (seq_constraint.c). 0, or -1
 * when the constraint failed. */
static int process_logits(engine *e, sequence *s, float *logits) {
    const request_params *p = &s->req->params;
    const int nv = e->m->hp.n_vocab;
    if (seq_n_output(s) < p->min_tokens) {
        for (int i = 0; i < e->n_eog_ids; i++) logits[e->eog_ids[i]] = -INFINITY;
        for (int i = 0; i < p->n_stop_token_ids; i++)
            if (p->stop_token_ids[i] >= 0 && p->stop_token_ids[i] < nv) logits[p->stop_token_ids[i]] = -INFINITY;
    }
    token_bans_apply(p, s->tokens + s->n_prompt, seq_n_output(s), logits, nv);
    return p->constraint ? constrain_logits(&e->cons, &s->cons, logits, nv) : 0;
}

/* Samples the next token of `s` from `logits` (modified), then reports it.
 * Returns the token, or -1 when the sequence ended with an error. */
static int32_t sample_and_report(engine *e, sequence *s, float *logits) {
    request *r = s->req;
    const request_params *p = &r->params;
    const int nv = e->m->hp.n_vocab;
    token_logprobs lp;
    int32_t top_tok[MAX_LOGPROBS];
    float top_lp[MAX_LOGPROBS];
    /* Logprobs are of the model's distribution, before bias, penalties and temperature. */
    if (p->logprobs >= 0) memcpy(e->raw, logits, (size_t)nv * sizeof *logits);
    if (process_logits(e, s, logits)) return fail_grammar(e, s);
    const int32_t tok = sampler_sample(e->smp, &p->sampling, &s->rng, logits, s->tokens, s->n_prompt,
                                       s->tokens + s->n_prompt, seq_n_output(s));
    if (tok < 0) return fail(e, s); /* no token was possible: the model gave NaN or -inf everywhere */
    if (p->constraint && constrain_advance(&e->cons, &s->cons, tok)) return fail_grammar(e, s);
    if (p->logprobs >= 0) compute_logprobs(e->raw, nv, tok, p->logprobs, &lp, top_tok, top_lp);
    if (seq_append_token(s, tok)) return fail(e, s);
    if (r->t_first_token == 0) r->t_first_token = now_seconds();
    pthread_mutex_lock(&e->stats_mu);
    e->stats.generation_tokens++;
    pthread_mutex_unlock(&e->stats_mu);

    finish_reason why = FINISH_NONE;
    bool by_string = false;
    size_t release = 0, stop_len = 0;
    if (is_stop_token(p, tok) || (!p->ignore_eos && tokenizer_is_eog(e->m->tok, tok)))
        why = FINISH_STOP; /* the stop token's own text is not part of the output, unless asked for */
    if (why == FINISH_NONE || p->include_stop_str_in_output) {
        size_t n = detok_push(e->m->tok, &s->detok, tok, p->include_special_text, e->text, e->text_cap);
        if (seq_hold_text(s, e->text, n)) return fail(e, s);
        if (why != FINISH_NONE || p->n_stop == 0) release = s->n_held;
        else if (stop_scan(p->stop, p->n_stop, s->held, s->n_held, &release, &stop_len))
            why = FINISH_STOP, by_string = true;
        if (by_string && p->include_stop_str_in_output) release += stop_len;
    }
    /* An evicting sequence's positions stay below its budget: only max_tokens ends it. */
    const bool at_max_len = !seq_evicts(s) && s->n_tokens >= e->cfg.max_model_len;
    if (why == FINISH_NONE && (seq_n_output(s) >= p->max_tokens || at_max_len))
        why = FINISH_LENGTH;
    if (why != FINISH_NONE && !by_string) {
        /* The stream ends here: what was held back cannot become a stop string now. */
        size_t n = detok_flush(&s->detok, e->text, e->text_cap);
        seq_hold_text(s, e->text, n);
        release = s->n_held;
    }
    const token_logprobs *lpp = p->logprobs >= 0 ? &lp : NULL;
    if (why != FINISH_NONE) {
        engine_finish_seq(e, s, why, &s->tokens[s->n_tokens - 1], lpp, s->held ? s->held : "", release);
        return tok;
    }
    engine_output out = {.request_id = r->id, .index = s->index, .n_new_tokens = 1,
                         .new_tokens = &s->tokens[s->n_tokens - 1], .logprobs = lpp,
                         .text = s->held ? s->held : "", .text_len = release, .n_prompt_tokens = s->n_prompt,
                         .n_cached_tokens = r->n_cached_tokens, .n_output_tokens = seq_n_output(s),
                         .n_evicted_tokens = s->n_evicted};
    seq_attach_prompt_logprobs(s, &out);
    if (r->on_output) r->on_output(r->user, &out);
    memmove(s->held, s->held + release, s->n_held - release);
    s->n_held -= release;
    if (s->held) s->held[s->n_held] = 0;
    return tok;
}

/* Sample 0 finished its prompt: create samples 1..n-1 sharing its blocks. */
static void fork_samples(engine *e, sequence *s0, const float *logits) {
    request *r = s0->req;
    r->forked = true;
    const int nv = e->m->hp.n_vocab;
    for (int i = 1; i < r->n_seqs; i++) {
        sequence *c = &r->seqs[i];
        c->n_computed = s0->n_computed;
        evict_fork(s0, c);
        if (kvm_fork(&e->run.kvm, &s0->kv, &c->kv) || sched_add_running(&e->sched, c)) {
            engine_finish_seq(e, c, FINISH_ERROR, NULL, NULL, "", 0);
            continue;
        }
        memcpy(e->scratch, logits, (size_t)nv * sizeof *logits);
        sample_and_report(e, c, e->scratch);
    }
}

/* ---- speculative decoding ---- */

/* n_draft drafts reaching n_deep positions past the last token (a chain's
 * n_draft; a tree's depth), of which n_accepted were kept: per position,
 * how often a draft stood there and how often it was kept. */
static void count_verification(engine *e, int n_draft, int n_deep, int n_accepted, bool lookup) {
    pthread_mutex_lock(&e->stats_mu);
    e->stats.spec_drafts++;
    if (lookup) e->stats.spec_lookup_tokens += (uint64_t)n_draft, e->stats.spec_lookup_accepted += (uint64_t)n_accepted;
    e->stats.spec_draft_tokens += (uint64_t)n_draft;
    e->stats.spec_accepted_tokens += (uint64_t)n_accepted;
    for (int j = 0; j < n_accepted; j++) e->stats.spec_accepted_per_pos[j]++;
    for (int j = 0; j < n_deep; j++) e->stats.spec_drafted_per_pos[j]++;
    pthread_mutex_unlock(&e->stats_mu);
}

/* spec_walk's sampler: a row of the step's logits, sampled and emitted. */
typedef struct {
    engine *e;
    sequence *s;
    float *rows;
} walk_rows;

static int32_t sample_walk_row(void *user, int row, bool *stop) {
    walk_rows *w = user;
    const int32_t tok = sample_and_report(w->e, w->s, w->rows + (size_t)row * w->e->m->hp.n_vocab);
    *stop = w->s->status == SEQ_FINISHED;
    return tok;
}

/* A tree's accepted drafts path[0..n) moved from their node slots (base + 1
 * + path[i]) to the positions that follow the last token (base + 1 + i);
 * their keys were rotated at those positions already. Nothing moves when
 * the path is the chain of the first n drafts. */
static int keep_path(engine *e, sequence *s, int base, const int *path, int n) {
    int i = 0;
    while (i < n && path[i] == i) i++;
    if (i == n) return 0;
    int32_t *keep = malloc((size_t)(base + 1 + n) * sizeof *keep);
    if (!keep) return err_oom("out of memory keeping a draft tree's path");
    for (int p = 0; p <= base; p++) keep[p] = p;
    for (int j = 0; j < n; j++) keep[base + 1 + j] = base + 1 + path[j];
    const int rc = kvm_compact(&e->run.kvm, &s->kv, keep, base + 1 + n, false);
    free(keep);
    if (!rc) {
        pthread_mutex_lock(&e->stats_mu);
        e->stats.spec_paths_moved++;
        pthread_mutex_unlock(&e->stats_mu);
    }
    return rc;
}

/* Medusa: a sequence just sampled from logits row i that decodes next gets
 * guesses from that row's hidden state (spec_medusa.h), unless too many
 * run for the next step to speculate, or n-gram lookup, tried first, will
 * draft for it (its text is what the next step's lookup reads). */
static void note_for_medusa(engine *e, sequence *s, int i) {
    const spec_config *c = &e->cfg.spec;
    if (!e->medusa || s->status == SEQ_FINISHED || s->n_tokens - s->n_computed != 1) return;
    if (s->req->params.beam_width > 1 || e->sched.running.n > c->disable_by_batch_size) return;
    int32_t found[1];
    if (c->lookup_first && ngram_propose(s->tokens, s->n_tokens, c->prompt_lookup_min, c->prompt_lookup_max, 1, found))
        return;
    medusa_drafter_note(e->medusa, s, e->b_rows[i]);
}

/* Walks a speculating sequence's drafts from its last token's row
 * (spec_walk: the output is the one without speculation), then moves a
 * tree's accepted path into place and rolls its KV back to the verified
 * tokens. */
static void verify_drafts(engine *e, sequence *s, float *rows, int first_row) {
    const int n_draft = s->spec.n_draft;
    s->spec.n_draft = 0;
    if (s->status == SEQ_FINISHED) return;
    const int computed = s->n_computed + s->n_scheduled; /* positions the forward wrote */
    const int base = s->n_tokens - 1 - s->n_evicted; /* the last token's KV position: the root */
    const int8_t *parent = s->spec.tree ? s->spec.parent : NULL;
    int32_t tok[SPEC_MAX_TOKENS];
    int path[SPEC_MAX_TOKENS], deep = 0, depth[SPEC_MAX_TOKENS] = {0};
    for (int j = 0; j < n_draft; j++) {
        tok[j] = s->spec.draft[j];
        const int up = parent ? parent[j] : j - 1;
        depth[j] = up < 0 ? 1 : depth[up] + 1; /* parents come first */
        if (depth[j] > deep) deep = depth[j];
    }
    walk_rows w = {e, s, rows};
    const int accepted = spec_walk(n_draft, tok, parent, sample_walk_row, &w, path);
    count_verification(e, n_draft, deep, accepted, s->spec.lookup);
    /* With draft_p_min the drafts' own probabilities end each chain, so K
     * stays put: cutting it after a rejection as well would end the next
     * chain early however sure its drafts are (bench/RESULTS.md, 2026-12-07). */
    const spec_config *c = &e->cfg.spec;
    if (s->spec.lookup) /* n-gram lookup's own K, adapted as method ngram's */
        s->spec.lookup_k = spec_next_k(s->spec.lookup_k, spec_lookup_max(c), n_draft, accepted);
    else if (!s->spec.tree && c->draft_p_min == 0)
        s->spec.k = spec_next_k(s->spec.k, c->num_speculative_tokens, n_draft, accepted);
    if (e->draft && !s->spec.lookup) { /* the back-off is the draft model's, not n-gram lookup's */
        s->spec.misses = accepted ? 0 : s->spec.misses + 1;
        s->spec.skip = spec_backoff_steps(s->spec.misses);
    }
    if (s->status == SEQ_FINISHED) return; /* its blocks are released */
    if (s->spec.tree && keep_path(e, s, base, path, accepted)) {
        engine_finish_seq(e, s, FINISH_ERROR, NULL, NULL, "", 0);
        return;
    }
    /* Verified: everything before the token just emitted. */
    s->n_computed = computed < s->n_tokens - 1 ? computed : s->n_tokens - 1;
    kvm_truncate(&e->run.kvm, &s->kv, s->n_computed);
    kvm_commit(&e->run.kvm, &s->kv, s->tokens, s->n_computed);
    if (e->draft) draft_rollback(e->draft, s);
    note_for_medusa(e, s, accepted ? first_row + 1 + path[accepted - 1] : first_row); /* the row the last token came from */
}

/* ---- the step's logits ---- */

void postprocess(engine *e, int n_rows) {
    if (prompt_lp_collect(&e->prompt_lp, e->run.fwd, e->run.threads, e->max_out, e->m->hp.n_vocab, e->batch.seqs,
                          e->batch.n_seqs))
        for (int i = 0; i < e->batch.n_seqs; i++)
            if (seq_wants_prompt_logits(e->batch.seqs[i])) engine_finish_request(e, e->batch.seqs[i]->req, FINISH_ERROR);
    for (int i = 0; i < e->batch.n_seqs; i++) {
        sequence *s = e->batch.seqs[i];
        if (s->spec.n_draft > 0) continue; /* verify_drafts decides what is computed */
        if (s->status == SEQ_FINISHED) continue; /* its prompt logprobs failed: its blocks are gone */
        s->n_computed += s->n_scheduled;
        /* Once tokens were evicted, blocks no longer follow the token chain. */
        if (s->n_evicted == 0) kvm_commit(&e->run.kvm, &s->kv, s->tokens, s->n_computed);
    }
    const int nv = e->m->hp.n_vocab;
    for (int i = 0; i < n_rows;) {
        sequence *s = e->b_row_seq[i];
        float *row = e->logits + (size_t)i * nv;
        const int first = i;
        i += 1 + s->spec.n_draft; /* a speculating sequence has a row per draft besides its own */
        if (s->spec.n_draft > 0) {
            verify_drafts(e, s, row, first);
            continue;
        }
        if (s->status == SEQ_FINISHED) continue; /* aborted while running */
        if (s->req->params.max_tokens == 0) { /* only the prompt, for its logprobs */
            engine_finish_request(e, s->req, FINISH_LENGTH);
            continue;
        }
        if (s->req->params.beam_width > 1) {
            beam_collect(&e->beam, s, row);
            continue;
        }
        if (s->index == 0 && s->req->n_seqs > 1 && !s->req->forked) fork_samples(e, s, row);
        sample_and_report(e, s, row);
        note_for_medusa(e, s, first);
    }
    if (e->medusa) medusa_drafter_run(e->medusa, e->run.fwd, e->run.threads);
    beam_advance(&e->beam, e->live, e->n_live);
}
