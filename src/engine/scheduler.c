/* See scheduler.h. Queues are small arrays kept in order; sequences number in
 * the hundreds at most, so linear scans are cheaper than anything clever. */
#include "engine/scheduler.h"

#include "util/array.h"

#include <stdlib.h>
#include <string.h>

static int q_reserve(seq_queue *q, int n) {
    return array_reserve((void **)&q->items, &q->cap, (size_t)n, sizeof *q->items);
}

static int q_push_back(seq_queue *q, sequence *s) {
    if (q_reserve(q, q->n + 1)) return -1;
    q->items[q->n++] = s;
    return 0;
}

static int q_push_front(seq_queue *q, sequence *s) {
    if (q_reserve(q, q->n + 1)) return -1;
    memmove(q->items + 1, q->items, (size_t)q->n * sizeof *q->items);
    q->items[0] = s;
    q->n++;
    return 0;
}

static bool q_remove(seq_queue *q, sequence *s) {
    for (int i = 0; i < q->n; i++)
        if (q->items[i] == s) {
            memmove(q->items + i, q->items + i + 1, (size_t)(q->n - i - 1) * sizeof *q->items);
            q->n--;
            return true;
        }
    return false;
}

int sched_init(scheduler *s, kv_manager *kvm, int max_num_seqs, int max_batched_tokens) {
    memset(s, 0, sizeof *s);
    s->kvm = kvm;
    s->max_num_seqs = max_num_seqs;
    s->max_batched_tokens = max_batched_tokens;
    /* The running queue never holds more than max_num_seqs plus forked samples;
     * reserving up front keeps preemption from ever failing on allocation. */
    if (q_reserve(&s->running, max_num_seqs * 2) || q_reserve(&s->waiting, 64)) {
        sched_destroy(s);
        return -1;
    }
    return 0;
}

void sched_destroy(scheduler *s) {
    free(s->waiting.items);
    free(s->running.items);
    memset(s, 0, sizeof *s);
}

int sched_add_waiting(scheduler *s, sequence *seq) {
    seq->status = SEQ_WAITING;
    return q_push_back(&s->waiting, seq);
}

int sched_add_running(scheduler *s, sequence *seq) {
    seq->status = SEQ_RUNNING;
    seq->admit_order = ++s->admit_counter;
    return q_push_back(&s->running, seq);
}

void sched_remove(scheduler *s, sequence *seq) {
    if (!q_remove(&s->running, seq)) q_remove(&s->waiting, seq);
    kvm_release(s->kvm, &seq->kv);
}

static void unschedule(sched_batch *b, sequence *seq) {
    for (int i = 0; i < b->n_seqs; i++)
        if (b->seqs[i] == seq) {
            b->n_tokens -= seq->n_scheduled;
            memmove(b->seqs + i, b->seqs + i + 1, (size_t)(b->n_seqs - i - 1) * sizeof *b->seqs);
            b->n_seqs--;
            break;
        }
    seq->scheduled = false;
    seq->n_scheduled = 0;
}

/* Frees the victim's blocks; it will be recomputed from its tokens. */
static void preempt(scheduler *s, sched_batch *b, sequence *victim) {
    if (victim->scheduled) unschedule(b, victim);
    victim->spec.n_draft = 0;
    kvm_release(s->kvm, &victim->kv);
    victim->n_computed = 0;
    evict_reset(victim);
    victim->preempted = true;
    s->n_preemptions++;
}

/* The most recently admitted running sequence not yet preempted this step. */
static sequence *pick_victim(scheduler *s) {
    sequence *v = NULL;
    for (int i = 0; i < s->running.n; i++) {
        sequence *c = s->running.items[i];
        if (!c->preempted && (!v || c->admit_order > v->admit_order)) v = c;
    }
    return v;
}

static void add_to_batch(sched_batch *b, sequence *seq, int n) {
    seq->scheduled = true;
    seq->n_scheduled = n;
    b->seqs[b->n_seqs++] = seq;
    b->n_tokens += n;
}

