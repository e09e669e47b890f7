/* The attention mass each cached key receives (attn_tile.key_mass, H2O's
 * score): the AVX2 tile and the scalar tile agree with a direct softmax in
 * double for every KV dtype, GQA ratio, head dim, block size and window; each
 * gives the same integers whether a chunk is cut into whole tiles, one row
 * per tile or one head per tile, and over an 8-bit cache the integers of the
 * same cache dequantized. On a fixed input of several layers, H2O keeps the
 * same tokens with these scores as with the previous scores (per token and
 * kv head, the group's probabilities summed in double, added to a float). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attn_pages.h"
#include "kernel_paths.h"
#include "kernels/wtype.h"
#include "kv/kv_evict.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const kv_dtype k_dtypes[] = {KV_F32, KV_F16, KV_BF16, KV_INT8, KV_FP8_E4M3, KV_FP8_E5M2};
#define N_DTYPES ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))

/* One layer's attention for a chunk of n_q tokens at positions start .. of
 * one sequence: n_kv kv heads of `ratio` query heads each, q [n_q][n_kv *
 * ratio][dk]. */
typedef struct {
    const pages *p;
    int ratio;
    const float *q;
    int start, n_q, window;
    float scale;
} chunk;

static int first_key(const chunk *c, int pos) { return c->window && pos - c->window + 1 > 0 ? pos - c->window + 1 : 0; }

static size_t q_stride(const chunk *c) { return (size_t)c->p->kv.n_kv_heads * c->ratio * c->p->kv.head_dim_k; }

/* Adds the chunk's mass to mass[] through `fn`, in tiles of tile_tok tokens
 * and, with per_head, one query head per tile (as forward.c cuts decode). */
static void chunk_mass(attn_tile_fn fn, const chunk *c, const paged_kv *kv, const int32_t *table, int tile_tok,
                       bool per_head, int64_t *mass) {
    const int n_head = kv->n_kv_heads * c->ratio;
    const size_t qs = q_stride(c), os = (size_t)n_head * kv->head_dim_v;
    float *out = malloc(sizeof(float) * c->n_q * os);
    int32_t lo[ATTN_TILE_ROWS], hi[ATTN_TILE_ROWS];
    for (int t0 = 0; t0 < c->n_q; t0 += tile_tok) {
        const int nt = c->n_q - t0 < tile_tok ? c->n_q - t0 : tile_tok;
        for (int i = 0; i < nt; i++) hi[i] = c->start + t0 + i, lo[i] = first_key(c, hi[i]);
        for (int h0 = 0; h0 < n_head; h0 += per_head ? 1 : c->ratio) {
            const attn_tile t = {.q = c->q + t0 * qs + (size_t)h0 * kv->head_dim_k, .q_stride = qs,
                                 .out = out + t0 * os + (size_t)h0 * kv->head_dim_v, .out_stride = os,
                                 .lo = lo, .hi = hi, .n_tok = nt, .n_head = per_head ? 1 : c->ratio,
                                 .key_mass = mass};
            fn(kv, table, h0 / c->ratio, &t, c->scale);
        }
    }
    free(out);
}

/* softmax(scale * q.K[j]) for lo <= j <= hi, in double, into p[j]. */
static void row_probs(const chunk *c, int kv_head, const float *q, int lo, int hi, double *p) {
    const paged_kv *kv = &c->p->kv;
    const int bs = kv->block_size, dk = kv->head_dim_k;
    double m = -INFINITY, l = 0;
    for (int j = lo; j <= hi; j++) {
        const size_t row = ((size_t)c->p->table[j / bs] * kv->n_kv_heads + kv_head) * bs + j % bs;
        const uint8_t *krow = c->p->k + row * kv_row_bytes(kv->dtype, dk);
        double x = 0;
        for (int d = 0; d < dk; d++) x += (double)q[d] * kv_row_value(kv->dtype, krow, d);
        p[j] = x * c->scale;
        if (p[j] > m) m = p[j];
    }
    for (int j = lo; j <= hi; j++) l += p[j] = exp(p[j] - m);
    for (int j = lo; j <= hi; j++) p[j] /= l;
}

/* want[j] += each row's probability of key j (in ATTN_MASS_ONE units);
 * rows[j] += the rows that see key j. */
