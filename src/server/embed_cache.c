/* See embed_cache.h. An lru_map whose key is the truncation (4 bytes) then
 * the text, so the same text asked with two truncations is two entries. */
#include "server/embed_cache.h"

#include "util/error.h"
#include "util/lru_map.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    lru_node node; /* first: an lru_node * is the entry's address */
    int n_tokens;
    char *key;
    float vec[]; /* dim floats */
} entry;

struct embed_cache {
    pthread_mutex_t mu;
    lru_map map;
    int dim;
    uint64_t hits, misses;
};

embed_cache *embed_cache_create(size_t capacity, int dim) {
    embed_cache *c = calloc(1, sizeof *c);
    if (!c) {
        err_oom("embedding cache: out of memory for %zu entries", capacity);
        return NULL;
    }
    if (lru_map_init(&c->map, capacity)) {
        free(c);
        return NULL;
    }
    c->dim = dim;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void entry_free(lru_node *n) {
    entry *e = (entry *)n;
    if (!e) return;
    free(e->key);
    free(e);
}

void embed_cache_free(embed_cache *c) {
    if (!c) return;
    for (lru_node *n = c->map.newest, *older; n; n = older) {
        older = n->older;
        entry_free(n);
    }
    lru_map_destroy(&c->map);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The truncation then the text; NULL when out of memory. */
static char *make_key(const char *text, size_t len, int truncate, size_t *key_len) {
    const int32_t t = truncate;
    char *k = malloc(sizeof t + len);
    if (!k) return NULL;
    memcpy(k, &t, sizeof t);
    memcpy(k + sizeof t, text, len);
    *key_len = sizeof t + len;
    return k;
}

bool embed_cache_get(embed_cache *c, const char *text, size_t len, int truncate, float *out, int *n_tokens) {
    size_t key_len;
    char *key = make_key(text, len, truncate, &key_len);
    pthread_mutex_lock(&c->mu);
    const entry *e = key ? (const entry *)lru_map_get(&c->map, key, key_len) : NULL;
    if (e) {
        memcpy(out, e->vec, (size_t)c->dim * sizeof *out);
        *n_tokens = e->n_tokens;
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    free(key);
    return e != NULL;
}

void embed_cache_put(embed_cache *c, const char *text, size_t len, int truncate, const float *vec, int n_tokens) {
    if (c->map.capacity == 0) return;
    entry *e = malloc(sizeof *e + (size_t)c->dim * sizeof(float));
    size_t key_len = 0;
    char *key = e ? make_key(text, len, truncate, &key_len) : NULL;
    if (!key) { /* not cached: only a later miss */
        free(e);
        return;
    }
    *e = (entry){.node = {.key = key, .key_len = key_len}, .n_tokens = n_tokens, .key = key};
    memcpy(e->vec, vec, (size_t)c->dim * sizeof *vec);
    lru_node *dead;
    pthread_mutex_lock(&c->mu);
    if (lru_map_get(&c->map, key, key_len)) /* another request stored it meanwhile: the same vector */
        dead = &e->node;
    else
        dead = lru_map_insert(&c->map, &e->node);
    pthread_mutex_unlock(&c->mu);
    entry_free(dead);
}

void embed_cache_get_stats(embed_cache *c, embed_cache_stats *st) {
    pthread_mutex_lock(&c->mu);
    *st = (embed_cache_stats){.hits = c->hits, .misses = c->misses, .entries = c->map.n, .capacity = c->map.capacity};
    pthread_mutex_unlock(&c->mu);
}
