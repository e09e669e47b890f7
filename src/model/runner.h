/* The model runner: what one model needs to run batches, built in one place.
 * It owns the paged KV cache (and, when asked, the block manager over it:
 * allocation, prefix cache, copy on write), the forward pass's scratch, and
 * the thread pool (its own, or one it is lent), and it runs a flat batch
 * (model/forward.h) into logits. The engine, the draft model, the
 * tensor-parallel follower, `cllm generate`'s and `cllm logits`' single
 * sequence, long perplexity and quantization calibration all run through a
 * runner; none creates a KV cache or a forward context of its own. It never
 * decides who runs: the caller brings the batch and the block tables, and the
 * runner carries out the data moves the block manager only recorded.
 *
 * A runner of one sequence (no block manager) may ask for identity block
 * tables: each group's blocks in one contiguous run, so logical block i of
 * group g is physical block g * blocks_per_group + i. */
#ifndef CLLM_MODEL_RUNNER_H
#define CLLM_MODEL_RUNNER_H

#include "kv/kv_cache.h"
#include "kv/kv_manager.h"
#include "model/forward.h"
#include "model/kv_shift.h"
#include "model/model.h"
#include "util/threadpool.h"

#include <stdbool.h>

typedef struct {
    kv_dtype kv_type;
    int block_size;
    int n_blocks;           /* the whole pool, every group's blocks together */
    bool block_manager;     /* a kv_manager over the pool (sequences that allocate blocks as they go) */
    bool prefix_caching;    /* with block_manager: full blocks are registered for reuse */
    int max_tokens;         /* the largest batch, in tokens */
    int max_out;            /* logit rows a batch may ask for */
    threadpool *threads;         /* lent, not owned; NULL: the runner starts n_threads of its own */
    int n_threads;          /* 0: every core */
    int identity_blocks;    /* > 0: identity tables of this many blocks per group (runners of one sequence) */
    int n_ctx;              /* the longest sequence it runs, which picks LongRoPE's factors; 0: the trained context */
} runner_config;

typedef struct {
    const model *m;
    kv_cache *kv;
    kv_manager kvm;         /* pool NULL without block_manager */
    forward_ctx *fwd;
    threadpool *threads;
    bool owns_tp;
    int max_tokens, max_out;
    kv_shift_ctx shift;     /* the model and the rope factors of this runner's context */
    int32_t *identity[KV_MAX_GROUPS];
} runner;

/* 0, or -1 with err_get() (nothing left to free). */
int runner_init(runner *r, const model *m, const runner_config *c);
void runner_destroy(runner *r);

/* Room for batches of up to max_tokens tokens (the forward's scratch grows;
 * it never shrinks). 0, or -1 with err_get(). */
int runner_reserve(runner *r, int max_tokens);

/* The model's weights changed type (quantization, layer by layer): the
 * forward's scratch, sized by the weight types, is made anew. 0, or -1 with
 * err_get() (the runner then has no forward until a reserve succeeds). */
int runner_refresh(runner *r);

/* Carries out the block copies and compactions the block manager recorded
 * (kv/kv_plan.h), keys re-rotated by the model's rope: before every forward
 * pass over blocks the scheduler touched. 0, or -1 with err_get(). */
int runner_apply(runner *r);

/* One forward pass: logits [b->n_out][n_vocab]. 0, or -1 with err_get(). */
static inline int runner_run(runner *r, const fwd_batch *b, float *logits) { return forward_run(r->fwd, b, logits); }

/* A sequence whose block tables are the runner's identity tables. */
static inline fwd_seq runner_identity_seq(const runner *r) {
    fwd_seq s = {0};
    for (int g = 0; g < KV_MAX_GROUPS; g++) s.block_table[g] = r->identity[g];
    return s;
}

#endif
