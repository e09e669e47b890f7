/* KV eviction (kv/kv_evict.h): which slots each policy keeps, the room a step
 * gets, and compaction over real blocks: every kept row lands in its new slot
 * with its key shifted by the distance it moved (a fake shift that adds the
 * delta, so the amount is checked exactly) and its value untouched, blocks
 * past the kept slots go back to the pool, and blocks shared with a fork or
 * registered in the prefix cache are copied first, never written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kv/block_pool.h"
#include "kv/kv_evict.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define DIM 4
#define BS 8

static void test_plan_streaming_truncate_h2o(void **state) {
    (void)state;
    const kv_evict_params st = {.policy = KV_EVICT_STREAMING, .budget = 36, .sink = 4};
    /* margin = (36 - 4) / 8 = 4: a full cache keeps 32 */
    assert_int_equal(kv_evict_n_keep(&st), 32);
    assert_int_equal(kv_evict_room(&st, 10), 26);
    assert_int_equal(kv_evict_room(&st, 36), 4);
    int32_t keep[64];
    assert_int_equal(kv_evict_plan(&st, 36, 32, NULL, keep), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(keep[i], i);
    for (int i = 4; i < 32; i++) assert_int_equal(keep[i], i + 4); /* slots 8..35 */

    const kv_evict_params tr = {.policy = KV_EVICT_TRUNCATE, .budget = 36, .sink = 4};
    assert_int_equal(kv_evict_n_keep(&tr), 36 - 36 / 8); /* no sinks: margin 36 / 8 */
    assert_int_equal(kv_evict_plan(&tr, 36, 32, NULL, keep), 0);
    for (int i = 0; i < 32; i++) assert_int_equal(keep[i], i + 4);

    /* h2o: 2 sinks, 8 kept of 20; recent = 3, heavy = 3 from slots 2..16 by score (ties: later slot). */
    const kv_evict_params h2o = {.policy = KV_EVICT_H2O, .budget = 20, .sink = 2};
    int64_t scores[20] = {0};
    scores[5] = 3, scores[9] = 2, scores[12] = 2, scores[3] = 2, scores[18] = 100;
    assert_int_equal(kv_evict_plan(&h2o, 20, 8, scores, keep), 0);
    const int32_t want[8] = {0, 1, 5, 9, 12, 17, 18, 19};
    for (int i = 0; i < 8; i++) assert_int_equal(keep[i], want[i]);
}

static void test_bad_params(void **state) {
    (void)state;
    kv_evict_policy p;
    assert_int_equal(kv_evict_parse("h2o", &p), 0);
    assert_int_equal(p, KV_EVICT_H2O);
    assert_int_equal(kv_evict_parse("lru", &p), -1);
    assert_int_equal(kv_evict_check(&(kv_evict_params){.policy = KV_EVICT_NONE}), 0);
    assert_int_equal(kv_evict_check(&(kv_evict_params){.policy = KV_EVICT_STREAMING, .budget = 0, .sink = 4}), -1);
    assert_non_null(strstr(err_get(), "needs a budget"));
    assert_int_equal(kv_evict_check(&(kv_evict_params){.policy = KV_EVICT_STREAMING, .budget = 11, .sink = 4}), -1);
    assert_non_null(strstr(err_get(), "too small"));
    assert_int_equal(kv_evict_check(&(kv_evict_params){.policy = KV_EVICT_TRUNCATE, .budget = 8, .sink = 4}), 0);
    assert_int_equal(kv_evict_check(&(kv_evict_params){.policy = KV_EVICT_H2O, .budget = 40, .sink = -1}), -1);
}

/* ---- compaction over real blocks ---- */

typedef struct {
    int calls;
} shift_log;

/* A stand-in for rope: adds delta to every value, so a moved key must come out
 * shifted by exactly (new - old). */
static void add_delta(void *user, int layer, float *rows, int n_rows, int delta) {
    (void)layer;
    ((shift_log *)user)->calls++;
    for (int i = 0; i < n_rows * DIM; i++) rows[i] += (float)delta;
}

/* kvm_evict, then what it recorded carried out, as the runner does before a
 * forward pass; until then no row of the cache has moved. */
static int evict_now(kv_manager *m, seq_kv *s, const kv_evict_params *p, int n_cached, int n_new, shift_log *log) {
    const kv_cache *kv = m->cache;
    const size_t k_bytes = (size_t)kv->n_blocks * kv->layers_per_group * kv->k_layer_bytes;
    const size_t v_bytes = (size_t)kv->n_blocks * kv->layers_per_group * kv->v_layer_bytes;
    uint8_t *k = malloc(k_bytes), *v = malloc(v_bytes);
    assert_true(k && v);
    memcpy(k, kv->k, k_bytes);
    memcpy(v, kv->v, v_bytes);
    const int gone = kvm_evict(m, s, p, n_cached, n_new, NULL);
    assert_memory_equal(k, kv->k, k_bytes); /* the books changed, the data not yet */
    assert_memory_equal(v, kv->v, v_bytes);
    free(k);
    free(v);
    if (gone < 0) assert_int_equal(m->plan.n, 0); /* refused: nothing recorded */
    assert_int_equal(kv_plan_apply(&m->plan, m->cache, add_delta, log), 0);
    return gone;
}

