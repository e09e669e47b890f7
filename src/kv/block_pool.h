/* The pool of KV blocks of one layer group: reference counts, a free list in
 * least-recently-used order, and the prefix cache (block content hash -> block).
 *
 * A block is in exactly one of three states:
 *   in use    ref > 0, not on the free list; may carry a hash (full, shareable)
 *   cached    ref = 0, on the free list, carries a hash: reusable by a prefix hit
 *             until it is evicted (taken by pool_alloc)
 *   free      ref = 0, on the free list, no hash
 * Free blocks without a hash sit at the front of the list, so they are taken
 * before any cached block; cached blocks are evicted oldest first. */
#ifndef CLLM_KV_BLOCK_POOL_H
#define CLLM_KV_BLOCK_POOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint64_t lo, hi;
} block_hash;

typedef struct block_pool block_pool;

block_pool *pool_create(int n_blocks);
void pool_free(block_pool *p);

int pool_n_blocks(const block_pool *p);
/* Blocks pool_alloc could hand out now (free + cached). */
int pool_n_available(const block_pool *p);
/* Blocks with ref > 0. */
int pool_n_in_use(const block_pool *p);

/* Takes the first block of the free list (evicting its hash if cached) with
 * ref = 1; -1 when none is left. */
int pool_alloc(block_pool *p);
/* Adds a reference; a cached block leaves the free list. */
void pool_ref(block_pool *p, int b);
/* Drops a reference; at zero the block joins the free list: at the back if it
 * has a hash (cached), at the front otherwise. */
void pool_unref(block_pool *p, int b);
int pool_refcount(const block_pool *p, int b);

/* Prefix cache. */
int pool_lookup(const block_pool *p, block_hash h); /* -1 when absent */
/* Registers a full block's content hash. If another block already has it,
 * nothing changes and false is returned. */
bool pool_set_hash(block_pool *p, int b, block_hash h);
bool pool_has_hash(const block_pool *p, int b);
/* Drops every hash (cached blocks become plain free blocks). */
void pool_reset_cache(block_pool *p);

/* Hash of a full block: chained over the parent's hash and the block's tokens. */
block_hash block_hash_chain(block_hash parent, const int32_t *tokens, int n);

/* Checks every invariant; returns 0 or -1 with err_get() saying which failed. */
int pool_check(const block_pool *p);

#endif
