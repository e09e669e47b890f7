/* Block pool and prefix cache; see block_pool.h. The free list is an intrusive
 * doubly linked list over block ids; the hash map is open addressing with
 * linear probing and tombstones, sized at twice the block count. */
#include "kv/block_pool.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* for XXH3_state_t on the stack */
#include <xxhash.h>

#define NIL (-1)
#define SLOT_EMPTY (-1)
#define SLOT_TOMB (-2)

struct block_pool {
    int n;
    int *ref;
    int *prev, *next;   /* free list links; NIL-terminated */
    bool *on_free_list;
    bool *hashed;
    block_hash *hash;
    int head, tail;
    int n_free;          /* blocks on the free list */
    int map_cap;         /* power of two */
    int *map;            /* slot -> block id, or SLOT_EMPTY / SLOT_TOMB */
    int map_used;        /* live + tombstones */
};

block_hash block_hash_chain(block_hash parent, const int32_t *tokens, int n) {
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    XXH3_128bits_update(&st, &parent, sizeof parent);
    XXH3_128bits_update(&st, tokens, (size_t)n * sizeof *tokens);
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    return (block_hash){h.low64, h.high64};
}

static bool hash_eq(block_hash a, block_hash b) { return a.lo == b.lo && a.hi == b.hi; }

static void list_remove(block_pool *p, int b) {
    if (p->prev[b] != NIL) p->next[p->prev[b]] = p->next[b];
    else p->head = p->next[b];
    if (p->next[b] != NIL) p->prev[p->next[b]] = p->prev[b];
    else p->tail = p->prev[b];
    p->prev[b] = p->next[b] = NIL;
    p->on_free_list[b] = false;
    p->n_free--;
}

static void list_push_back(block_pool *p, int b) {
    p->prev[b] = p->tail;
    p->next[b] = NIL;
    if (p->tail != NIL) p->next[p->tail] = b;
    else p->head = b;
    p->tail = b;
    p->on_free_list[b] = true;
    p->n_free++;
}

static void list_push_front(block_pool *p, int b) {
    p->next[b] = p->head;
    p->prev[b] = NIL;
    if (p->head != NIL) p->prev[p->head] = b;
    else p->tail = b;
    p->head = b;
    p->on_free_list[b] = true;
    p->n_free++;
}

block_pool *pool_create(int n_blocks) {
    block_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_blocks;
    p->map_cap = 16;
    while (p->map_cap < 2 * n_blocks) p->map_cap *= 2;
    size_t n = (size_t)(n_blocks > 0 ? n_blocks : 1);
    p->ref = calloc(n, sizeof *p->ref);
    p->prev = malloc(n * sizeof *p->prev);
    p->next = malloc(n * sizeof *p->next);
    p->on_free_list = calloc(n, sizeof *p->on_free_list);
    p->hashed = calloc(n, sizeof *p->hashed);
    p->hash = calloc(n, sizeof *p->hash);
    p->map = malloc((size_t)p->map_cap * sizeof *p->map);
    if (!p->ref || !p->prev || !p->next || !p->on_free_list || !p->hashed || !p->hash || !p->map) {
        pool_free(p);
        return NULL;
    }
    for (int i = 0; i < p->map_cap; i++) p->map[i] = SLOT_EMPTY;
    p->head = p->tail = NIL;
    for (int b = 0; b < n_blocks; b++) list_push_back(p, b);
    return p;
}

void pool_free(block_pool *p) {
    if (!p) return;
    free(p->ref);
    free(p->prev);
    free(p->next);
    free(p->on_free_list);
    free(p->hashed);
    free(p->hash);
    free(p->map);
    free(p);
}

int pool_n_blocks(const block_pool *p) { return p->n; }
int pool_n_available(const block_pool *p) { return p->n_free; }
int pool_n_in_use(const block_pool *p) { return p->n - p->n_free; }
int pool_refcount(const block_pool *p, int b) { return p->ref[b]; }
bool pool_has_hash(const block_pool *p, int b) { return p->hashed[b]; }

static int map_find_slot(const block_pool *p, block_hash h) {
    const int mask = p->map_cap - 1;
    for (int i = (int)(h.lo & (uint64_t)mask), probes = 0; probes < p->map_cap; i = (i + 1) & mask, probes++) {
        const int b = p->map[i];
        if (b == SLOT_EMPTY) return -1;
        if (b >= 0 && hash_eq(p->hash[b], h)) return i;
    }
    return -1;
}

