/* A hash map that also keeps its entries in recency order and holds at most
 * a given number of them: the bones of the server's response and embedding
 * caches. Intrusive: an entry embeds an lru_node (its key bytes live in the
 * entry and stay put while it is in the map), so the map allocates nothing
 * but its buckets and never frees an entry; what leaves the map is handed
 * back to the caller to free. Keys are compared whole, so a hash collision
 * cannot return another key's entry. Not thread-safe: callers lock. */
#ifndef CLLM_UTIL_LRU_MAP_H
#define CLLM_UTIL_LRU_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct lru_node {
    struct lru_node *newer, *older; /* recency: newest first */
    struct lru_node *next_in_bucket;
    uint64_t hash;
    const void *key;
    size_t key_len;
} lru_node;

typedef struct {
    lru_node **buckets;
    size_t n_buckets; /* a power of two, at least twice the capacity */
    lru_node *newest, *oldest;
    size_t n, capacity;
} lru_map;

/* Room for capacity entries; -1 with err_get() when out of memory. */
int lru_map_init(lru_map *m, size_t capacity);
/* Frees the buckets; the entries still in the map (walk newest->older
 * first) are the caller's. */
void lru_map_destroy(lru_map *m);

/* The entry with this key, made the newest; NULL when none. */
lru_node *lru_map_get(lru_map *m, const void *key, size_t key_len);
/* Adds node (key and key_len set by the caller, its key not yet in the map)
 * as the newest. Returns the least recently used entry when that made the
 * map hold more than its capacity (now out of the map, to free), else NULL. */
lru_node *lru_map_insert(lru_map *m, lru_node *node);

#endif
