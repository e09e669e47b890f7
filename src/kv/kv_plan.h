/* What a step does to the KV cache's data before its forward pass, recorded
 * by the block manager and carried out later by the model runner. The
 * scheduler decides and keeps the books (block tables, reference counts, the
 * prefix cache) at once; it never touches KV rows. The moves those decisions
 * imply are written here, in the order they were decided:
 *
 *   copy   a whole block into a fresh one (copy on write of a block shared
 *          with another sequence or registered in the prefix cache)
 *   move   a compaction (kv_evict.h): kept slot keep[i] to slot i of one
 *          sequence's blocks, keys re-rotated by i - keep[i] (or not at
 *          all: a draft tree's accepted path, whose keys were rotated at
 *          the positions they move to)
 *
 * Applied in order, the ops give the data the books describe: a block freed
 * and handed out again within one step is only written by an op recorded
 * after every op that reads it. */
#ifndef CLLM_KV_KV_PLAN_H
#define CLLM_KV_KV_PLAN_H

#include "kv/kv_cache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Re-rotates the keys of n_rows kv heads (each head_dim_k floats, in the
 * cache's dim order) of model layer `layer` by `delta` positions. */
typedef void (*kv_key_shift_fn)(void *user, int layer, float *rows, int n_rows, int delta);

typedef enum { KV_OP_COPY, KV_OP_MOVE } kv_op_kind;

typedef struct {
    kv_op_kind kind;
    int src, dst;                   /* copy */
    int n_groups;                   /* move: the sequence's blocks, per group, when it was compacted */
    int32_t *ids[KV_MAX_GROUPS];    /*   [n_ids[g]] (released ones included: kept slots may come from them) */
    int n_ids[KV_MAX_GROUPS];
    int32_t *keep;                  /*   [n_keep], ascending, keep[i] >= i */
    int n_keep, first;              /*   slots below `first` stay where they are */
    bool shift;                     /*   re-rotate the keys by i - keep[i] */
} kv_op;

typedef struct {
    kv_op *ops;
    int n;
    size_t cap;
} kv_plan;

/* Room for n more ops, so that recording them cannot fail. 0, or -1 with err_get(). */
int kv_plan_reserve(kv_plan *p, int n);
/* Records a block copy (room reserved). */
void kv_plan_copy(kv_plan *p, int src, int dst);
/* Records a compaction (room reserved), taking ownership of the arrays
 * ids[g] (the sequence's n_ids[g] blocks in group g) and keep (malloc'ed). */
void kv_plan_move(kv_plan *p, int n_groups, int32_t *const ids[], const int n_ids[], int32_t *keep, int n_keep,
                  int first, bool shift);
/* Carries out every op in order on kv, then empties the plan. 0, or -1 with
 * err_get() (out of memory: the cache no longer matches the books). */
int kv_plan_apply(kv_plan *p, kv_cache *kv, kv_key_shift_fn shift, void *user);
/* Empties the plan without carrying it out. */
void kv_plan_clear(kv_plan *p);
void kv_plan_free(kv_plan *p);

#endif
