/* Block accounting: a randomized walk of thousands of operations on the KV
 * manager (prefix match, chunked allocation, commit, decode appends with
 * copy-on-write, fork, release, eviction under pressure), with the pool's
 * invariants and every reference count recomputed from the sequences' block
 * tables after each operation. At the end no block is held. A second walk
 * does speculative decode steps (drafts written, a prefix accepted, the rest
 * rolled back with kvm_truncate) beside prefix hits and forks: no shared or
 * cached block is ever written, verified positions keep their tokens' K, no
 * block outlives the tokens it holds, and none leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kv/block_pool.h"
#include "kv/kv_manager.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEQS 12
#define MAX_TOK 400

typedef struct {
    bool live;
    seq_kv kv;
    int32_t tokens[MAX_TOK];
    int n_tokens;
    int n_computed;
    int last_start; /* start of the last allocation: what the tables were trimmed to */
} fake_seq;

/* kvm_allocate, then the copies it recorded carried out, as the runner does before a forward pass. */
static int allocate_now(kv_manager *m, seq_kv *s, int start, int n) {
    const int rc = kvm_allocate(m, s, start, n);
    if (!rc) assert_int_equal(kv_plan_apply(&m->plan, m->cache, NULL, NULL), 0);
    else assert_int_equal(m->plan.n, 0); /* refused: nothing recorded */
    return rc;
}

static uint64_t g_rng = 0x1234567;
static uint32_t rnd(uint32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33) % n;
}

static kv_spec make_spec(bool sliding) {
    kv_spec spec = {.n_layers = 6, .n_kv_heads = 1, .head_dim_k = 8, .head_dim_v = 8};
    for (int il = 0; il < spec.n_layers; il++) spec.window[il] = sliding && il % 3 != 2 ? 40 : 0;
    return spec;
}

static void check_all(kv_manager *m, fake_seq *seqs) {
    if (pool_check(m->pool)) fail_msg("pool invariant: %s", err_get());
    const int nb = pool_n_blocks(m->pool);
    int *refs = calloc((size_t)nb, sizeof *refs);
    const int bs = m->block_size;
    for (int i = 0; i < MAX_SEQS; i++) {
        if (!seqs[i].live) continue;
        for (int g = 0; g < m->n_groups; g++) {
            const block_list *l = &seqs[i].kv.lists[g];
            const int w = m->cache->group_window[g];
            for (int b = 0; b < l->n; b++) {
                if (l->ids[b] < 0) continue;
                assert_true(l->ids[b] < nb);
                refs[l->ids[b]]++;
                /* A sliding group keeps no block that a query at the last
                 * allocation's start could not see. */
                if (w && (b + 1) * bs <= seqs[i].last_start - w + 1)
                    fail_msg("seq %d group %d holds stale block %d", i, g, b);
            }
        }
    }
    int in_use = 0;
    for (int b = 0; b < nb; b++) {
        if (refs[b] != pool_refcount(m->pool, b))
            fail_msg("block %d: %d references in tables, refcount %d", b, refs[b], pool_refcount(m->pool, b));
        in_use += refs[b] > 0;
    }
    assert_int_equal(in_use, pool_n_in_use(m->pool));
    free(refs);
}

/* The end of a walk: every sequence released, every block back in the
 * pool; then everything freed. */
static void end_walk(kv_manager *m, kv_cache *kv, fake_seq *seqs, int n_blocks) {
    for (int i = 0; i < MAX_SEQS; i++)
        if (seqs[i].live) kvm_release(m, &seqs[i].kv);
    assert_int_equal(pool_n_in_use(m->pool), 0);
    assert_int_equal(pool_n_available(m->pool), n_blocks);
    assert_int_equal(pool_check(m->pool), 0);
    free(seqs);
    kvm_destroy(m);
    kv_cache_free(kv);
}

/* Tokens from a small alphabet in a few shared prefixes, so prefixes repeat. */
static void fill_prompt(fake_seq *s) {
    const int family = (int)rnd(3);
    s->n_tokens = 20 + (int)rnd(120);
    for (int i = 0; i < s->n_tokens; i++) s->tokens[i] = i < 48 ? family * 1000 + i : (int32_t)rnd(50);
    s->n_computed = 0;
}

