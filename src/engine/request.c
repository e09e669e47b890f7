/* Requests and sequences; see request.h. */
#include "engine/request.h"

#include "util/error.h"
#include "util/array.h"

#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* A malloc'd copy of n items of `size` bytes; *out NULL when n is 0.
 * Returns -1 when out of memory. */
static int dup_items(const void *src, int n, size_t size, void *out) {
    void *d = NULL;
    if (n > 0) {
        if (!(d = malloc((size_t)n * size))) return -1;
        memcpy(d, src, (size_t)n * size);
    }
    memcpy(out, &d, sizeof d);
    return 0;
}

static int cmp_token(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int copy_params(request_params *dst, const request_params *src) {
    *dst = *src;
    dst->sampling.logit_bias = NULL;
    dst->stop_token_ids = NULL;
    dst->stop = NULL;
    if (src->constraint) constraint_retain(src->constraint);
    dst->allowed_token_ids = NULL;
    dst->bad_word_ids = NULL;
    dst->bad_word_lens = NULL;
    int n_bad_tokens = 0;
    for (int i = 0; i < src->n_bad_words; i++) n_bad_tokens += src->bad_word_lens[i];
    if (dup_items(src->sampling.logit_bias, src->sampling.n_logit_bias, sizeof *src->sampling.logit_bias,
                  &dst->sampling.logit_bias) ||
        dup_items(src->stop_token_ids, src->n_stop_token_ids, sizeof *src->stop_token_ids, &dst->stop_token_ids) ||
        dup_items(src->allowed_token_ids, src->n_allowed_token_ids, sizeof *src->allowed_token_ids,
                  &dst->allowed_token_ids) ||
        dup_items(src->bad_word_ids, n_bad_tokens, sizeof *src->bad_word_ids, &dst->bad_word_ids) ||
        dup_items(src->bad_word_lens, src->n_bad_words, sizeof *src->bad_word_lens, &dst->bad_word_lens))
        return -1;
    if (dst->n_allowed_token_ids > 0) /* sorted for token_bans_apply's merge */
        qsort((void *)dst->allowed_token_ids, (size_t)dst->n_allowed_token_ids, sizeof *dst->allowed_token_ids,
              cmp_token);
    if (src->n_stop > 0) {
        char **stops = calloc((size_t)src->n_stop, sizeof *stops);
        if (!stops) return -1;
        dst->stop = (const char *const *)stops;
        for (int i = 0; i < src->n_stop; i++)
            if (!(stops[i] = dup_str(src->stop[i]))) return -1;
    }
    return 0;
}

static void free_params(request_params *p) {
    constraint_release(p->constraint);
    free((void *)p->sampling.logit_bias);
    free((void *)p->stop_token_ids);
    free((void *)p->allowed_token_ids);
    free((void *)p->bad_word_ids);
    free((void *)p->bad_word_lens);
    if (p->stop)
        for (int i = 0; i < p->n_stop; i++) free((void *)p->stop[i]);
    free((void *)p->stop);
}

request *request_create(uint64_t id, const int32_t *prompt, int n_prompt, const request_params *params) {
    request *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->id = id;
    if (copy_params(&r->params, params)) goto oom;
    const bool beam = params->beam_width > 1;
    r->n_seqs = beam ? params->beam_width : params->n;
    r->n_live_beams = 1;
    r->seqs = calloc((size_t)r->n_seqs, sizeof *r->seqs);
    if (!r->seqs) goto oom;
    if (beam && !(r->hyps = calloc((size_t)params->beam_width + 1, sizeof *r->hyps))) goto oom;
    if (params->prompt_logprobs >= 0) {
        const size_t k = (size_t)(params->prompt_logprobs ? params->prompt_logprobs : 1);
        r->prompt_lps = calloc((size_t)n_prompt, sizeof *r->prompt_lps);
        r->prompt_top_tok = malloc((size_t)n_prompt * k * sizeof *r->prompt_top_tok);
        r->prompt_top_lp = malloc((size_t)n_prompt * k * sizeof *r->prompt_top_lp);
        if (!r->prompt_lps || !r->prompt_top_tok || !r->prompt_top_lp) goto oom;
        r->prompt_lps[0] = (token_logprobs){.token = prompt[0]};
    }
    for (int i = 0; i < r->n_seqs; i++) {
        sequence *s = &r->seqs[i];
        s->req = r;
        s->index = i;
        s->status = SEQ_WAITING;
        s->n_prompt = n_prompt;
        s->cap_tokens = n_prompt + (params->max_tokens < 4096 ? params->max_tokens : 4096) + 1;
        s->tokens = malloc((size_t)s->cap_tokens * sizeof *s->tokens);
        if (!s->tokens) goto oom;
        memcpy(s->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
        s->n_tokens = n_prompt;
        s->kv.keep_window_blocks = params->evict.policy != KV_EVICT_NONE;
        if (params->evict.policy == KV_EVICT_H2O &&
            !(s->attn_acc = calloc((size_t)params->evict.budget, sizeof *s->attn_acc)))
            goto oom;
        if (beam) {
            s->beam.cand_tok = malloc((size_t)params->beam_width * 2 * sizeof *s->beam.cand_tok);
            s->beam.cand_lp = malloc((size_t)params->beam_width * 2 * sizeof *s->beam.cand_lp);
            if (!s->beam.cand_tok || !s->beam.cand_lp) goto oom;
        }
        if (params->constraint && constraint_state_init(&s->cons, params->constraint)) {
            request_free(r);
            return NULL;
        }
        /* Sample i draws from its own stream of the request's seed. */
        rng_seed(&s->rng, params->sampling.seed + 0x9e3779b97f4a7c15ull * (uint64_t)i);
    }
    return r;
oom:
    request_free(r);
    err_oom("out of memory creating a request");
    return NULL;
}

void request_free(request *r) {
    if (!r) return;
    if (r->seqs)
        for (int i = 0; i < r->n_seqs; i++) {
            free(r->seqs[i].tokens);
            free(r->seqs[i].held);
            free(r->seqs[i].beam.cand_tok);
            free(r->seqs[i].beam.cand_lp);
            if (r->seqs[i].cons.c) constraint_state_free(&r->seqs[i].cons);
            free(r->seqs[i].attn_acc);
        }
    if (r->hyps)
        for (int i = 0; i < r->n_hyps; i++) free(r->hyps[i].tokens);
    free(r->hyps);
    free(r->prompt_lps);
    free(r->prompt_top_tok);
    free(r->prompt_top_lp);
    free(r->seqs);
    free_params(&r->params);
    free(r);
}

int seq_append_token(sequence *s, int32_t tok) {
    if (array_reserve((void **)&s->tokens, &s->cap_tokens, (size_t)s->n_tokens + 1, sizeof *s->tokens)) return -1;
    s->tokens[s->n_tokens++] = tok;
    return 0;
}

int seq_hold_text(sequence *s, const char *text, size_t n) {
    if (array_reserve((void **)&s->held, &s->cap_held, s->n_held + n + 1, 1)) return -1;
    memcpy(s->held + s->n_held, text, n);
    s->n_held += n;
    s->held[s->n_held] = 0;
    return 0;
}

int seq_n_output(const sequence *s) { return s->n_tokens - s->n_prompt; }

bool seq_wants_prompt_logits(const sequence *s) { return s->req->prompt_lps && !s->req->prompt_lps_done; }

void seq_attach_prompt_logprobs(sequence *s, engine_output *out) {
    if (!s->req->prompt_lps_done || s->prompt_lps_sent) return;
    out->prompt_logprobs = s->req->prompt_lps;
    s->prompt_lps_sent = true;
}