static kv_manager *make_manager(int n_blocks) {
    kv_spec spec = {.n_layers = 3, .n_kv_heads = 2, .head_dim_k = DIM, .head_dim_v = DIM};
    spec.window[1] = 8; /* a sliding layer: its own group */
    kv_cache *kv = kv_cache_create(&spec, KV_F32, BS, n_blocks);
    assert_non_null(kv);
    kv_manager *m = calloc(1, sizeof *m);
    assert_int_equal(kvm_init(m, kv, true), 0);
    return m;
}

static void free_manager(kv_manager *m) {
    kv_cache *kv = m->cache;
    kvm_destroy(m);
    kv_cache_free(kv);
    free(m);
}

/* Every block back in the pool, its invariants whole; then frees it all. */
static void expect_all_returned(kv_manager *m) {
    assert_int_equal(pool_n_in_use(m->pool), 0);
    assert_int_equal(pool_check(m->pool), 0);
    free_manager(m);
}

static float *row_at(kv_manager *m, const seq_kv *s, int il, int pos, int h, bool key) {
    const kv_cache *kv = m->cache;
    const int blk = kvm_table(s, kv->layer_group[il])[pos / BS];
    uint8_t *base = key ? kv_k_block(kv, il, blk) : kv_v_block(kv, il, blk);
    return (float *)(base + ((size_t)h * BS + pos % BS) * DIM * sizeof(float));
}

/* Token t's K in layer il, head h: 1000 t + 100 il + 10 h + d; V the negative. */
static void fill(kv_manager *m, const seq_kv *s, int n) {
    for (int il = 0; il < 3; il++)
        for (int t = 0; t < n; t++)
            for (int h = 0; h < 2; h++)
                for (int d = 0; d < DIM; d++) {
                    row_at(m, s, il, t, h, true)[d] = 1000.0f * t + 100.0f * il + 10.0f * h + d;
                    row_at(m, s, il, t, h, false)[d] = -(1000.0f * t + 100.0f * il + 10.0f * h + d);
                }
}

static void check_moved(kv_manager *m, const seq_kv *s, const int32_t *keep, int n_keep) {
    for (int il = 0; il < 3; il++)
        for (int i = 0; i < n_keep; i++)
            for (int h = 0; h < 2; h++)
                for (int d = 0; d < DIM; d++) {
                    const float v = 1000.0f * keep[i] + 100.0f * il + 10.0f * h + d;
                    assert_float_equal(row_at(m, s, il, i, h, true)[d], v + (float)(i - keep[i]), 0);
                    assert_float_equal(row_at(m, s, il, i, h, false)[d], -v, 0);
                }
}

static void test_compaction_moves_rows_and_frees_blocks(void **state) {
    (void)state;
    kv_manager *m = make_manager(64);
    seq_kv s = {.keep_window_blocks = true};
    assert_int_equal(kvm_allocate(m, &s, 0, 40), 0); /* 5 blocks in each of 2 groups */
    fill(m, &s, 40);
    assert_int_equal(pool_n_in_use(m->pool), m->n_groups * 5);
    const kv_evict_params p = {.policy = KV_EVICT_STREAMING, .budget = 40, .sink = 3};
    shift_log log = {0};
    const int gone = evict_now(m, &s, &p, 40, 2, &log);
    const int n_keep = kv_evict_n_keep(&p); /* 40 - 37 / 8 = 36 */
    assert_int_equal(gone, 40 - n_keep);
    int32_t keep[40];
    for (int i = 0; i < 3; i++) keep[i] = i;
    for (int i = 3; i < n_keep; i++) keep[i] = 40 - n_keep + i;
    check_moved(m, &s, keep, n_keep);
    assert_int_equal(log.calls, 3 * (n_keep - 3)); /* every layer of every moved token, sinks untouched */
    assert_int_equal(pool_n_in_use(m->pool), m->n_groups * ((n_keep + BS - 1) / BS));
    /* Fits: nothing to do. */
    assert_int_equal(evict_now(m, &s, &p, n_keep, 2, &log), 0);
    kvm_release(m, &s);
    expect_all_returned(m);
}