static void run_walk(bool sliding, int n_blocks, int iters) {
    const kv_spec spec = make_spec(sliding);
    kv_cache *kv = kv_cache_create(&spec, KV_F32, 8, n_blocks);
    assert_non_null(kv);
    kv_manager m;
    assert_int_equal(kvm_init(&m, kv, true), 0);
    fake_seq *seqs = calloc(MAX_SEQS, sizeof *seqs);
    int hits = 0, cows = 0, allocation_failures = 0;
    for (int it = 0; it < iters; it++) {
        const int i = (int)rnd(MAX_SEQS);
        fake_seq *s = &seqs[i];
        const int op = (int)rnd(10);
        if (!s->live) {
            if (op < 3) {
                /* fork a live sequence into this slot */
                int src = (int)rnd(MAX_SEQS);
                if (seqs[src].live && src != i) {
                    assert_int_equal(kvm_fork(&m, &seqs[src].kv, &s->kv), 0);
                    memcpy(s->tokens, seqs[src].tokens, sizeof s->tokens);
                    s->n_tokens = seqs[src].n_tokens;
                    s->n_computed = seqs[src].n_computed;
                    s->last_start = seqs[src].last_start;
                    s->live = true;
                }
            } else {
                fill_prompt(s);
                memset(&s->kv, 0, sizeof s->kv);
                s->n_computed = kvm_match_prefix(&m, &s->kv, s->tokens, s->n_tokens);
                s->last_start = s->n_computed;
                hits += s->n_computed > 0;
                assert_true(s->n_computed % 8 == 0 && s->n_computed < s->n_tokens);
                s->live = true;
            }
        } else if (op < 2) {
            kvm_release(&m, &s->kv);
            s->live = false;
        } else if (s->n_computed < s->n_tokens) {
            /* compute a chunk of the known tokens */
            int n = 1 + (int)rnd(24);
            if (n > s->n_tokens - s->n_computed) n = s->n_tokens - s->n_computed;
            int before = pool_n_available(m.pool);
            int want = kvm_blocks_to_allocate(&m, &s->kv, s->n_computed, n);
            if (allocate_now(&m, &s->kv, s->n_computed, n) == 0) {
                s->last_start = s->n_computed;
                s->n_computed += n;
                kvm_commit(&m, &s->kv, s->tokens, s->n_computed);
            } else {
                allocation_failures++;
                assert_true(want > before); /* refused only when short, and nothing changed */
                assert_int_equal(before, pool_n_available(m.pool));
            }
        } else if (s->n_tokens < MAX_TOK) {
            /* decode: a new token, then its block must be private (copy on write) */
            s->tokens[s->n_tokens++] = (int32_t)rnd(50);
            const int b = s->n_computed / 8;
            const bool shared = b < s->kv.lists[0].n && s->kv.lists[0].ids[b] >= 0 &&
                                pool_refcount(m.pool, s->kv.lists[0].ids[b]) > 1;
            if (allocate_now(&m, &s->kv, s->n_computed, 1) == 0) {
                for (int g = 0; g < m.n_groups; g++)
                    assert_int_equal(pool_refcount(m.pool, s->kv.lists[g].ids[b]), 1);
                cows += shared;
                s->last_start = s->n_computed;
                s->n_computed++;
                kvm_commit(&m, &s->kv, s->tokens, s->n_computed);
            } else {
                s->n_tokens--;
                allocation_failures++;
            }
        } else {
            kvm_release(&m, &s->kv);
            s->live = false;
        }
        check_all(&m, seqs);
    }
    /* The walk exercised what it claims to. */
    assert_true(hits > 10);
    assert_true(cows > 0);
    assert_true(allocation_failures > 0);
    end_walk(&m, kv, seqs, n_blocks);
}

static void test_random_walk_full_attention(void **state) {
    (void)state;
    run_walk(false, 48, 20000);
}

static void test_random_walk_with_sliding_groups(void **state) {
    (void)state;
    run_walk(true, 120, 20000);
}

