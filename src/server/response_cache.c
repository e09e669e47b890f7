/* See response_cache.h. An lru_map of entries; one mutex guards it and the
 * reference counts. An entry's recorded outputs never
 * change once it is in the table, so replays read them without the lock. */
#include "server/response_cache.h"

#include "util/buf.h"
#include "util/lru_map.h"
#include "util/array.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Request fields left out of the key besides the ignored ones: they choose
 * how the same output is delivered, not what it is. */
static const char *const DELIVERY_FIELDS[] = {
    "model",          /* an alias of the model that answers; its served name goes in instead */
    "stream",         /* a hit replays as a whole body or as SSE chunks alike */
    "stream_options", /* include_usage adds a usage chunk, built from the same counts */
};

/* One engine output as it came, its text and logprobs in the entry's arrays. */
typedef struct {
    int prompt, index;
    int n_new_tokens;
    size_t text_off, text_len;
    size_t lp_off;
    int n_lps; /* logprobs of the new tokens; 0 when none were asked for */
    bool finished;
    finish_reason reason;
    int n_prompt_tokens, n_cached_tokens, n_output_tokens;
} recorded_output;

typedef struct {
    lru_node node; /* first: an lru_node * is the entry's address */
    char *key;
    int refs; /* one while in the table, one per replay */
    recorded_output *outs;
    size_t n_outs, cap_outs;
    buf text;
    gen_logprob *lps;
    size_t n_lps, cap_lps;
    bool oom;
} entry;

struct response_cache {
    pthread_mutex_t mu;
    lru_map map;
    uint64_t hits, misses;
};

struct response_replay {
    response_cache *c;
    entry *e;
    size_t next;
};

static void entry_free(void *arg) {
    entry *e = arg;
    if (!e) return;
    free(e->key);
    free(e->outs);
    buf_free(&e->text);
    free(e->lps);
    free(e);
}

response_cache *response_cache_create(size_t capacity) {
    response_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (lru_map_init(&c->map, capacity)) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void response_cache_free(response_cache *c) {
    if (!c) return;
    for (lru_node *n = c->map.newest, *older; n; n = older) {
        older = n->older;
        entry_free(n);
    }
    lru_map_destroy(&c->map);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void response_cache_get_stats(response_cache *c, response_cache_stats *out) {
    pthread_mutex_lock(&c->mu);
    *out = (response_cache_stats){.hits = c->hits, .misses = c->misses, .entries = c->map.n, .capacity = c->map.capacity};
    pthread_mutex_unlock(&c->mu);
}

/* ---- the key ---- */

bool response_cache_cacheable(const api_request *r) {
    /* Prompt logprobs come once per prompt, beside the outputs a recording keeps: not cached. */
    if (r->rp.prompt_logprobs >= 0) return false;
    return r->rp.sampling.temperature == 0 || r->seed_given || r->rp.beam_width > 1;
}

static bool delivery_field(const char *name) {
    for (size_t i = 0; i < sizeof DELIVERY_FIELDS / sizeof *DELIVERY_FIELDS; i++)
        if (!strcmp(DELIVERY_FIELDS[i], name)) return true;
    return false;
}

char *response_cache_key(const json_t *body, api_kind kind, const char *served_name) {
    json_t *fields = json_object();
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)body, name, v) {
        if (json_is_null(v) || api_field_ignored(name) || delivery_field(name)) continue;
        json_object_set(fields, name, v);
    }
    json_t *key = json_pack("{s:s,s:s,s:o}", "endpoint", kind == API_CHAT ? "chat.completions" : "completions",
                            "model", served_name, "request", fields);
    char *s = key ? json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(key);
    return s;
}

/* ---- the table ---- */

/* Caller holds the lock; returns the entry to free when that was the last
 * reference (outside the lock), else NULL. */
static entry *unref_locked(entry *e) { return e && --e->refs == 0 ? e : NULL; }

