/* The scheduler alone, with no model and no forward pass: a step is
 * sched_schedule, then every scheduled sequence counts its tokens computed
 * (and a decode appends a made-up token), as the engine would after the
 * runner ran the batch. It checks admission order and the token budget,
 * decodes before prompt chunks, preemption when blocks run out, prefix-cache
 * hits on admission, that an evicting sequence's compaction is only recorded
 * (the KV plan holds the move; no byte of the cache changes), and that a
 * sequence the whole pool cannot hold is marked kv_starved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "engine/finish.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_manager.h"

#include <stdlib.h>
#include <string.h>

#define BS 8

typedef struct {
    kv_cache *kv;
    kv_manager kvm;
    scheduler sched;
    sched_batch batch;
    request *reqs[8];
    int n_reqs;
} world;

static void world_init(world *w, int n_blocks, int max_num_seqs, int max_batched_tokens) {
    memset(w, 0, sizeof *w);
    const kv_spec spec = {.n_layers = 2, .n_kv_heads = 1, .head_dim_k = 4, .head_dim_v = 4};
    w->kv = kv_cache_create(&spec, KV_F32, BS, n_blocks);
    assert_non_null(w->kv);
    assert_int_equal(kvm_init(&w->kvm, w->kv, true), 0);
    assert_int_equal(sched_init(&w->sched, &w->kvm, max_num_seqs, max_batched_tokens), 0);
    w->batch.seqs = calloc((size_t)max_num_seqs, sizeof *w->batch.seqs);
    assert_non_null(w->batch.seqs);
}

static void world_free(world *w) {
    for (int i = 0; i < w->n_reqs; i++) {
        sched_remove(&w->sched, &w->reqs[i]->seqs[0]);
        request_free(w->reqs[i]);
    }
    assert_int_equal(pool_n_in_use(w->kvm.pool), 0); /* every block came back */
    free(w->batch.seqs);
    sched_destroy(&w->sched);
    kvm_destroy(&w->kvm);
    kv_cache_free(w->kv);
}

/* A request of n_prompt tokens (seeded) that generates max_tokens; queued. */
static sequence *submit(world *w, int n_prompt, int seed, int max_tokens, const kv_evict_params *ev) {
    int32_t prompt[256];
    for (int i = 0; i < n_prompt; i++) prompt[i] = 3 + (seed * 31 + i * 7) % 97;
    request_params p = request_params_defaults();
    p.max_tokens = max_tokens;
    if (ev) p.evict = *ev;
    request *r = request_create((uint64_t)w->n_reqs + 1, prompt, n_prompt, &p);
    assert_non_null(r);
    w->reqs[w->n_reqs++] = r;
    assert_int_equal(sched_add_waiting(&w->sched, &r->seqs[0]), 0);
    return &r->seqs[0];
}

/* One step: schedule, then what the engine does once the batch has run. */
static void step(world *w) {
    sched_schedule(&w->sched, &w->batch);
    assert_true(w->batch.n_tokens <= w->sched.max_batched_tokens);
    kv_plan_clear(&w->kvm.plan); /* no data to move: nothing here reads the cache */
    for (int i = 0; i < w->batch.n_seqs; i++) {
        sequence *s = w->batch.seqs[i];
        assert_true(s->n_scheduled > 0);
        s->n_computed += s->n_scheduled;
        if (s->n_evicted == 0) kvm_commit(&w->kvm, &s->kv, s->tokens, s->n_computed);
        if (s->n_computed < s->n_tokens) continue; /* a prompt chunk short of the end */
        if (seq_n_output(s) == s->req->params.max_tokens) {
            finish_sequence(&w->sched, s, FINISH_LENGTH, NULL, 0, NULL, "", 0, false);
            continue;
        }
        assert_int_equal(seq_append_token(s, 5 + s->n_tokens % 11), 0);
    }
}

static bool finished(const sequence *s) { return s->status == SEQ_FINISHED; }

static void test_admission_order_budget_and_decodes_first(void **state) {
    (void)state;
    world w;
    world_init(&w, 64, 4, 16);
    sequence *a = submit(&w, 20, 1, 3, NULL), *b = submit(&w, 20, 2, 3, NULL), *c = submit(&w, 20, 3, 3, NULL);
    step(&w); /* a's first 16 prompt tokens fill the budget */
    assert_int_equal(w.batch.n_seqs, 1);
    assert_ptr_equal(w.batch.seqs[0], a);
    assert_int_equal(a->n_computed, 16);
    assert_int_equal(b->status, SEQ_WAITING);
    step(&w); /* a's last 4, then b admitted with the 12 left */
    assert_int_equal(w.batch.n_seqs, 2);
    assert_ptr_equal(w.batch.seqs[0], a);
    assert_ptr_equal(w.batch.seqs[1], b);
    assert_int_equal(b->n_scheduled, 12);
    step(&w); /* a decodes (one token, first), then b's prompt chunk */
    assert_ptr_equal(w.batch.seqs[0], a);
    assert_int_equal(a->n_scheduled, 1);
    assert_ptr_equal(w.batch.seqs[1], b);
    assert_int_equal(b->n_scheduled, 8);
    for (int i = 0; i < 20 && !(finished(a) && finished(b) && finished(c)); i++) step(&w);
    assert_true(finished(a) && finished(b) && finished(c));
    assert_int_equal(seq_n_output(c), 3);
    assert_int_equal(w.sched.n_preemptions, 0);
    world_free(&w);
}