static void direct_mass(const chunk *c, double *want, int *rows) {
    const int n_head = c->p->kv.n_kv_heads * c->ratio;
    double *p = malloc(sizeof(double) * (c->start + c->n_q));
    for (int i = 0; i < c->n_q; i++) {
        const int pos = c->start + i, lo = first_key(c, pos);
        for (int h = 0; h < n_head; h++) {
            row_probs(c, h / c->ratio, c->q + i * q_stride(c) + (size_t)h * c->p->kv.head_dim_k, lo, pos, p);
            for (int j = lo; j <= pos; j++) want[j] += p[j] * ATTN_MASS_ONE, rows[j]++;
        }
    }
    free(p);
}

static void expect_same(const int64_t *a, const int64_t *b, int n, const char *what, kv_dtype dt) {
    for (int j = 0; j < n; j++)
        if (a[j] != b[j]) fail_msg("%s %s: key %d: %lld against %lld", what, kv_dtype_name(dt), j, (long long)a[j],
                                   (long long)b[j]);
}

/* One chunk through both tiles, cut three ways, over the cache and over it
 * dequantized; each against the direct softmax. */
static void check_mass(kv_dtype dt, int bs, int n_kv, int ratio, int dk, int start, int n_q, int window) {
    const int n_pos = start + n_q, n_head = n_kv * ratio;
    pages p = make_pages(dt, bs, n_kv, dk, 16, n_pos), deq = dequantized(&p, n_pos);
    float *q = malloc(sizeof(float) * n_q * n_head * dk);
    for (int i = 0; i < n_q * n_head * dk; i++) q[i] = 2 * frand();
    const chunk c = {.p = &p, .ratio = ratio, .q = q, .start = start, .n_q = n_q, .window = window,
                     .scale = 1.0f / sqrtf((float)dk)};
    double *want = calloc(n_pos, sizeof *want);
    int *rows = calloc(n_pos, sizeof *rows);
    direct_mass(&c, want, rows);
    const int whole = ATTN_TILE_ROWS / ratio;
    const attn_tile_fn fns[] = {attn_tile_ref, attn_tile_avx2};
    const char *names[] = {"ref", "avx2"};
    for (int f = 0; f < (wtype_using_avx2() ? 2 : 1); f++) {
        int64_t *tiles = calloc(n_pos, sizeof(int64_t)), *one = calloc(n_pos, sizeof(int64_t));
        int64_t *heads = calloc(n_pos, sizeof(int64_t)), *dq = calloc(n_pos, sizeof(int64_t));
        chunk_mass(fns[f], &c, &p.kv, p.table, whole, false, tiles);
        chunk_mass(fns[f], &c, &p.kv, p.table, 1, true, one);
        chunk_mass(fns[f], &c, &p.kv, p.table, 3, true, heads);
        chunk_mass(fns[f], &c, &deq.kv, deq.table, whole, false, dq);
        expect_same(one, tiles, n_pos, names[f], dt);
        expect_same(heads, tiles, n_pos, names[f], dt);
        expect_same(dq, tiles, n_pos, names[f], dt);
        for (int j = 0; j < n_pos; j++) {
            /* Each row rounds to a unit on its own; AVX2's float scores and
             * exp add a few millionths of a probability. */
            const double tol = rows[j] * (0.5 + 4e-6 * ATTN_MASS_ONE);
            if (fabs((double)tiles[j] - want[j]) > tol)
                fail_msg("%s %s bs=%d ratio=%d dk=%d window=%d key %d: %lld want %.1f", names[f], kv_dtype_name(dt),
                         bs, ratio, dk, window, j, (long long)tiles[j], want[j]);
        }
        free(tiles), free(one), free(heads), free(dq);
    }
    pages_free(&p), pages_free(&deq);
    free(q), free(want), free(rows);
}

static void test_mass_matches_softmax(void **state) {
    (void)state;
    for (int i = 0; i < N_DTYPES; i++) {
        check_mass(k_dtypes[i], 16, 2, 1, 64, 0, 41, 0);
        check_mass(k_dtypes[i], 16, 1, 4, 256, 29, 23, 0);
        check_mass(k_dtypes[i], 8, 2, 2, 128, 11, 30, 8);
        check_mass(k_dtypes[i], 32, 1, 8, 36, 5, 60, 19);
        check_mass(k_dtypes[i], 16, 1, 4, 256, 90, 1, 0); /* decode */
    }
}

/* ---- H2O's choice ---- */

