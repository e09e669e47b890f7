/* Constraints: compiling with an LRU cache of compiled grammars, per-state
 * token-mask caching, and the per-sequence state (see constraint.h). */
#include "grammar/constraint.h"

#include "grammar/regex.h"
#include "grammar/token_mask.h"
#include "util/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define COMPILE_CACHE_ENTRIES 64
/* Masks kept per constraint: 512 of gemma's 262k-token masks are 16 MiB. */
#define MASK_CACHE_ENTRIES 512

typedef struct {
    const token_vocab *vocab;
    gstate key;
    uint32_t *mask;
    uint64_t last_used;
} mask_entry;

struct constraint {
    atomic_int refs;
    grammar *g;
    char *canonical;
    pthread_mutex_t mu; /* guards the mask cache and the walker */
    mask_entry *masks;
    int n_masks;
    uint64_t clock;
    mask_walker walker;
};

/* ---- compiling ---- */

static grammar *grammar_from_choice(json_t *spec) {
    if (!json_is_array(spec) || json_array_size(spec) == 0) {
        err_set("choice: expected a non-empty array of strings");
        return NULL;
    }
    grammar_builder *b = gb_create();
    if (!b) {
        err_oom("choice: out of memory");
        return NULL;
    }
    const int r = gb_fresh_rule(b);
    size_t i;
    json_t *v;
    json_array_foreach(spec, i, v) {
        if (!json_is_string(v)) {
            err_set("choice: item %zu is not a string", i);
            gb_free(b);
            return NULL;
        }
        if (r < 0 || gb_alt_begin(b, r) || gb_push_literal(b, json_string_value(v), json_string_length(v)) ||
            gb_alt_end(b)) {
            gb_free(b);
            return NULL;
        }
    }
    return gb_finish(b, r);
}

static grammar *compile_grammar(constraint_kind kind, json_t *spec, const json_schema_options *opt) {
    switch (kind) {
    case CONSTRAINT_JSON_SCHEMA: return grammar_from_json_schema(spec, opt);
    case CONSTRAINT_JSON_OBJECT: return grammar_json_object(opt);
    case CONSTRAINT_CHOICE: return grammar_from_choice(spec);
    case CONSTRAINT_REGEX:
    case CONSTRAINT_GBNF:
        if (!json_is_string(spec)) {
            err_set("%s: expected a string", kind == CONSTRAINT_REGEX ? "regex" : "grammar");
            return NULL;
        }
        return kind == CONSTRAINT_REGEX ? grammar_from_regex(json_string_value(spec))
                                        : grammar_from_gbnf(json_string_value(spec));
    }
    err_set("unknown constraint kind");
    return NULL;
}

static char *canonical_text(constraint_kind kind, json_t *spec, const json_schema_options *opt) {
    /* Key order is kept: properties are generated in their listed order. */
    char *body = spec ? json_dumps(spec, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("");
    if (!body) return NULL;
    const size_t n = strlen(body) + 16;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%d%d:%s", (int)kind, opt && opt->any_whitespace, body);
    free(body);
    return out;
}

static void constraint_destroy(constraint *c) {
    for (int i = 0; i < c->n_masks; i++) {
        gstate_free(&c->masks[i].key);
        free(c->masks[i].mask);
    }
    free(c->masks);
    mask_walker_free(&c->walker);
    pthread_mutex_destroy(&c->mu);
    grammar_free(c->g);
    free(c->canonical);
    free(c);
}

constraint *constraint_retain(constraint *c) {
    atomic_fetch_add(&c->refs, 1);
    return c;
}

void constraint_release(constraint *c) {
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) constraint_destroy(c);
}

const grammar *constraint_grammar(const constraint *c) { return c->g; }