static void test_preemption_frees_the_latest_and_it_comes_back(void **state) {
    (void)state;
    world w;
    /* One full-attention group: each sequence grows to 32 + 24 tokens, 7 blocks; two need 14 of 10. */
    world_init(&w, 10, 4, 64);
    sequence *a = submit(&w, 32, 1, 24, NULL), *b = submit(&w, 32, 2, 24, NULL);
    bool b_preempted = false;
    for (int i = 0; i < 200 && !(finished(a) && finished(b)); i++) {
        const uint64_t before = w.sched.n_preemptions;
        step(&w);
        if (w.sched.n_preemptions > before) {
            /* the most recently admitted goes, its blocks freed, back at the queue's front */
            assert_int_equal(b->status, SEQ_WAITING);
            assert_int_equal(b->n_computed, 0);
            assert_ptr_equal(w.sched.waiting.items[0], b);
            b_preempted = true;
        }
        assert_true(pool_n_in_use(w.kvm.pool) <= 10);
    }
    assert_true(b_preempted);
    assert_true(finished(a) && finished(b));
    assert_int_equal(seq_n_output(a), 24);
    assert_int_equal(seq_n_output(b), 24);
    world_free(&w);
}

static void test_prefix_hit_on_admission(void **state) {
    (void)state;
    world w;
    world_init(&w, 64, 4, 64);
    sequence *a = submit(&w, 30, 7, 1, NULL);
    for (int i = 0; i < 5 && !finished(a); i++) step(&w);
    assert_true(finished(a)); /* its 3 full blocks stay cached in the pool */
    sequence *b = submit(&w, 30, 7, 1, NULL);
    const uint64_t hits = w.kvm.prefix_hits;
    step(&w);
    assert_int_equal(w.kvm.prefix_hits - hits, 24);
    assert_int_equal(b->req->n_cached_tokens, 24);
    assert_int_equal(b->n_scheduled, 6); /* only what the cache lacks */
    world_free(&w);
}

static void test_eviction_is_recorded_not_done(void **state) {
    (void)state;
    world w;
    world_init(&w, 64, 4, 64);
    const kv_evict_params ev = {.policy = KV_EVICT_STREAMING, .budget = 24, .sink = 4};
    sequence *s = submit(&w, 12, 3, 60, &ev);
    /* Mark the cache so a moved byte would show. */
    const size_t k_bytes = (size_t)w.kv->n_blocks * w.kv->layers_per_group * w.kv->k_layer_bytes;
    memset(w.kv->k, 0x5a, k_bytes);
    int moves = 0;
    for (int i = 0; i < 100 && !finished(s); i++) {
        sched_schedule(&w.sched, &w.batch);
        for (int k = 0; k < w.kvm.plan.n; k++)
            if (w.kvm.plan.ops[k].kind == KV_OP_MOVE) {
                moves++;
                assert_int_equal(w.kvm.plan.ops[k].n_keep, kv_evict_n_keep(&ev));
            }
        kv_plan_clear(&w.kvm.plan);
        for (size_t b = 0; b < k_bytes; b++)
            if (w.kv->k[b] != 0x5a) fail_msg("the scheduler wrote KV byte %zu", b);
        /* never more blocks than the budget's */
        int held = 0;
        for (int b = 0; b < s->kv.lists[0].n; b++) held += s->kv.lists[0].ids[b] >= 0;
        assert_true(held <= (ev.budget + BS - 1) / BS);
        for (int k = 0; k < w.batch.n_seqs; k++) {
            sequence *q = w.batch.seqs[k];
            q->n_computed += q->n_scheduled;
            if (q->n_computed < q->n_tokens) continue;
            if (seq_n_output(q) == q->req->params.max_tokens)
                finish_sequence(&w.sched, q, FINISH_LENGTH, NULL, 0, NULL, "", 0, false);
            else
                assert_int_equal(seq_append_token(q, 9), 0);
        }
    }
    assert_true(finished(s));
    assert_true(moves > 0);
    assert_true(s->n_evicted > 0);
    world_free(&w);
}

static void test_a_sequence_the_pool_cannot_hold_is_starved(void **state) {
    (void)state;
    world w;
    world_init(&w, 3, 4, 64); /* 24 tokens of room; the sequence wants 20 + 12 */
    sequence *s = submit(&w, 20, 1, 12, NULL);
    for (int i = 0; i < 40 && !s->kv_starved; i++) step(&w);
    assert_true(s->kv_starved);
    assert_int_equal(s->status, SEQ_WAITING);
    assert_int_equal(pool_n_in_use(w.kvm.pool), 0);
    world_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_order_budget_and_decodes_first),
        cmocka_unit_test(test_preemption_frees_the_latest_and_it_comes_back),
        cmocka_unit_test(test_prefix_hit_on_admission),
        cmocka_unit_test(test_eviction_is_recorded_not_done),
        cmocka_unit_test(test_a_sequence_the_pool_cannot_hold_is_starved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
