/* Constraints: compiling with an LRU cache of compiled grammars, per-state
 * token-mask caching, and the per-sequence state (see constraint.h). */
#include "grammar/constraint.h"

#include "grammar/regex.h"
#include "grammar/token_mask.h"
#include "grammar/token_mask_class.h"
#include "util/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on memory: at most 32 compiled constraints are kept; each holds up
 * to 2048 DFA states (about 1.1 KiB each) and 128 masks (with gemma's 262k
 * tokens, 32 KiB each): about 6.5 MiB per constraint, 210 MiB in all. */
#define COMPILE_CACHE_ENTRIES 32
#define DFA_MAX_STATES 2048
#define MASK_CACHE_ENTRIES 128

struct constraint {
    atomic_int refs;
    grammar *g;
    char *canonical;
    pthread_mutex_t mu; /* guards everything below */
    gdfa *dfa;          /* created at the first mask */
    const token_vocab *vocab; /* the masks' vocabulary */
    uint32_t **masks;   /* [DFA_MAX_STATES]: per DFA state, NULL until computed */
    int32_t cached[MASK_CACHE_ENTRIES]; /* the states with a mask */
    uint64_t used[MASK_CACHE_ENTRIES];  /* when each was last used (clock) */
    int n_masks;
    uint64_t clock;
    gscratch scratch;
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

/* prefix, one value of the schema, suffix: tool_choice "required" or a
 * named function, in the markup of the model's tool-call format. */
static grammar *grammar_tool_call(json_t *spec, const json_schema_options *opt) {
    const json_t *prefix = json_object_get(spec, "prefix"), *suffix = json_object_get(spec, "suffix");
    json_t *schema = json_object_get(spec, "schema");
    if (!json_is_string(prefix) || !json_is_string(suffix) || !json_is_object(schema)) {
        err_set("tool call: expected {\"prefix\": string, \"schema\": object, \"suffix\": string}");
        return NULL;
    }
    grammar_builder *b = gb_create();
    if (!b) {
        err_oom("tool call: out of memory");
        return NULL;
    }
    const int value = json_schema_to_rule(b, schema, opt);
    const int root = value < 0 ? -1 : gb_fresh_rule(b);
    if (root < 0 || gb_alt_begin(b, root) ||
        gb_push_literal(b, json_string_value(prefix), json_string_length(prefix)) || gb_push_rule(b, value) ||
        gb_push_literal(b, json_string_value(suffix), json_string_length(suffix)) || gb_alt_end(b)) {
        gb_free(b);
        return NULL;
    }
    return gb_finish(b, root);
}

static grammar *compile_grammar(constraint_kind kind, json_t *spec, const json_schema_options *opt) {
    switch (kind) {
    case CONSTRAINT_JSON_SCHEMA: return grammar_from_json_schema(spec, opt);
    case CONSTRAINT_JSON_OBJECT: return grammar_json_object(opt);
    case CONSTRAINT_CHOICE: return grammar_from_choice(spec);
    case CONSTRAINT_TOOL_CALL: return grammar_tool_call(spec, opt);
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

static void drop_masks(constraint *c) {
    if (c->masks)
        for (int i = 0; i < DFA_MAX_STATES; i++) {
            free(c->masks[i]);
            c->masks[i] = NULL;
        }
    c->n_masks = 0;
}

static void constraint_destroy(constraint *c) {
    drop_masks(c);
    free(c->masks);
    gdfa_free(c->dfa);
    gscratch_free(&c->scratch);
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
    const int rc = gstate_advance_bytes(s->c->g, &s->st, (const unsigned char *)p, (size_t)len, &s->c->scratch);
    pthread_mutex_unlock(&s->c->mu);
    return rc;
}

static atomic_bool use_classes = true;
static atomic_uint_fast64_t masks_computed;

void constraint_use_token_classes(bool on) {
    atomic_store(&use_classes, on);
}
uint64_t constraint_masks_computed(void) {
    return atomic_load(&masks_computed);
}

int constraint_warm_token_classes(const token_vocab *v) {
    json_t *spec = json_pack("{s:s}", "type", "string");
    constraint *c = spec ? constraint_compile(CONSTRAINT_JSON_SCHEMA, spec, NULL) : NULL;
    json_decref(spec);
    uint32_t *mask = malloc((size_t)(v->n_vocab + 31) / 32 * sizeof *mask);
    constraint_state st = {0};
    gscratch w = {0};
    int rc = c && mask ? constraint_state_init(&st, c) : err_oom("constraint: out of memory");
    if (!rc && gstate_advance_bytes(c->g, &st.st, (const unsigned char *)"\"", 1, &w) != 1) rc = -1;
    if (!rc) rc = constraint_mask(&st, v, mask);
    gscratch_free(&w);
    if (st.c) constraint_state_free(&st);
    constraint_release(c);
    free(mask);
    return rc;
}

/* The mask of DFA state `id`, from the cache or walked and kept (the least
 * recently used mask makes room). */
static int state_mask(constraint *c, const token_vocab *v, int id, uint32_t *mask, size_t words) {
    c->clock++;
    if (c->masks[id]) {
        memcpy(mask, c->masks[id], words * sizeof *mask);
        for (int i = 0; i < c->n_masks; i++)
            if (c->cached[i] == id) c->used[i] = c->clock;
        return 0;
    }
    atomic_fetch_add(&masks_computed, 1);
    int rc =
        atomic_load(&use_classes) ? token_mask_by_class(c->dfa, v, id, mask) : TOKEN_CLASS_UNUSED;
    if (rc == TOKEN_CLASS_UNUSED) rc = token_mask_walk_dfa(c->dfa, v, id, mask);
    if (rc) return rc;
    int slot = c->n_masks;
    if (slot == MASK_CACHE_ENTRIES) {
        slot = 0;
        for (int i = 1; i < c->n_masks; i++)
            if (c->used[i] < c->used[slot]) slot = i;
        free(c->masks[c->cached[slot]]);
        c->masks[c->cached[slot]] = NULL;
    } else {
        c->n_masks++;
    }
    c->cached[slot] = id;
    c->used[slot] = c->clock;
    if ((c->masks[id] = malloc(words * sizeof *mask))) memcpy(c->masks[id], mask, words * sizeof *mask);
    return 0;
}

int constraint_mask(constraint_state *s, const token_vocab *v, uint32_t *mask) {
    constraint *c = s->c;
    const size_t words = (size_t)(v->n_vocab + 31) / 32;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (!c->dfa) {
        c->dfa = gdfa_create(c->g, DFA_MAX_STATES);
        c->masks = calloc(DFA_MAX_STATES, sizeof *c->masks);
        if (!c->dfa || !c->masks) {
            gdfa_free(c->dfa);
            free(c->masks);
            c->dfa = NULL, c->masks = NULL;
            rc = err_oom("constraint: out of memory");
        }
    }
    if (!rc && c->vocab != v) {
        drop_masks(c);
        c->vocab = v;
    }
    for (int attempt = 0; !rc; attempt++) {
        const int id = gdfa_intern(c->dfa, &s->st);
        rc = id < 0 ? id : state_mask(c, v, id, mask, words);
        if (rc != GDFA_FULL) break;
        /* The table filled up: start it afresh, once; a walk that needs more
         * states than it holds gets a DFA of its own. */
        drop_masks(c);
        gdfa_clear(c->dfa);
        rc = 0;
        if (attempt == 1) {
            rc = token_mask_walk(c->g, v, &s->st, mask);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