static struct {
    pthread_mutex_t mu;
    constraint *items[COMPILE_CACHE_ENTRIES]; /* most recently used first */
    int n;
    uint64_t hits, misses;
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static constraint *cache_lookup(const char *key) {
    pthread_mutex_lock(&cache.mu);
    constraint *found = NULL;
    for (int i = 0; i < cache.n; i++)
        if (!strcmp(cache.items[i]->canonical, key)) {
            found = cache.items[i];
            memmove(cache.items + 1, cache.items, (size_t)i * sizeof *cache.items);
            cache.items[0] = constraint_retain(found);
            constraint_release(found); /* the cache's own reference moved with it */
            constraint_retain(found);  /* the caller's */
            break;
        }
    if (found) cache.hits++;
    else cache.misses++;
    pthread_mutex_unlock(&cache.mu);
    return found;
}

static void cache_insert(constraint *c) {
    pthread_mutex_lock(&cache.mu);
    if (cache.n == COMPILE_CACHE_ENTRIES) constraint_release(cache.items[--cache.n]);
    memmove(cache.items + 1, cache.items, (size_t)cache.n * sizeof *cache.items);
    cache.items[0] = constraint_retain(c);
    cache.n++;
    pthread_mutex_unlock(&cache.mu);
}

void constraint_cache_stats(uint64_t *hits, uint64_t *misses) {
    pthread_mutex_lock(&cache.mu);
    *hits = cache.hits, *misses = cache.misses;
    pthread_mutex_unlock(&cache.mu);
}

constraint *constraint_compile(constraint_kind kind, json_t *spec, const json_schema_options *opt) {
    char *key = canonical_text(kind, spec, opt);
    if (!key) {
        err_oom("constraint: out of memory");
        return NULL;
    }
    constraint *c = cache_lookup(key);
    if (c) {
        free(key);
        return c;
    }
    grammar *g = compile_grammar(kind, spec, opt);
    if (!g) {
        free(key);
        return NULL;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        grammar_free(g);
        free(key);
        err_oom("constraint: out of memory");
        return NULL;
    }
    atomic_init(&c->refs, 1);
    c->g = g;
    c->canonical = key;
    pthread_mutex_init(&c->mu, NULL);
    cache_insert(c);
    return c;
}

constraint *constraint_from_json_schema(json_t *schema) {
    return constraint_compile(CONSTRAINT_JSON_SCHEMA, schema, NULL);
}

/* ---- per-sequence state ---- */

int constraint_state_init(constraint_state *s, constraint *c) {
    *s = (constraint_state){0};
    gscratch w = {0};
    const int rc = gstate_init(&s->st, c->g, &w);
    gscratch_free(&w);
    if (rc) {
        gstate_free(&s->st);
        return -1;
    }
    s->c = constraint_retain(c);
    return 0;
}

void constraint_state_free(constraint_state *s) {
    gstate_free(&s->st);
    constraint_release(s->c);
    *s = (constraint_state){0};
}

int constraint_state_copy(constraint_state *dst, const constraint_state *src) {
    if (gstate_copy(&dst->st, &src->st)) return -1;
    if (dst->c != src->c) {
        constraint_release(dst->c);
        dst->c = constraint_retain(src->c);
    }
    return 0;
}

bool constraint_can_end(const constraint_state *s) { return s->st.accept; }
bool constraint_must_end(const constraint_state *s) { return s->st.n_stacks == 0; }

int constraint_accept(constraint_state *s, const token_vocab *v, int32_t token) {
    if (token < 0 || token >= v->n_vocab) return 0;
    if (v->is_eog[token]) return s->st.accept ? 1 : 0;
    int len;
    const char *p = token_vocab_bytes(v, token, &len);
    if (len == 0) return 0;
    pthread_mutex_lock(&s->c->mu);
    const int rc = gstate_advance_bytes(s->c->g, &s->st, (const unsigned char *)p, (size_t)len, &s->c->walker.scratch);
    pthread_mutex_unlock(&s->c->mu);
    return rc;
}

int constraint_mask(constraint_state *s, const token_vocab *v, uint32_t *mask) {
    constraint *c = s->c;
    const size_t words = (size_t)(v->n_vocab + 31) / 32;
    pthread_mutex_lock(&c->mu);
    c->clock++;
    for (int i = 0; i < c->n_masks; i++) {
        mask_entry *e = &c->masks[i];
        if (e->vocab == v && gstate_equal(&e->key, &s->st)) {
            e->last_used = c->clock;
            memcpy(mask, e->mask, words * sizeof *mask);
            pthread_mutex_unlock(&c->mu);
            return 0;
        }
    }
    int rc = token_mask_walk_with(c->g, v, &s->st, mask, &c->walker);
    if (!rc) { /* keep it: a new entry, or the least recently used one replaced */
        if (!c->masks) c->masks = calloc(MASK_CACHE_ENTRIES, sizeof *c->masks);
        mask_entry *slot = NULL;
        if (c->masks && c->n_masks < MASK_CACHE_ENTRIES) {
            slot = &c->masks[c->n_masks];
            if ((slot->mask = malloc(words * sizeof *mask))) c->n_masks++;
            else slot = NULL;
        } else if (c->masks) {
            slot = &c->masks[0];
            for (int i = 1; i < c->n_masks; i++)
                if (c->masks[i].last_used < slot->last_used) slot = &c->masks[i];
            if (slot->vocab != v) { /* another vocabulary's mask may be smaller */
                uint32_t *m = realloc(slot->mask, words * sizeof *mask);
                if (m) slot->mask = m;
                else slot = NULL;
            }
        }
        if (slot && !gstate_copy(&slot->key, &s->st)) {
            slot->vocab = v;
            slot->last_used = c->clock;
            memcpy(slot->mask, mask, words * sizeof *mask);
        } else if (slot) {
            slot->vocab = NULL; /* a half-written entry never matches */
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