static void test_pool_lru_and_hash_map(void **state) {
    (void)state;
    block_pool *p = pool_create(4);
    int a = pool_alloc(p), b = pool_alloc(p);
    block_hash ha = {1, 2}, hb = {3, 4};
    assert_true(pool_set_hash(p, a, ha));
    assert_true(pool_set_hash(p, b, hb));
    assert_false(pool_set_hash(p, pool_alloc(p), ha)); /* duplicate content keeps the first */
    pool_unref(p, a);  /* cached */
    pool_unref(p, b);  /* cached, more recent */
    assert_int_equal(pool_lookup(p, ha), a);
    /* Free unhashed blocks go first, then the least recently freed cached block (a). */
    int c = pool_alloc(p);
    assert_false(c == a || c == b);
    int d = pool_alloc(p);
    assert_int_equal(d, a);
    assert_int_equal(pool_lookup(p, ha), -1); /* evicted */
    assert_int_equal(pool_lookup(p, hb), b);
    pool_ref(p, b); /* a prefix hit revives a cached block */
    assert_int_equal(pool_n_available(p), 0);
    assert_int_equal(pool_check(p), 0);
    pool_free(p);
}

/* ---- speculative decoding's rollback ---- */

/* What the forward pass would write at a position: K of every layer there
 * holds a value naming the token and the position. */
static float marker(int32_t tok, int pos) { return (float)tok * 1000.0f + (float)pos; }

static float *k_slot(kv_manager *m, int il, int block, int pos) {
    return (float *)kv_k_block(m->cache, il, block) + (size_t)(pos % m->block_size) * m->cache->head_dim_k;
}

/* Writes positions [start, start + n) of tokens t (the last known token and
 * the drafts), checking that every block written is private and unhashed:
 * one the prefix cache shares is never written. */
static void write_positions(kv_manager *m, fake_seq *s, const int32_t *t, int start, int n) {
    for (int il = 0; il < m->cache->n_groups * m->cache->layers_per_group; il++) {
        const block_list *l = &s->kv.lists[m->cache->layer_group[il]];
        for (int pos = start; pos < start + n; pos++) {
            const int b = pos / m->block_size;
            assert_true(b < l->n && l->ids[b] >= 0);
            if (pool_refcount(m->pool, l->ids[b]) != 1 || pool_has_hash(m->pool, l->ids[b]))
                fail_msg("position %d: block %d is shared (ref %d) or cached", pos, l->ids[b],
                         pool_refcount(m->pool, l->ids[b]));
            *k_slot(m, il, l->ids[b], pos) = marker(t[pos - start], pos);
        }
    }
}

/* Every computed position a query could still see holds its own token. */
static void check_contents(kv_manager *m, const fake_seq *s) {
    for (int il = 0; il < m->cache->n_groups * m->cache->layers_per_group; il++) {
        const block_list *l = &s->kv.lists[m->cache->layer_group[il]];
        for (int pos = 0; pos < s->n_computed; pos++) {
            const int b = pos / m->block_size;
            if (b >= l->n || l->ids[b] < 0) continue; /* left a sliding window */
            if (*k_slot(m, il, l->ids[b], pos) != marker(s->tokens[pos], pos))
                fail_msg("layer %d position %d holds %g, not token %d", il, pos, *k_slot(m, il, l->ids[b], pos),
                         s->tokens[pos]);
        }
    }
}

/* A copy of every block the prefix cache could hand out or that two tables
 * share: these must come out of a step unchanged. */
static float *snapshot_shared(kv_manager *m, bool *shared) {
    const int nb = pool_n_blocks(m->pool);
    const size_t per = (size_t)m->cache->layers_per_group * m->cache->k_layer_bytes;
    float *copy = malloc((size_t)nb * per);
    for (int b = 0; b < nb; b++) {
        shared[b] = pool_refcount(m->pool, b) > 1 || pool_has_hash(m->pool, b);
        if (shared[b]) memcpy((char *)copy + b * per, m->cache->k + b * per, per);
    }
    return copy;
}

static void check_shared_unchanged(kv_manager *m, const bool *shared, const float *copy) {
    const size_t per = (size_t)m->cache->layers_per_group * m->cache->k_layer_bytes;
    for (int b = 0; b < pool_n_blocks(m->pool); b++)
        if (shared[b] && memcmp((const char *)copy + b * per, m->cache->k + b * per, per))
            fail_msg("shared block %d was written", b);
}

