/* The scheduler: which sequences run this step and how many tokens each
 * computes. Running sequences go first, decodes (one token) before prompt
 * chunks, in admission order; then waiting sequences are admitted in arrival
 * order while the token budget, the sequence limit and the KV blocks allow.
 * A prompt longer than the remaining budget is computed in chunks over
 * several steps. When blocks run out, the most recently admitted running
 * sequence is preempted: its blocks are freed and it waits at the front of
 * the queue, to be recomputed (cheaply, if its blocks are still cached).
 * A decoding sequence with speculative drafts (n_draft > 0) computes them
 * after its token when the budget and the blocks allow; otherwise its drafts
 * are dropped (n_draft lowered), never another sequence preempted for them.
 * A sequence that must preempt itself while it runs alone is marked
 * kv_starved: recomputing it would only come back to the same point.
 * A sequence with KV eviction computes chunks that fit its budget, and is
 * compacted (engine/seq_evict.h) before its blocks are allocated. */
#ifndef CLLM_ENGINE_SCHEDULER_H
#define CLLM_ENGINE_SCHEDULER_H

#include "engine/seq_evict.h"
#include "engine/request.h"
#include "kv/kv_manager.h"

typedef struct {
    sequence **items;
    int n;
    size_t cap;
} seq_queue;

typedef struct {
    seq_queue waiting;
    seq_queue running;
    kv_manager *kvm;
    int max_num_seqs;
    int max_batched_tokens;
    uint64_t admit_counter;
    uint64_t n_preemptions;
    evict_env evict;
} scheduler;

typedef struct {
    sequence **seqs; /* capacity max_num_seqs; each has n_scheduled set */
    int n_seqs;
    int n_tokens;
} sched_batch;

int sched_init(scheduler *s, kv_manager *kvm, int max_num_seqs, int max_batched_tokens);
void sched_destroy(scheduler *s);

int sched_add_waiting(scheduler *s, sequence *seq);
/* A sequence that starts running without being scheduled from the queue
 * (a forked sample). */
int sched_add_running(scheduler *s, sequence *seq);
/* Takes a sequence out of whichever queue holds it and releases its blocks. */
void sched_remove(scheduler *s, sequence *seq);

/* Fills `out` with this step's batch (possibly empty). */
void sched_schedule(scheduler *s, sched_batch *out);

#endif
