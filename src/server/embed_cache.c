/* See embed_cache.h. A chained hash table (XXH3 of the key) over entries on
 * a doubly linked recency list: the head is the most recently used. */
#include "server/embed_cache.h"

#include "util/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct entry {
    struct entry *prev, *next; /* recency */
    struct entry *chain;       /* hash bucket */
    uint64_t hash;
    int truncate, n_tokens;
    size_t len;
    char *text;
    float vec[]; /* dim floats */
} entry;

struct embed_cache {
    pthread_mutex_t mu;
    size_t capacity, n, n_buckets;
    int dim;
    entry **buckets;
    entry *head, *tail;
    uint64_t hits, misses;
};

embed_cache *embed_cache_create(size_t capacity, int dim) {
    embed_cache *c = calloc(1, sizeof *c);
    size_t nb = 16;
    while (nb < capacity * 2) nb *= 2;
    if (c) c->buckets = calloc(nb, sizeof *c->buckets);
    if (!c || !c->buckets) {
        free(c);
        err_oom("embedding cache: out of memory for %zu entries", capacity);
        return NULL;
    }
    c->capacity = capacity, c->dim = dim, c->n_buckets = nb;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void embed_cache_free(embed_cache *c) {
    if (!c) return;
    for (entry *e = c->head, *next; e; e = next) {
        next = e->next;
        free(e->text);
        free(e);
    }
    free(c->buckets);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static uint64_t key_hash(const char *text, size_t len, int truncate) {
    return XXH3_64bits_withSeed(text, len, (uint64_t)(uint32_t)truncate);
}

static entry **find_slot(embed_cache *c, uint64_t h, const char *text, size_t len, int truncate) {
    entry **p = &c->buckets[h & (c->n_buckets - 1)];
    for (; *p; p = &(*p)->chain) {
        const entry *e = *p;
        if (e->hash == h && e->len == len && e->truncate == truncate && !memcmp(e->text, text, len)) break;
    }
    return p;
}

static void unlink_recency(embed_cache *c, entry *e) {
    if (e->prev) e->prev->next = e->next;
    else c->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(embed_cache *c, entry *e) {
    e->next = c->head;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
}

bool embed_cache_get(embed_cache *c, const char *text, size_t len, int truncate, float *out, int *n_tokens) {
    const uint64_t h = key_hash(text, len, truncate);
    pthread_mutex_lock(&c->mu);
    entry *e = *find_slot(c, h, text, len, truncate);
    if (e) {
        memcpy(out, e->vec, (size_t)c->dim * sizeof *out);
        *n_tokens = e->n_tokens;
        unlink_recency(c, e);
        push_front(c, e);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return e != NULL;
}

static void evict_oldest(embed_cache *c) {
    entry *old = c->tail;
    entry **slot = find_slot(c, old->hash, old->text, old->len, old->truncate);
    *slot = old->chain;
    unlink_recency(c, old);
    free(old->text);
    free(old);
    c->n--;
}

void embed_cache_put(embed_cache *c, const char *text, size_t len, int truncate, const float *vec, int n_tokens) {
    if (c->capacity == 0) return;
    const uint64_t h = key_hash(text, len, truncate);
    pthread_mutex_lock(&c->mu);
    entry **slot = find_slot(c, h, text, len, truncate);
    if (*slot) { /* another request stored it meanwhile: the same vector */
        unlink_recency(c, *slot);
        push_front(c, *slot);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    entry *e = malloc(sizeof *e + (size_t)c->dim * sizeof(float));
    char *copy = malloc(len + 1);
    if (!e || !copy) { /* not cached: only a later miss */
        free(e);
        free(copy);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    memcpy(copy, text, len);
    copy[len] = 0;
    *e = (entry){.hash = h, .truncate = truncate, .n_tokens = n_tokens, .len = len, .text = copy};
    memcpy(e->vec, vec, (size_t)c->dim * sizeof *vec);
    e->chain = *slot;
    *slot = e;
    push_front(c, e);
    c->n++;
    if (c->n > c->capacity) evict_oldest(c);
    pthread_mutex_unlock(&c->mu);
}

void embed_cache_get_stats(embed_cache *c, embed_cache_stats *st) {
    pthread_mutex_lock(&c->mu);
    *st = (embed_cache_stats){.hits = c->hits, .misses = c->misses, .entries = c->n, .capacity = c->capacity};
    pthread_mutex_unlock(&c->mu);
}