/* One decode step with drafts: allocate, write, accept a prefix, roll back. */
static bool speculative_step(kv_manager *m, fake_seq *s, int *n_rejected, int *n_shared_seen) {
    int n_draft = (int)rnd(9);
    if (s->n_tokens + n_draft + 1 > MAX_TOK) n_draft = MAX_TOK - s->n_tokens - 1;
    if (n_draft < 0) return false;
    const int start = s->n_computed; /* == n_tokens - 1 */
    if (allocate_now(m, &s->kv, start, 1 + n_draft)) {
        n_draft = 0; /* as the scheduler does: drop the drafts, keep the decode */
        if (allocate_now(m, &s->kv, start, 1)) return false;
    }
    int32_t batch[10];
    batch[0] = s->tokens[start];
    for (int j = 0; j < n_draft; j++) batch[1 + j] = (int32_t)rnd(50);
    bool *shared = calloc((size_t)pool_n_blocks(m->pool), sizeof *shared);
    float *copy = snapshot_shared(m, shared);
    for (int b = 0; b < pool_n_blocks(m->pool); b++) *n_shared_seen += shared[b];
    write_positions(m, s, batch, start, 1 + n_draft);
    /* Accept a prefix of the drafts; then one more token (corrected or bonus). */
    const int accepted = (int)rnd((uint32_t)n_draft + 1);
    for (int j = 0; j < accepted; j++) s->tokens[s->n_tokens++] = batch[1 + j];
    s->tokens[s->n_tokens++] = (int32_t)rnd(50);
    *n_rejected += n_draft - accepted;
    s->last_start = start;
    s->n_computed = start + 1 + accepted;
    kvm_truncate(m, &s->kv, s->n_computed);
    kvm_commit(m, &s->kv, s->tokens, s->n_computed);
    check_shared_unchanged(m, shared, copy);
    free(shared);
    free(copy);
    const int keep = (s->n_computed + m->block_size - 1) / m->block_size;
    for (int g = 0; g < m->n_groups; g++)
        if (s->kv.lists[g].n > keep) fail_msg("group %d keeps %d blocks for %d tokens", g, s->kv.lists[g].n, s->n_computed);
    return true;
}

static void run_rollback_walk(bool sliding, int n_blocks, int iters) {
    const kv_spec spec = make_spec(sliding);
    kv_cache *kv = kv_cache_create(&spec, KV_F32, 8, n_blocks);
    assert_non_null(kv);
    kv_manager m;
    assert_int_equal(kvm_init(&m, kv, true), 0);
    fake_seq *seqs = calloc(MAX_SEQS, sizeof *seqs);
    int hits = 0, rejected = 0, shared_seen = 0, forks = 0, steps = 0;
    for (int it = 0; it < iters; it++) {
        const int i = (int)rnd(MAX_SEQS);
        fake_seq *s = &seqs[i];
        const int op = (int)rnd(10);
        if (!s->live) {
            const int src = (int)rnd(MAX_SEQS);
            if (op < 3 && seqs[src].live && src != i && seqs[src].n_computed == seqs[src].n_tokens - 1) {
                assert_int_equal(kvm_fork(&m, &seqs[src].kv, &s->kv), 0); /* n > 1: samples share blocks */
                memcpy(s->tokens, seqs[src].tokens, sizeof s->tokens);
                s->n_tokens = seqs[src].n_tokens;
                s->n_computed = seqs[src].n_computed;
                s->last_start = seqs[src].last_start;
                s->live = true;
                forks++;
            } else if (op >= 3) {
                fill_prompt(s);
                memset(&s->kv, 0, sizeof s->kv);
                s->n_computed = kvm_match_prefix(&m, &s->kv, s->tokens, s->n_tokens);
                s->last_start = s->n_computed;
                hits += s->n_computed > 0;
                s->live = true;
            }
        } else if (op < 1) {
            kvm_release(&m, &s->kv);
            s->live = false;
        } else if (s->n_computed < s->n_tokens - 1) {
            /* prefill a chunk, short of the last token (decoded with drafts) */
            int n = 1 + (int)rnd(24);
            if (n > s->n_tokens - 1 - s->n_computed) n = s->n_tokens - 1 - s->n_computed;
            if (allocate_now(&m, &s->kv, s->n_computed, n) == 0) {
                write_positions(&m, s, s->tokens + s->n_computed, s->n_computed, n);
                s->last_start = s->n_computed;
                s->n_computed += n;
                kvm_commit(&m, &s->kv, s->tokens, s->n_computed);
            } else {
                kvm_release(&m, &s->kv); /* preempted */
                s->live = false;
            }
        } else if (speculative_step(&m, s, &rejected, &shared_seen)) {
            steps++;
        } else {
            kvm_release(&m, &s->kv);
            s->live = false;
        }
        if (s->live) check_contents(&m, s);
        check_all(&m, seqs);
    }
    /* The walk exercised what it claims to: prefix hits, forks, shared
     * blocks present during speculative steps, rejected drafts. */
    assert_true(hits > 10);
    assert_true(forks > 10);
    assert_true(shared_seen > 100);
    assert_true(rejected > 1000);
    assert_true(steps > 1000);
    end_walk(&m, kv, seqs, n_blocks);
}