/* Schedules a running sequence, preempting others (or itself) for blocks. */
static void schedule_running(scheduler *s, sched_batch *b, sequence *seq, bool *preempted_any) {
    const int budget = s->max_batched_tokens - b->n_tokens;
    const int remaining = seq->n_tokens - seq->n_computed;
    int n = evict_limit_chunk(seq, remaining < budget ? remaining : budget);
    if (seq->spec.n_draft > 0) {
        /* A decode with drafts: they come after the token, as budget and blocks
         * allow; they never cost anyone else their place. */
        if (seq->spec.n_draft > budget - n) seq->spec.n_draft = budget - n > 0 ? budget - n : 0;
        if (seq->spec.n_draft > 0 && kvm_allocate(s->kvm, &seq->kv, seq_kv_len(seq), n + seq->spec.n_draft))
            seq->spec.n_draft = 0;
        n += seq->spec.n_draft;
    }
    while (evict_make_room(s->kvm, &s->evict, seq, n) || kvm_allocate(s->kvm, &seq->kv, seq_kv_len(seq), n)) {
        sequence *victim = pick_victim(s);
        preempt(s, b, victim);
        *preempted_any = true;
        if (victim == seq) {
            seq->kv_starved = s->running.n == 1; /* nobody else holds blocks: waiting cannot help */
            return;
        }
    }
    add_to_batch(b, seq, n);
}

void sched_schedule(scheduler *s, sched_batch *b) {
    b->n_seqs = 0;
    b->n_tokens = 0;
    for (int i = 0; i < s->running.n; i++) {
        s->running.items[i]->scheduled = false;
        s->running.items[i]->preempted = false;
        s->running.items[i]->n_scheduled = 0;
    }
    bool preempted_any = false;
    /* Room for every running sequence in the waiting queue, so moving
     * preempted ones there below cannot fail. */
    q_reserve(&s->waiting, s->waiting.n + s->running.n);
    /* Decodes first, then prompt chunks; each pass in admission order. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->running.n; i++) {
            sequence *seq = s->running.items[i];
            if (seq->scheduled || seq->preempted) continue;
            if (seq->n_tokens == seq->n_computed) continue; /* a beam waiting for its siblings */
            const bool decode = seq->n_tokens - seq->n_computed == 1;
            if (decode != (pass == 0)) continue;
            if (b->n_tokens >= s->max_batched_tokens || b->n_seqs >= s->max_num_seqs) break;
            schedule_running(s, b, seq, &preempted_any);
        }
    /* Preempted sequences go back to the front of the queue, oldest first. */
    for (int i = s->running.n - 1; i >= 0; i--) {
        sequence *seq = s->running.items[i];
        if (!seq->preempted) continue;
        q_remove(&s->running, seq);
        seq->status = SEQ_WAITING;
        q_push_front(&s->waiting, seq);
    }
    if (preempted_any) return; /* memory is short: admit nobody this step */
    while (s->waiting.n > 0 && b->n_tokens < s->max_batched_tokens && b->n_seqs < s->max_num_seqs &&
           s->running.n < s->max_num_seqs) {
        sequence *seq = s->waiting.items[0];
        /* Prompt logprobs need every prompt position computed: no prefix-cache hit. */
        const int limit = seq_wants_prompt_logits(seq) ? 0 : evict_prefix_limit(seq);
        const int cached = kvm_match_prefix(s->kvm, &seq->kv, seq->tokens, limit);
        seq->n_computed = cached;
        const int budget = s->max_batched_tokens - b->n_tokens;
        const int remaining = seq->n_tokens - seq->n_computed;
        const int n = evict_limit_chunk(seq, remaining < budget ? remaining : budget);
        if (evict_make_room(s->kvm, &s->evict, seq, n) || kvm_allocate(s->kvm, &seq->kv, seq_kv_len(seq), n)) {
            kvm_release(s->kvm, &seq->kv); /* the matched prefix stays cached */
            seq->n_computed = 0;
            evict_reset(seq);
            break;
        }
        if (seq->index == 0 && seq->req->t_scheduled == 0) seq->req->n_cached_tokens = cached;
        s->kvm->prefix_queries += (uint64_t)seq->n_tokens;
        s->kvm->prefix_hits += (uint64_t)cached;
        q_remove(&s->waiting, seq);
        sched_add_running(s, seq);
        add_to_batch(b, seq, n);
    }
}
