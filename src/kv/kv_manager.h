/* Per-sequence KV block tables (one per layer group) over the shared block
 * pool: prefix matching against the cache, allocation of the blocks a step
 * needs, release of blocks that left a sliding window, copy-on-write of shared
 * blocks before they are written, registration of full blocks in the prefix
 * cache, fork (n > 1, beam search) and release. The scheduler decides who
 * runs; this file answers "can it get the blocks" and keeps the books, and
 * records the data moves they imply (kv_plan.h) without making them. */
#ifndef CLLM_KV_KV_MANAGER_H
#define CLLM_KV_KV_MANAGER_H

#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_plan.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int32_t *ids;  /* logical block -> physical block, -1 when released */
    int n;
    size_t cap;
} block_list;

typedef struct {
    block_list lists[KV_MAX_GROUPS];
    int n_registered;     /* leading full blocks whose hashes are in the cache */
    block_hash last_hash; /* chain hash of block n_registered - 1 */
    /* Sliding groups keep every block (an evicting sequence: kv_evict.h moves
     * old slots down to where a query can see them again). */
    bool keep_window_blocks;
} seq_kv;

typedef struct {
    kv_cache *cache;
    block_pool *pool;
    int n_groups;
    int block_size;
    bool prefix_caching;
    /* For /metrics: tokens of admitted sequences looked up in the prefix cache,
     * and found there (counted by the scheduler on admission). */
    uint64_t prefix_queries;
    uint64_t prefix_hits;
    /* The block copies and compactions decided since the runner last applied
     * them (kv_plan.h): this file never moves KV data itself. */
    kv_plan plan;
} kv_manager;

int kvm_init(kv_manager *m, kv_cache *cache, bool prefix_caching);
void kvm_destroy(kv_manager *m);

/* Blocks (all groups) that one sequence of n_tokens, computed in steps of at
 * most max_chunk tokens, holds at most. */
int kvm_blocks_needed(const kv_manager *m, int n_tokens, int max_chunk);

/* Blocks (all groups) that one evicting sequence (at most `budget` tokens in
 * the cache, sliding groups included) needs at most: what it holds, and the
 * one free block its compaction copies into (kvm_compact). */
int kvm_blocks_needed_budget(const kv_manager *m, int budget);

/* For a sequence with no blocks yet: takes the longest cached prefix of
 * tokens[0..n) in whole blocks, leaving at least the last token to compute,
 * and returns its length in tokens. */
int kvm_match_prefix(kv_manager *m, seq_kv *s, const int32_t *tokens, int n);

/* Blocks kvm_allocate(start, n) would take from the pool. */
int kvm_blocks_to_allocate(const kv_manager *m, const seq_kv *s, int start, int n);
/* Makes positions [start, start + n) writable: allocates missing blocks,
 * gives shared ones a private copy (recorded in m->plan, for the runner to
 * carry out before the forward pass), releases sliding blocks no query from
 * `start` on can see. All or nothing: -1 (nothing changed) when the pool
 * lacks blocks or memory. */
int kvm_allocate(kv_manager *m, seq_kv *s, int start, int n);

/* After the forward wrote KV for positions < n_computed: registers every newly
 * full block under its chained hash. */
void kvm_commit(kv_manager *m, seq_kv *s, const int32_t *tokens, int n_computed);

/* Speculative decoding's rollback: keeps the blocks that hold positions
 * < n_tokens and releases the rest (they held only rejected drafts, written
 * into blocks kvm_allocate made private). The hash chain is untouched:
 * kvm_commit registers only blocks of verified tokens. */
void kvm_truncate(kv_manager *m, seq_kv *s, int n_tokens);

/* dst (empty) shares every block of src. */
int kvm_fork(kv_manager *m, const seq_kv *src, seq_kv *dst);
void kvm_release(kv_manager *m, seq_kv *s);

static inline const int32_t *kvm_table(const seq_kv *s, int g) { return s->lists[g].ids; }

#endif
