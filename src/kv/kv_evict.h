/* Eviction of a sequence's KV entries once it holds more than its budget, so a
 * sequence can run far past its memory budget (or the model's trained
 * context) in a fixed number of blocks.
 *
 * Policies (--kv-eviction):
 *   none       nothing is evicted (the default)
 *   streaming  StreamingLLM: the first `sink` tokens (attention sinks) plus the
 *              most recent tokens
 *   h2o        Heavy-Hitter Oracle: the `sink` first tokens, the tokens with
 *              the largest accumulated attention ("heavy hitters", summed over
 *              every layer and query head, so one set of slots serves all
 *              layers) and the most recent tokens, half of what is kept
 *   truncate   the most recent tokens only (plain truncation of the oldest;
 *              streaming with no sinks), the baseline of the papers
 *
 * Positions are re-indexed inside the cache as StreamingLLM does: a token's
 * position is its slot in the cache, not its place in the text. Keys are
 * stored rotated (RoPE at their slot); when compaction moves a key from slot
 * `old` to slot `new` it is re-rotated by new - old through the model's
 * callback (rotations compose: R(new) = R(new - old) R(old)), so attention
 * reads every key as if it had been rotated at its slot.
 *
 * A sequence fills its cache up to the budget; when it is full and needs a
 * next token, it is compacted to the budget less a margin (an eighth of what
 * is not a sink), and steps add at most what is left up to the budget. So
 * compaction, and the re-rotation of a key, happens once per margin tokens
 * and not once per token, and always at the same token counts whatever the
 * chunking: a sequence keeps the same tokens alone, batched, chunked,
 * preempted and recomputed, or started from the prefix cache (a hit is
 * capped at the budget). Compaction moves rows down slot by slot (kept slot
 * i always comes from a slot >= i, so in place, like memmove), block by
 * block, then releases the blocks past the last kept slot: the sequence never
 * holds more than ceil(budget / block_size) blocks per group.
 *
 * A block shared with another sequence (n > 1, beam search) or registered in
 * the prefix cache is never rewritten in place: it is copied first (copy on
 * write), so the other holders and later prefix hits see the original. */
#ifndef CLLM_KV_KV_EVICT_H
#define CLLM_KV_KV_EVICT_H

#include "kv/kv_manager.h"

#include <stdint.h>

typedef enum { KV_EVICT_NONE = 0, KV_EVICT_STREAMING, KV_EVICT_H2O, KV_EVICT_TRUNCATE } kv_evict_policy;

/* The names --kv-eviction and the request field kv_eviction accept. */
#define KV_EVICT_NAMES "none, streaming, h2o, truncate"
/* Sink tokens when none are given. */
#define KV_EVICT_DEFAULT_SINK 4
/* Fewest tokens a budget may have beyond its sinks. */
#define KV_EVICT_MIN_WINDOW 8

typedef struct {
    kv_evict_policy policy;
    int budget; /* tokens kept per sequence at most; 0 with policy none */
    int sink;   /* attention-sink tokens kept from the start (streaming, h2o) */
} kv_evict_params;

const char *kv_evict_name(kv_evict_policy p);
/* 0 and *out set, or -1 for an unknown name. */
int kv_evict_parse(const char *s, kv_evict_policy *out);
/* 0, or -1 with err_get() saying which value is wrong and what is accepted. */
int kv_evict_check(const kv_evict_params *p);

/* Slots a full cache is compacted to: the budget less the margin. */
int kv_evict_n_keep(const kv_evict_params *p);
/* Tokens the next step may add to a cache holding n_cached: up to the
 * budget, or the margin when it is full (after compaction). */
int kv_evict_room(const kv_evict_params *p, int n_cached);

/* Chooses n_keep of the n_cached slots (n_keep < n_cached) and writes them to
 * keep[] in ascending order. scores[n_cached] (accumulated attention, in any
 * fixed-point unit: the forward pass adds ATTN_MASS_ONE units) is read
 * by h2o only; ties go to the later slot. 0, or -1 with err_get() (memory). */
int kv_evict_plan(const kv_evict_params *p, int n_cached, int n_keep, const int64_t *scores, int32_t *keep);


/* Compacts the sequence's blocks: slot keep[i] goes to slot i in every group
 * (keep ascending, keep[i] >= i), keys re-rotated by i - keep[i] when
 * shift (not when they were rotated for slot i already: a draft tree's
 * accepted path, engine/spec_tree.h), and the
 * blocks past slot n_keep - 1 are released. Written blocks that are shared or
 * hashed get private copies first; a copied block the sequence alone held
 * returns to the pool at once, so a sequence that shares nothing needs one
 * free block, however many it copies. The books change now; the copies and
 * the moves are recorded in m->plan for the runner (kv_plan.h). All or
 * nothing: -1 (nothing changed) when the pool lacks blocks for the copies,
 * or memory runs out. */
int kvm_compact(kv_manager *m, seq_kv *s, const int32_t *keep, int n_keep, bool shift);

/* Makes room for n_new (<= kv_evict_room) tokens beside the n_cached a
 * sequence holds: when they would pass the budget, plans (scores[budget] for
 * h2o, moved with their slots; NULL otherwise) and compacts to
 * kv_evict_n_keep slots. Returns the tokens evicted (0 when they fit or the
 * policy is none), or -1 (nothing changed) when the pool lacks blocks for
 * copy-on-write or memory runs out. */
int kvm_evict(kv_manager *m, seq_kv *s, const kv_evict_params *p, int n_cached, int n_new, int64_t *scores);

#endif
