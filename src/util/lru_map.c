/* See lru_map.h. Chained buckets indexed by XXH3 of the key; the recency
 * list is doubly linked so a hit moves to the front in constant time. */
#include "util/lru_map.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int lru_map_init(lru_map *m, size_t capacity) {
    memset(m, 0, sizeof *m);
    size_t nb = 16;
    while (nb < 2 * capacity) nb *= 2;
    if (!(m->buckets = calloc(nb, sizeof *m->buckets)))
        return err_oom("out of memory for a cache of %zu entries", capacity);
    m->n_buckets = nb;
    m->capacity = capacity;
    return 0;
}

void lru_map_destroy(lru_map *m) {
    free(m->buckets);
    m->buckets = NULL;
}

static lru_node **bucket_of(lru_map *m, uint64_t hash) { return &m->buckets[hash & (m->n_buckets - 1)]; }

static lru_node *find(lru_map *m, const void *key, size_t key_len, uint64_t hash) {
    for (lru_node *e = *bucket_of(m, hash); e; e = e->next_in_bucket)
        if (e->hash == hash && e->key_len == key_len && !memcmp(e->key, key, key_len)) return e;
    return NULL;
}

static void list_unlink(lru_map *m, lru_node *e) {
    if (e->newer) e->newer->older = e->older;
    else m->newest = e->older;
    if (e->older) e->older->newer = e->newer;
    else m->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void list_push_newest(lru_map *m, lru_node *e) {
    e->older = m->newest;
    e->newer = NULL;
    if (m->newest) m->newest->newer = e;
    m->newest = e;
    if (!m->oldest) m->oldest = e;
}

lru_node *lru_map_get(lru_map *m, const void *key, size_t key_len) {
    lru_node *e = find(m, key, key_len, XXH3_64bits(key, key_len));
    if (e) {
        list_unlink(m, e);
        list_push_newest(m, e);
    }
    return e;
}

static lru_node *remove_oldest(lru_map *m) {
    lru_node *e = m->oldest;
    for (lru_node **p = bucket_of(m, e->hash); *p; p = &(*p)->next_in_bucket) {
        if (*p == e) {
            *p = e->next_in_bucket;
            break;
        }
    }
    list_unlink(m, e);
    e->next_in_bucket = NULL;
    m->n--;
    return e;
}

lru_node *lru_map_insert(lru_map *m, lru_node *node) {
    node->hash = XXH3_64bits(node->key, node->key_len);
    lru_node **b = bucket_of(m, node->hash);
    node->next_in_bucket = *b;
    *b = node;
    list_push_newest(m, node);
    m->n++;
    return m->n > m->capacity ? remove_oldest(m) : NULL;
}