static void test_speculative_rollback_full_attention(void **state) {
    (void)state;
    run_rollback_walk(false, 64, 20000);
}

static void test_speculative_rollback_with_sliding_groups(void **state) {
    (void)state;
    run_rollback_walk(true, 160, 20000);
}

/* Latent attention's cache (kv_spec.v_in_k, DeepSeek-V2-Lite's shape: 27
 * layers, one kv head of [512 latent | 64 rope]): no V pages, so a token
 * costs its K rows alone, and the V block of a layer is its K block. */
static void test_values_in_key_rows_cost_nothing(void **state) {
    (void)state;
    kv_spec spec = {.n_layers = 27, .n_kv_heads = 1, .head_dim_k = 576, .head_dim_v = 512, .v_in_k = true};
    assert_int_equal(kv_bytes_per_token(&spec, KV_F16), 27 * 576 * 2);
    assert_int_equal(kv_bytes_per_token(&spec, KV_INT8), 27 * (576 + 4));
    kv_cache *kv = kv_cache_create(&spec, KV_F16, 16, 3);
    assert_non_null(kv);
    assert_int_equal(kv->v_layer_bytes, 0);
    assert_int_equal(kv_block_bytes(kv), (size_t)kv->layers_per_group * 16 * 576 * 2);
    assert_ptr_equal(kv_v_block(kv, 7, 2), kv_k_block(kv, 7, 2));
    kv_cache_free(kv);
}

/* 8-bit caches count their real bytes: a row is head_dim codes and a 4-byte
 * scale, so blocks, the per-token size and the pool's arithmetic use
 * head_dim + 4 (a gemma-3-270m shape: 18 layers, one kv head of 256, 15
 * sliding); copying a block (copy on write) carries the scales with the codes. */
static void test_8bit_block_bytes(void **state) {
    (void)state;
    kv_spec spec = {.n_layers = 18, .n_kv_heads = 1, .head_dim_k = 256, .head_dim_v = 256};
    for (int il = 0; il < spec.n_layers; il++) spec.window[il] = il % 6 == 5 ? 0 : 512;
    const kv_dtype types[] = {KV_INT8, KV_FP8_E4M3, KV_FP8_E5M2};
    for (int i = 0; i < 3; i++) {
        kv_cache layout, f16;
        kv_cache_layout(&spec, types[i], 16, &layout);
        kv_cache_layout(&spec, KV_F16, 16, &f16);
        assert_int_equal(layout.k_layer_bytes, 16 * (256 + 4));
        assert_int_equal(kv_block_bytes(&layout), (size_t)layout.layers_per_group * 2 * 16 * 260);
        assert_int_equal(kv_bytes_per_token(&spec, types[i]), 18 * 2 * 260);
        assert_true(kv_block_bytes(&f16) * 100 >= kv_block_bytes(&layout) * 196); /* 1.97x */
    }
    kv_cache *kv = kv_cache_create(&spec, KV_INT8, 8, 4);
    assert_non_null(kv);
    float x[256];
    for (int d = 0; d < 256; d++) x[d] = (float)(d - 100) * 0.01f;
    kv_row_store(KV_INT8, x, kv_k_block(kv, 5, 1) + 3 * kv_row_bytes(KV_INT8, 256), 256);
    kv_cache_copy_block(kv, 1, 2);
    const uint8_t *row = kv_k_block(kv, 5, 2) + 3 * kv_row_bytes(KV_INT8, 256);
    for (int d = 0; d < 256; d++) assert_true(fabsf(kv_row_value(KV_INT8, row, d) - x[d]) <= 1.56f / 127 / 2 * 1.001f);
    kv_cache_free(kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_8bit_block_bytes),
        cmocka_unit_test(test_values_in_key_rows_cost_nothing),
        cmocka_unit_test(test_pool_lru_and_hash_map),
        cmocka_unit_test(test_random_walk_full_attention),
        cmocka_unit_test(test_random_walk_with_sliding_groups),
        cmocka_unit_test(test_speculative_rollback_full_attention),
        cmocka_unit_test(test_speculative_rollback_with_sliding_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