static void map_rebuild(block_pool *p) {
    for (int i = 0; i < p->map_cap; i++) p->map[i] = SLOT_EMPTY;
    p->map_used = 0;
    const int mask = p->map_cap - 1;
    for (int b = 0; b < p->n; b++) {
        if (!p->hashed[b]) continue;
        int i = (int)(p->hash[b].lo & (uint64_t)mask);
        while (p->map[i] != SLOT_EMPTY) i = (i + 1) & mask;
        p->map[i] = b;
        p->map_used++;
    }
}

static void map_insert(block_pool *p, int b) {
    /* Live entries never exceed n <= cap/2; tombstones are purged by a rebuild. */
    if (p->map_used + 1 > p->map_cap * 3 / 4) map_rebuild(p);
    const int mask = p->map_cap - 1;
    int i = (int)(p->hash[b].lo & (uint64_t)mask);
    while (p->map[i] >= 0) i = (i + 1) & mask;
    if (p->map[i] == SLOT_EMPTY) p->map_used++;
    p->map[i] = b;
}

static void drop_hash(block_pool *p, int b) {
    if (!p->hashed[b]) return;
    int slot = map_find_slot(p, p->hash[b]);
    if (slot >= 0 && p->map[slot] == b) p->map[slot] = SLOT_TOMB;
    p->hashed[b] = false;
}

int pool_lookup(const block_pool *p, block_hash h) {
    int slot = map_find_slot(p, h);
    return slot < 0 ? -1 : p->map[slot];
}

bool pool_set_hash(block_pool *p, int b, block_hash h) {
    if (p->hashed[b]) return hash_eq(p->hash[b], h);
    if (pool_lookup(p, h) >= 0) return false;
    p->hash[b] = h;
    map_insert(p, b); /* before marking: a rebuild inside must not insert b too */
    p->hashed[b] = true;
    return true;
}

void pool_reset_cache(block_pool *p) {
    for (int b = 0; b < p->n; b++) p->hashed[b] = false;
    map_rebuild(p);
}

int pool_alloc(block_pool *p) {
    const int b = p->head;
    if (b == NIL) return -1;
    list_remove(p, b);
    drop_hash(p, b); /* evicted from the prefix cache */
    p->ref[b] = 1;
    return b;
}

void pool_ref(block_pool *p, int b) {
    if (p->ref[b]++ == 0) list_remove(p, b);
}

void pool_unref(block_pool *p, int b) {
    if (--p->ref[b] > 0) return;
    if (p->hashed[b]) list_push_back(p, b);
    else list_push_front(p, b);
}

int pool_check(const block_pool *p) {
    int count = 0, prev = NIL;
    for (int b = p->head; b != NIL; b = p->next[b]) {
        if (b < 0 || b >= p->n) return err_set("free list holds invalid block %d", b);
        if (p->prev[b] != prev) return err_set("free list back link broken at block %d", b);
        if (!p->on_free_list[b]) return err_set("block %d on the list but not marked", b);
        if (p->ref[b] != 0) return err_set("block %d on the free list with ref %d", b, p->ref[b]);
        prev = b;
        if (++count > p->n) return err_set("free list has a cycle");
    }
    if (prev != p->tail) return err_set("free list tail is wrong");
    if (count != p->n_free) return err_set("free count %d but %d blocks on the list", p->n_free, count);
    int live = 0;
    for (int b = 0; b < p->n; b++) {
        if (p->ref[b] < 0) return err_set("block %d has negative ref %d", b, p->ref[b]);
        if ((p->ref[b] == 0) != p->on_free_list[b]) return err_set("block %d ref %d vs free-list mark", b, p->ref[b]);
        if (p->hashed[b]) {
            live++;
            if (pool_lookup(p, p->hash[b]) != b) return err_set("block %d's hash does not map back to it", b);
        }
    }
    int mapped = 0;
    for (int i = 0; i < p->map_cap; i++)
        if (p->map[i] >= 0) {
            mapped++;
            if (!p->hashed[p->map[i]]) return err_set("map slot %d points to unhashed block %d", i, p->map[i]);
        }
    if (mapped != live) return err_set("map holds %d entries, %d blocks are hashed", mapped, live);
    return 0;
}