#define H2O_LAYERS 4
#define H2O_POS 300

/* The scores before the fixed-point mass: per token and kv head, the group's
 * probabilities summed in double, then added to a float. */
static void previous_scores(const chunk *c, float *acc) {
    const int n_kv = c->p->kv.n_kv_heads;
    double *p = malloc(sizeof(double) * (c->start + c->n_q)), *sum = malloc(sizeof(double) * (c->start + c->n_q));
    for (int i = 0; i < c->n_q; i++) {
        const int pos = c->start + i, lo = first_key(c, pos);
        for (int kh = 0; kh < n_kv; kh++) {
            for (int j = lo; j <= pos; j++) sum[j] = 0;
            for (int h = kh * c->ratio; h < (kh + 1) * c->ratio; h++) {
                row_probs(c, kh, c->q + i * q_stride(c) + (size_t)h * c->p->kv.head_dim_k, lo, pos, p);
                for (int j = lo; j <= pos; j++) sum[j] += p[j];
            }
            for (int j = lo; j <= pos; j++) acc[j] += (float)sum[j];
        }
    }
    free(p), free(sum);
}

/* A prompt of H2O_POS tokens through H2O_LAYERS layers (one with a sliding
 * window), in chunks of 64 tokens as the engine computes a prompt: the slots
 * H2O keeps with the fixed-point mass are those it kept with the previous
 * scores. */
static void check_h2o_choice(kv_dtype dt, int n_kv, int ratio, int dk) {
    int64_t mass[H2O_POS] = {0};
    float previous[H2O_POS] = {0};
    for (int layer = 0; layer < H2O_LAYERS; layer++) {
        pages p = make_pages(dt, 16, n_kv, dk, 16, H2O_POS);
        const int n_head = n_kv * ratio;
        float *q = malloc(sizeof(float) * H2O_POS * n_head * dk);
        for (int i = 0; i < H2O_POS * n_head * dk; i++) q[i] = 2 * frand();
        for (int start = 0; start < H2O_POS; start += 64) {
            const int n_q = H2O_POS - start < 64 ? H2O_POS - start : 64;
            const chunk c = {.p = &p, .ratio = ratio, .q = q + (size_t)start * n_head * dk, .start = start,
                             .n_q = n_q, .window = layer == 1 ? 100 : 0, .scale = 1.0f / sqrtf((float)dk)};
            chunk_mass(attn_tile_best(), &c, &p.kv, p.table, ATTN_TILE_ROWS / ratio, false, mass);
            previous_scores(&c, previous);
        }
        pages_free(&p);
        free(q);
    }
    /* The floats as integers, in the same order: every float above 2^-17
     * is a multiple of 2^-40. */
    int64_t previous_fixed[H2O_POS];
    for (int j = 0; j < H2O_POS; j++) previous_fixed[j] = llround(ldexp(previous[j], 40));
    /* 100 of the 300 kept: 4 sinks, 48 recent, 48 heavy hitters of slots 4 .. 251. */
    const kv_evict_params h2o = {.policy = KV_EVICT_H2O, .budget = H2O_POS, .sink = 4};
    const int n_keep = 100, recent = 48;
    int32_t keep[H2O_POS], keep_previous[H2O_POS];
    assert_int_equal(kv_evict_plan(&h2o, H2O_POS, n_keep, mass, keep), 0);
    assert_int_equal(kv_evict_plan(&h2o, H2O_POS, n_keep, previous_fixed, keep_previous), 0);
    for (int i = 0; i < n_keep; i++)
        if (keep[i] != keep_previous[i])
            fail_msg("%s: kept slot %d is %d, previously %d", kv_dtype_name(dt), i, keep[i], keep_previous[i]);
    /* The heavy hitters are a choice, not the latest slots before the window. */
    assert_true(keep[h2o.sink] < H2O_POS - 2 * recent);
}

static void test_h2o_keeps_the_same_tokens(void **state) {
    (void)state;
    check_h2o_choice(KV_F16, 1, 4, 256); /* gemma-3-270m's shape */
    check_h2o_choice(KV_INT8, 2, 4, 64);
    check_h2o_choice(KV_FP8_E4M3, 4, 1, 128);
}

int main(void) {
    wtype_init();
    kernel_paths_print("paths compared with ref", KP_SET_AVX2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mass_matches_softmax),
        cmocka_unit_test(test_h2o_keeps_the_same_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
