/* See gen.h. */
#include "server/generation.h"

#include "util/error.h"
#include "util/array.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Also takes apart a gen that gen_create could not finish (n_prompts and n
 * still 0, the eventfd maybe -1). */
static void gen_destroy(gen *g) {
    if (g->tap_free) g->tap_free(g->tap_arg);
    for (int i = 0; i < g->n_prompts * g->n; i++) {
        buf_free(&g->choices[i].text);
        free(g->choices[i].lps);
    }
    if (g->efd >= 0) close(g->efd);
    pthread_mutex_destroy(&g->mu);
    free(g->subs);
    free(g->prompt_tokens);
    free(g->cached_tokens);
    if (g->prompt_lps)
        for (int i = 0; i < g->n_prompts; i++) free(g->prompt_lps[i].items);
    free(g->prompt_lps);
    free(g->choices);
    free(g);
}

gen *gen_create(engine *e, gen_counters *counters, int n_prompts, int n) {
    gen *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    g->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->subs = calloc((size_t)n_prompts, sizeof *g->subs);
    g->prompt_tokens = calloc((size_t)n_prompts, sizeof *g->prompt_tokens);
    g->cached_tokens = calloc((size_t)n_prompts, sizeof *g->cached_tokens);
    g->prompt_lps = calloc((size_t)n_prompts, sizeof *g->prompt_lps);
    g->choices = calloc((size_t)n_prompts * (size_t)n, sizeof *g->choices);
    if (g->efd < 0 || !g->subs || !g->prompt_tokens || !g->cached_tokens || !g->prompt_lps || !g->choices) {
        gen_destroy(g);
        return NULL;
    }
    g->refs = 1;
    g->e = e;
    g->counters = counters;
    g->n_prompts = n_prompts;
    g->n = n;
    g->n_unfinished = n_prompts * n;
    for (int i = 0; i < n_prompts; i++) g->subs[i] = (gen_sub){.g = g, .prompt = i};
    return g;
}

static void unref(gen *g) {
    pthread_mutex_lock(&g->mu);
    const int left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left == 0) gen_destroy(g);
}

void gen_release(gen *g) {
    if (g) unref(g);
}

static void wake(gen *g) {
    const uint64_t one = 1;
    /* Never blocks: the eventfd is non-blocking and its counter cannot
     * overflow in practice. */
    ssize_t w = write(g->efd, &one, sizeof one);
    (void)w;
}

static void copy_logprob(gen_logprob *d, const token_logprobs *lp) {
    d->token = lp->token;
    d->logprob = lp->logprob;
    d->rank = lp->rank;
    d->n_top = lp->n_top < API_MAX_LOGPROBS ? lp->n_top : API_MAX_LOGPROBS;
    for (int i = 0; i < d->n_top; i++) {
        d->top_tok[i] = lp->top_tokens[i];
        d->top_lp[i] = lp->top_logprobs[i];
    }
}

static void push_logprobs(gen_choice *c, const token_logprobs *lp, bool *oom) {
    if (array_reserve((void **)&c->lps, &c->cap_lps, (size_t)c->n_lps + 1, sizeof *c->lps)) {
        *oom = true;
        return;
    }
    copy_logprob(&c->lps[c->n_lps++], lp);
}

void gen_keep_prompt_logprobs(gen_prompt_lps *p, const token_logprobs *lps, int n, bool *oom) {
    if (p->items || n <= 0) return;
    if (!(p->items = malloc((size_t)n * sizeof *p->items))) {
        *oom = true;
        return;
    }
    for (int i = 0; i < n; i++) copy_logprob(&p->items[i], &lps[i]);
    p->n = n;
}

/* Runs on the engine thread (or the thread of a replay): copy, count,
 * signal; nothing here may block on the HTTP side. Returns whether it was the
 * last output of sub's samples. */