static void test_shared_and_cached_blocks_are_copied_not_written(void **state) {
    (void)state;
    kv_manager *m = make_manager(64);
    seq_kv a = {.keep_window_blocks = true}, b;
    int32_t tokens[40];
    for (int i = 0; i < 40; i++) tokens[i] = 7 + i;
    assert_int_equal(kvm_allocate(m, &a, 0, 40), 0);
    fill(m, &a, 40);
    kvm_commit(m, &a, tokens, 40); /* all 5 full blocks enter the prefix cache */
    assert_int_equal(kvm_fork(m, &a, &b), 0);
    const int32_t before = kvm_table(&b, 0)[1];
    const kv_evict_params p = {.policy = KV_EVICT_TRUNCATE, .budget = 40};
    shift_log log = {0};
    assert_int_equal(evict_now(m, &a, &p, 40, 1, &log), 40 - kv_evict_n_keep(&p));
    /* a's blocks are new copies; b still holds the originals, with their data and hashes. */
    assert_int_not_equal(kvm_table(&a, 0)[1], before);
    assert_int_equal(kvm_table(&b, 0)[1], before);
    int32_t identity[40];
    for (int i = 0; i < 40; i++) identity[i] = i;
    check_moved(m, &b, identity, 40);
    assert_true(pool_has_hash(m->pool, before));
    assert_int_equal(a.n_registered, 0);
    /* A fresh sequence still finds the whole prefix, intact. */
    seq_kv c = {.keep_window_blocks = true};
    assert_int_equal(kvm_match_prefix(m, &c, tokens, 40), 32);
    check_moved(m, &c, identity, 32);
    kvm_release(m, &a);
    kvm_release(m, &b);
    kvm_release(m, &c);
    expect_all_returned(m);
}

static void test_no_blocks_for_copies_changes_nothing(void **state) {
    (void)state;
    kv_manager *m = make_manager(15); /* exactly the sequence's 5 blocks in each of 3 groups */
    assert_int_equal(m->n_groups, 3);
    seq_kv a = {.keep_window_blocks = true}, b;
    assert_int_equal(kvm_allocate(m, &a, 0, 40), 0);
    fill(m, &a, 40);
    assert_int_equal(kvm_fork(m, &a, &b), 0);
    const int32_t first = kvm_table(&a, 0)[0];
    const kv_evict_params p = {.policy = KV_EVICT_TRUNCATE, .budget = 40};
    shift_log log = {0};
    assert_int_equal(evict_now(m, &a, &p, 40, 1, &log), -1);
    assert_int_equal(kvm_table(&a, 0)[0], first);
    assert_int_equal(log.calls, 0);
    kvm_release(m, &a);
    kvm_release(m, &b);
    expect_all_returned(m);
}

/* A sequence alone whose blocks are all in the prefix cache copies each one it
 * writes, but each original goes back to the pool as it is copied: one free
 * block is enough (cllm generate's pool is sized so; it used to need one per
 * copy, failed, and preempted itself forever). */
static void test_cached_blocks_alone_need_one_free_block(void **state) {
    (void)state;
    for (int spare = 0; spare <= 1; spare++) {
        kv_manager *m = make_manager(15 + spare); /* the sequence's 5 blocks in each of 3 groups, + spare */
        assert_int_equal(m->n_groups, 3);
        seq_kv a = {.keep_window_blocks = true};
        int32_t tokens[40];
        for (int i = 0; i < 40; i++) tokens[i] = 7 + i;
        assert_int_equal(kvm_allocate(m, &a, 0, 40), 0);
        fill(m, &a, 40);
        kvm_commit(m, &a, tokens, 40);
        const int32_t first = kvm_table(&a, 0)[0];
        const kv_evict_params p = {.policy = KV_EVICT_TRUNCATE, .budget = 40};
        shift_log log = {0};
        const int n_keep = kv_evict_n_keep(&p);
        const int gone = evict_now(m, &a, &p, 40, 1, &log);
        if (!spare) {
            assert_int_equal(gone, -1); /* no block to copy into: nothing changed */
            assert_int_equal(kvm_table(&a, 0)[0], first);
            assert_int_equal(log.calls, 0);
        } else {
            assert_int_equal(gone, 40 - n_keep);
            int32_t keep[40];
            for (int i = 0; i < n_keep; i++) keep[i] = 40 - n_keep + i;
            check_moved(m, &a, keep, n_keep);
            assert_int_equal(pool_n_in_use(m->pool), m->n_groups * ((n_keep + BS - 1) / BS));
            assert_int_equal(pool_check(m->pool), 0);
        }
        kvm_release(m, &a);
        expect_all_returned(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_streaming_truncate_h2o),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_compaction_moves_rows_and_frees_blocks),
        cmocka_unit_test(test_shared_and_cached_blocks_are_copied_not_written),
        cmocka_unit_test(test_no_blocks_for_copies_changes_nothing),
        cmocka_unit_test(test_cached_blocks_alone_need_one_free_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
