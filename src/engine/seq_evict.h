/* KV eviction for a running sequence (policies and compaction in
 * kv/kv_evict.h): before a step computes a sequence's next tokens, the
 * scheduler asks for room; when the tokens would take the cache past the
 * request's budget, the kept slots are chosen and the sequence's blocks
 * compacted in the books, and the sequence's token i moves to KV position
 * i - n_evicted. The rows themselves move, keys re-rotated, when the model
 * runner applies the step's KV plan (runner_apply), before the forward. */
#ifndef CLLM_ENGINE_SEQ_EVICT_H
#define CLLM_ENGINE_SEQ_EVICT_H

#include "engine/request.h"
#include "kv/kv_evict.h"

typedef struct {
    uint64_t n_evictions;      /* compactions */
    uint64_t n_evicted_tokens; /* tokens they evicted */
} evict_env;

static inline bool seq_evicts(const sequence *s) { return s->req->params.evict.policy != KV_EVICT_NONE; }
/* The sequence's next KV position: tokens in its cache. */
static inline int seq_kv_len(const sequence *s) { return s->n_computed - s->n_evicted; }

/* The tokens a step may compute for the sequence, at most n: what fits up to
 * its budget (kv_evict_room). */
int evict_limit_chunk(const sequence *s, int n);
/* How many of its leading tokens the prefix cache may be searched with: an
 * evicting sequence takes no more than its budget from there, an h2o one
 * nothing (its scores are the attention each token received, which a
 * cached block's tokens never did here). */
int evict_prefix_limit(const sequence *s);
/* Makes room for n_new more tokens in the sequence's budget (nothing to do
 * when they fit, or without eviction). 0, or -1 when the pool lacks blocks
 * for copy-on-write (nothing changed). */
int evict_make_room(kv_manager *kvm, evict_env *env, sequence *s, int n_new);
/* A preempted sequence starts again from no KV. */
void evict_reset(sequence *s);
/* A forked sample takes its parent's KV positions and attention scores. */
void evict_fork(const sequence *src, sequence *dst);

#endif