static bool apply_output(gen_sub *sub, const engine_output *o) {
    gen *g = sub->g;
    bool last = false;
    pthread_mutex_lock(&g->mu);
    if (g->tap) g->tap(g->tap_arg, sub->prompt, o);
    if (o->index >= 0 && o->index < g->n) {
        gen_choice *c = &g->choices[sub->prompt * g->n + o->index];
        buf_append(&c->text, o->text, o->text_len);
        if (c->text.oom) g->oom = true;
        if (o->logprobs)
            for (int i = 0; i < o->n_new_tokens; i++) push_logprobs(c, &o->logprobs[i], &g->oom);
        if (o->prompt_logprobs)
            gen_keep_prompt_logprobs(&g->prompt_lps[sub->prompt], o->prompt_logprobs, o->n_prompt_tokens, &g->oom);
        c->n_tokens = o->n_output_tokens;
        c->n_evicted = o->n_evicted_tokens;
        g->prompt_tokens[sub->prompt] = o->n_prompt_tokens;
        g->cached_tokens[sub->prompt] = o->n_cached_tokens;
        if (o->finished && !c->finished) {
            c->finished = true;
            c->reason = o->reason;
            if (o->error) snprintf(c->error, sizeof c->error, "%s", o->error);
            g->n_unfinished--;
            if (g->counters && o->reason >= 0 && o->reason <= FINISH_ERROR)
                atomic_fetch_add(&g->counters->finished[o->reason], 1);
            last = ++sub->n_finished == g->n;
        }
    }
    void (*waker)(http_req *) = g->waker;
    http_req *waker_arg = g->waker_arg;
    g->waker = NULL;
    pthread_mutex_unlock(&g->mu);
    wake(g);
    /* The stream it wakes is paused until then, so its connection (and
     * waker_arg) cannot go away before this call. */
    if (waker) waker(waker_arg);
    return last;
}

static void on_output(void *user, const engine_output *o) {
    gen_sub *sub = user;
    /* After its last sample finished, the engine never uses `user` again. */
    if (apply_output(sub, o)) unref(sub->g);
}

void gen_feed(gen *g, int prompt, const engine_output *o) { (void)apply_output(&g->subs[prompt], o); }

void gen_set_tap(gen *g, gen_tap_fn tap, void *arg, void (*free_arg)(void *)) {
    g->tap = tap;
    g->tap_arg = arg;
    g->tap_free = free_arg;
}

void *gen_take_tap(gen *g) {
    void *arg = g->tap_arg;
    g->tap = NULL;
    g->tap_arg = NULL;
    g->tap_free = NULL;
    return arg;
}

bool gen_succeeded(const gen *g) {
    if (g->oom || g->n_unfinished > 0) return false;
    for (int i = 0; i < g->n_prompts * g->n; i++)
        if (g->choices[i].reason != FINISH_STOP && g->choices[i].reason != FINISH_LENGTH) return false;
    return true;
}

int gen_submit(gen *g, int prompt, const int32_t *tokens, int n_tokens, const request_params *rp) {
    gen_sub *sub = &g->subs[prompt];
    pthread_mutex_lock(&g->mu);
    g->refs++;
    pthread_mutex_unlock(&g->mu);
    uint64_t id;
    if (engine_submit(g->e, tokens, n_tokens, rp, on_output, sub, &id)) {
        unref(g);
        return -1;
    }
    sub->id = id;
    sub->submitted = true;
    return 0;
}

void gen_abort(gen *g) {
    for (int i = 0; i < g->n_prompts; i++)
        if (g->subs[i].submitted) engine_abort(g->e, g->subs[i].id);
}

void gen_arm_waker(gen *g, void (*waker)(http_req *), http_req *arg) {
    g->waker = waker;
    g->waker_arg = arg;
}

gen_wait_result gen_wait(gen *g, http_req *r, int timeout_ms) {
    struct pollfd p[2] = {{.fd = g->efd, .events = POLLIN}, http_client_pollfd(r)};
    const int n = poll(p, 2, timeout_ms);
    if (n <= 0) return GEN_TIMEOUT;
    if (p[1].revents && http_client_gone(r, p[1].revents)) return GEN_DISCONNECTED;
    if (p[0].revents & POLLIN) {
        uint64_t v;
        ssize_t rd = read(g->efd, &v, sizeof v);
        (void)rd;
        return GEN_WOKEN;
    }
    return GEN_TIMEOUT;
}