response_replay *response_cache_lookup(response_cache *c, const char *key) {
    response_replay *rp = malloc(sizeof *rp);
    pthread_mutex_lock(&c->mu);
    entry *e = rp ? (entry *)lru_map_get(&c->map, key, strlen(key)) : NULL;
    if (e) {
        c->hits++;
        e->refs++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    if (!e) {
        free(rp);
        return NULL;
    }
    *rp = (response_replay){.c = c, .e = e};
    return rp;
}

void response_replay_free(response_replay *rp) {
    if (!rp) return;
    pthread_mutex_lock(&rp->c->mu);
    entry *dead = unref_locked(rp->e);
    pthread_mutex_unlock(&rp->c->mu);
    entry_free(dead);
    free(rp);
}

/* ---- recording ---- */

/* The gen tap (under the gen's lock): copies one output into the entry. */
static void record_output(void *arg, int prompt, const engine_output *o) {
    entry *e = arg;
    if (e->oom) return;
    if (array_reserve((void **)&e->outs, &e->cap_outs, e->n_outs + 1, sizeof *e->outs)) {
        e->oom = true;
        return;
    }
    recorded_output *r = &e->outs[e->n_outs++];
    *r = (recorded_output){.prompt = prompt,
                           .index = o->index,
                           .n_new_tokens = o->n_new_tokens,
                           .text_off = e->text.len,
                           .text_len = o->text_len,
                           .lp_off = e->n_lps,
                           .finished = o->finished,
                           .reason = o->reason,
                           .n_prompt_tokens = o->n_prompt_tokens,
                           .n_cached_tokens = o->n_cached_tokens,
                           .n_output_tokens = o->n_output_tokens};
    buf_append(&e->text, o->text, o->text_len);
    if (e->text.oom) e->oom = true;
    if (!o->logprobs || o->n_new_tokens <= 0) return;
    if (array_reserve((void **)&e->lps, &e->cap_lps, e->n_lps + (size_t)o->n_new_tokens, sizeof *e->lps)) {
        e->oom = true;
        return;
    }
    for (int i = 0; i < o->n_new_tokens; i++) {
        const token_logprobs *src = &o->logprobs[i];
        gen_logprob *d = &e->lps[e->n_lps++];
        d->token = src->token;
        d->logprob = src->logprob;
        d->n_top = src->n_top < API_MAX_LOGPROBS ? src->n_top : API_MAX_LOGPROBS;
        for (int k = 0; k < d->n_top; k++) {
            d->top_tok[k] = src->top_tokens[k];
            d->top_lp[k] = src->top_logprobs[k];
        }
    }
    r->n_lps = o->n_new_tokens;
}

void response_cache_record(gen *g) {
    entry *e = calloc(1, sizeof *e);
    if (e) gen_set_tap(g, record_output, e, entry_free); /* out of memory: nothing is recorded */
}

void response_cache_store(response_cache *c, const char *key, gen *g) {
    if (!c || !key) return;
    gen_lock(g);
    entry *e = g->tap == record_output && gen_succeeded(g) ? gen_take_tap(g) : NULL;
    gen_unlock(g);
    if (!e) return;
    if (e->oom || !(e->key = strdup(key))) {
        entry_free(e);
        return;
    }
    e->node.key = e->key;
    e->node.key_len = strlen(key);
    e->refs = 1;
    entry *dead;
    pthread_mutex_lock(&c->mu);
    if (lru_map_get(&c->map, key, e->node.key_len)) /* a concurrent twin got there first */
        dead = e;
    else
        dead = unref_locked((entry *)lru_map_insert(&c->map, &e->node));
    pthread_mutex_unlock(&c->mu);
    entry_free(dead);
}

/* ---- replay ---- */

bool response_replay_step(response_replay *rp, gen *g) {
    const entry *e = rp->e;
    if (rp->next >= e->n_outs) return false;
    const recorded_output *r = &e->outs[rp->next++];
    token_logprobs *lps = NULL;
    if (r->n_lps > 0 && !(lps = calloc((size_t)r->n_lps, sizeof *lps))) {
        gen_lock(g);
        g->oom = true;
        gen_unlock(g);
        return false;
    }
    for (int i = 0; i < r->n_lps; i++) {
        const gen_logprob *s = &e->lps[r->lp_off + (size_t)i];
        lps[i] = (token_logprobs){
            .token = s->token, .logprob = s->logprob, .n_top = s->n_top, .top_tokens = s->top_tok, .top_logprobs = s->top_lp};
    }
    const engine_output o = {.index = r->index,
                             .n_new_tokens = r->n_lps > 0 ? r->n_lps : r->n_new_tokens,
                             .logprobs = lps,
                             .text = e->text.data ? e->text.data + r->text_off : "",
                             .text_len = r->text_len,
                             .finished = r->finished,
                             .reason = r->reason,
                             .n_prompt_tokens = r->n_prompt_tokens,
                             .n_cached_tokens = r->n_cached_tokens,
                             .n_output_tokens = r->n_output_tokens};
    gen_feed(g, r->prompt, &o);
    free(lps);
    return true;
}

void response_replay_all(response_replay *rp, gen *g) {
    while (response_replay_step(rp, g)) {
    }
}
