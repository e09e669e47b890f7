/* Paged attention: the AVX2 kernel agrees with the scalar reference, and the
 * reference agrees with a direct softmax over a contiguous copy of the keys,
 * for pages of every KV dtype (f32, f16, bf16, int8, fp8 e4m3/e5m2),
 * scattered block tables, partial blocks and windows,
 * and value heads up to the 4096 dims model/arch.c accepts. The tiles (a
 * prompt chunk's tokens x a GQA group's heads at once), scalar and AVX2, agree
 * with the one-row reference for every tile size, GQA ratio, head dim and
 * window (and soft-capped scores, Gemma 2's, and attention sinks, gpt-oss's),
 * and an AVX2 row has the same
 * bits in every tile as alone. A draft tree's rows (speculative decoding)
 * see the prefix and their ancestors, no other node. Over an
 * 8-bit cache each kernel gives the bits it gives over the same cache
 * dequantized to f32: the codes are decoded in registers, exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attn_pages.h"
#include "kernel_paths.h"
#include "kernels/wtype.h"
#include "kv/kv_cache.h"
#include "util/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float elem(const pages *p, const uint8_t *base, int dim, int head, int j, int d) {
    const int bs = p->kv.block_size;
    const size_t row = ((size_t)p->table[j / bs] * p->kv.n_kv_heads + head) * bs + j % bs;
    return kv_row_value(p->kv.dtype, base + row * kv_row_bytes(p->kv.dtype, dim), d);
}

/* Direct two-pass softmax in double; softcap > 0: scores softcap *
 * tanh(score / softcap) first (Gemma 2); sink: one more score in the
 * softmax, with no value (gpt-oss; -INFINITY: none). */
static void naive_full(const pages *p, int head, const float *q, int lo, int hi, float scale, float softcap,
                       float sink, float *out) {
    const int dk = p->kv.head_dim_k, dv = p->kv.head_dim_v;
    double s[1024], m = sink, l = 0;
    for (int j = lo; j <= hi; j++) {
        double x = 0;
        for (int d = 0; d < dk; d++) x += (double)q[d] * elem(p, p->k, dk, head, j, d);
        s[j] = softcap > 0 ? softcap * tanh(x * scale / softcap) : x * scale;
        if (s[j] > m) m = s[j];
    }
    for (int j = lo; j <= hi; j++) l += exp(s[j] - m);
    if (sink > -INFINITY) l += exp(sink - m);
    for (int d = 0; d < dv; d++) {
        double acc = 0;
        for (int j = lo; j <= hi; j++) acc += exp(s[j] - m) / l * elem(p, p->v, dv, head, j, d);
        out[d] = (float)acc;
    }
}

static void naive(const pages *p, int head, const float *q, int lo, int hi, float scale, float *out) {
    naive_full(p, head, q, lo, hi, scale, 0, -INFINITY, out);
}

static void check_case(kv_dtype dt, int bs, int dk, int dv, int n_pos, int window) {
    pages p = make_pages(dt, bs, 2, dk, dv, n_pos);
    pages deq = dequantized(&p, n_pos);
    float *same = malloc(sizeof(float) * dv);
    float *q = malloc(sizeof(float) * dk), *want = malloc(sizeof(float) * dv);
    float *ref = malloc(sizeof(float) * dv), *fast = malloc(sizeof(float) * dv);
    for (int d = 0; d < dk; d++) q[d] = frand();
    const float scale = 1.0f / sqrtf((float)dk);
    for (int pos = 0; pos < n_pos; pos += 1 + pos / 5) {
        const int lo = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
        for (int head = 0; head < 2; head++) {
            naive(&p, head, q, lo, pos, scale, want);
            attn_paged_ref(&p.kv, p.table, head, q, lo, pos, scale, ref);
            for (int d = 0; d < dv; d++) assert_true(fabsf(ref[d] - want[d]) <= 1e-5f);
            attn_paged_ref(&deq.kv, deq.table, head, q, lo, pos, scale, same);
            if (memcmp(ref, same, sizeof(float) * dv))
                fail_msg("%s bs=%d pos=%d: ref differs from ref over the dequantized cache", kv_dtype_name(dt), bs,
                         pos);
            if (wtype_using_avx2()) {
                attn_paged_avx2(&p.kv, p.table, head, q, lo, pos, scale, fast);
                for (int d = 0; d < dv; d++)
                    if (fabsf(fast[d] - ref[d]) > 2e-5f)
                        fail_msg("%s bs=%d pos=%d d=%d: avx2 %g ref %g", kv_dtype_name(dt), bs, pos, d, fast[d],
                                 ref[d]);
                attn_paged_avx2(&deq.kv, deq.table, head, q, lo, pos, scale, same);
                if (memcmp(fast, same, sizeof(float) * dv))
                    fail_msg("%s bs=%d pos=%d: avx2 differs from avx2 over the dequantized cache",
                             kv_dtype_name(dt), bs, pos);
            }
        }
    }
    free(p.k), free(p.v), free(deq.k), free(deq.v);
    free(q), free(want), free(ref), free(fast), free(same);
}

static const kv_dtype k_dtypes[] = {KV_F32, KV_F16, KV_BF16, KV_INT8, KV_FP8_E4M3, KV_FP8_E5M2};
#define N_DTYPES ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))

/* Every dtype, block sizes 8, 16 and 32, head dims 64, 128 and 256, and dims
 * that are no multiple of 8 (the kernels' scalar tails). */
static void test_pages_every_dtype(void **state) {
    (void)state;
    for (int i = 0; i < N_DTYPES; i++) {
        check_case(k_dtypes[i], 16, 64, 64, 100, 0);
        check_case(k_dtypes[i], 8, 128, 128, 61, 0);
        check_case(k_dtypes[i], 32, 256, 256, 90, 0);
        check_case(k_dtypes[i], 8, 36, 20, 61, 0);
        check_case(k_dtypes[i], 8, 40, 24, 33, 0);
    }
}

static void test_sliding_window(void **state) {
    (void)state;
    for (int i = 0; i < N_DTYPES; i++) {
        check_case(k_dtypes[i], 16, 32, 32, 120, 16);
        check_case(k_dtypes[i], 8, 32, 32, 120, 13);
    }
}

/* Value heads wider than the reference's one pass of 1024 dims (it once kept
 * them in a double[1024] on the stack: a stack overflow from 1025 on). */
static void test_wide_value_heads(void **state) {
    (void)state;
    check_case(KV_F32, 16, 64, 4096, 40, 0);
    check_case(KV_F16, 16, 128, 4096, 37, 0);
    check_case(KV_F32, 8, 32, 1025, 20, 0);
    check_case(KV_F16, 8, 40, 2500, 30, 9);
    check_case(KV_INT8, 8, 40, 2500, 30, 9);
    check_case(KV_FP8_E4M3, 16, 64, 1025, 20, 0);
}

/* A chunk of n_q query tokens at positions start .. start+n_q-1 of one
 * sequence, n_kv kv heads with `ratio` query heads each, cut into tiles of
 * tile_tok tokens (per_head: one query head per tile, as forward.c cuts
 * decode): each row of attn_tile_ref and attn_tile_avx2 agrees with
 * attn_paged_ref, and the AVX2 row is bit for bit attn_paged_avx2's. */
static void check_tiles(kv_dtype dt, int bs, int n_kv, int ratio, int dk, int dv, int start, int n_q, int window,
                        int tile_tok, bool per_head) {
    const int n_head = n_kv * ratio, n_pos = start + n_q;
    pages p = make_pages(dt, bs, n_kv, dk, dv, n_pos);
    pages deq = dequantized(&p, n_pos);
    const size_t qs = (size_t)n_head * dk, os = (size_t)n_head * dv;
    float *q = malloc(sizeof(float) * n_q * qs), *want = malloc(sizeof(float) * n_q * os);
    float *tref = malloc(sizeof(float) * n_q * os), *tfast = malloc(sizeof(float) * n_q * os);
    float *dref = malloc(sizeof(float) * n_q * os), *dfast = malloc(sizeof(float) * n_q * os);
    float *row = malloc(sizeof(float) * dv);
    int32_t lo[ATTN_TILE_ROWS], hi[ATTN_TILE_ROWS];
    for (size_t i = 0; i < n_q * qs; i++) q[i] = frand();
    const float scale = 1.0f / sqrtf((float)dk);
    const bool avx2 = wtype_using_avx2();
    for (int t0 = 0; t0 < n_q; t0 += tile_tok) {
        const int nt = n_q - t0 < tile_tok ? n_q - t0 : tile_tok;
        for (int i = 0; i < nt; i++) {
            const int pos = start + t0 + i;
            hi[i] = pos;
            lo[i] = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
        }
        for (int h0 = 0; h0 < n_head; h0 += per_head ? 1 : ratio) {
            const attn_tile t = {.q = q + t0 * qs + (size_t)h0 * dk, .q_stride = qs, .lo = lo, .hi = hi,
                                 .n_tok = nt, .n_head = per_head ? 1 : ratio};
            attn_tile tr = t, tf = t, dr = t, df = t;
            tr.out = tref + t0 * os + (size_t)h0 * dv, tr.out_stride = os;
            tf.out = tfast + t0 * os + (size_t)h0 * dv, tf.out_stride = os;
            dr.out = dref + t0 * os + (size_t)h0 * dv, dr.out_stride = os;
            df.out = dfast + t0 * os + (size_t)h0 * dv, df.out_stride = os;
            attn_tile_ref(&p.kv, p.table, h0 / ratio, &tr, scale);
            attn_tile_ref(&deq.kv, deq.table, h0 / ratio, &dr, scale);
            if (avx2) attn_tile_avx2(&p.kv, p.table, h0 / ratio, &tf, scale);
            if (avx2) attn_tile_avx2(&deq.kv, deq.table, h0 / ratio, &df, scale);
        }
    }
    if (memcmp(tref, dref, sizeof(float) * n_q * os))
        fail_msg("tile ref %s: differs from the tile over the dequantized cache", kv_dtype_name(dt));
    if (avx2 && memcmp(tfast, dfast, sizeof(float) * n_q * os))
        fail_msg("tile avx2 %s: differs from the tile over the dequantized cache", kv_dtype_name(dt));
    for (int i = 0; i < n_q; i++)
        for (int h = 0; h < n_head; h++) {
            const int pos = start + i, lo1 = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
            const float *qr = q + i * qs + (size_t)h * dk;
            const size_t o = i * os + (size_t)h * dv;
            attn_paged_ref(&p.kv, p.table, h / ratio, qr, lo1, pos, scale, want + o);
            for (int d = 0; d < dv; d++)
                if (fabsf(tref[o + d] - want[o + d]) > 1e-5f)
                    fail_msg("tile ref %s ratio=%d dk=%d tile=%d token=%d head=%d d=%d: %g want %g", kv_dtype_name(dt),
                             ratio, dk, tile_tok, i, h, d, tref[o + d], want[o + d]);
            if (!avx2) continue;
            attn_paged_avx2(&p.kv, p.table, h / ratio, qr, lo1, pos, scale, row);
            if (memcmp(row, tfast + o, sizeof(float) * dv))
                fail_msg("tile avx2 %s ratio=%d dk=%d tile=%d token=%d head=%d: not the bits of one row",
                         kv_dtype_name(dt), ratio, dk, tile_tok, i, h);
            for (int d = 0; d < dv; d++)
                if (fabsf(tfast[o + d] - want[o + d]) > 2e-5f)
                    fail_msg("tile avx2 %s ratio=%d dk=%d tile=%d token=%d head=%d d=%d: %g want %g", kv_dtype_name(dt),
                             ratio, dk, tile_tok, i, h, d, tfast[o + d], want[o + d]);
        }
    free(p.k), free(p.v), free(deq.k), free(deq.v);
    free(q), free(want), free(tref), free(tfast), free(dref), free(dfast), free(row);
}

/* Every GQA ratio (1, 2, 4) and head dim (64, 128, 256), every dtype, a
 * prompt from position 0 and a ragged chunk after a cached prefix, in tiles
 * of 1 token, 3 tokens, and as many as fit in ATTN_TILE_ROWS. */
static void test_tiles_match_rows(void **state) {
    (void)state;
    const int ratios[] = {1, 2, 4}, dims[] = {64, 128, 256};
    for (int ti_dt = 0; ti_dt < N_DTYPES; ti_dt++)
        for (int ri = 0; ri < 3; ri++)
            for (int di = 0; di < 3; di++) {
                const int ratio = ratios[ri], dim = dims[di];
                const int tiles[] = {1, 3, ATTN_TILE_ROWS / ratio};
                for (int ti = 0; ti < 3; ti++) {
                    check_tiles(k_dtypes[ti_dt], 16, 2, ratio, dim, dim, 0, 41, 0, tiles[ti], false);
                    check_tiles(k_dtypes[ti_dt], 16, 1, ratio, dim, dim, 29, 23, 0, tiles[ti], false);
                }
            }
}

/* Sliding windows cut each token's keys at a different place, so the rows of
 * one tile start in different blocks. */
static void test_tiles_sliding_window(void **state) {
    (void)state;
    for (int ti_dt = 0; ti_dt < N_DTYPES; ti_dt++)
        for (int ratio = 1; ratio <= 4; ratio *= 2) {
            check_tiles(k_dtypes[ti_dt], 16, 2, ratio, 64, 64, 0, 70, 24, ATTN_TILE_ROWS / ratio, false);
            check_tiles(k_dtypes[ti_dt], 16, 1, ratio, 256, 256, 37, 40, 19, 5, false);
            check_tiles(k_dtypes[ti_dt], 8, 1, ratio, 128, 128, 11, 30, 8, 7, false);
        }
}

/* Decode (one token per tile, each head alone or the group together), block
 * sizes 8 and 32, dims that are no multiple of 8, and wide value heads. */
static void test_tiles_odd_shapes(void **state) {
    (void)state;
    for (int ti_dt = 0; ti_dt < N_DTYPES; ti_dt++) {
        check_tiles(k_dtypes[ti_dt], 16, 1, 4, 256, 256, 90, 1, 0, 1, true);
        check_tiles(k_dtypes[ti_dt], 16, 2, 4, 64, 64, 90, 2, 0, 1, false);
        check_tiles(k_dtypes[ti_dt], 32, 2, 2, 128, 128, 5, 60, 0, 16, false);
        check_tiles(k_dtypes[ti_dt], 8, 2, 2, 36, 20, 3, 30, 0, 6, false);
        check_tiles(k_dtypes[ti_dt], 8, 1, 1, 40, 1025, 0, 20, 9, 4, false);
        check_tiles(k_dtypes[ti_dt], 16, 1, 2, 64, 64, 0, 19, 0, 16, true);
    }
}

/* Soft-capped scores (Gemma 2) or attention sinks (gpt-oss, one per head):
 * each row of the reference tile and of the AVX2 tile agrees with the direct
 * softmax, and an AVX2 row has the same bits in a tile as alone. */
static void check_capped_or_sunk(float cap, const float *sinks, float q_mag) {
    const int n_q = 20, start = 17, n_pos = start + n_q, dk = 64, ratio = 2, n_head = 2;
    const float scale = 1.0f / sqrtf((float)dk);
    const char *what = sinks ? "with sinks" : "soft-capped";
    for (int ti_dt = 0; ti_dt < 2; ti_dt++) { /* f32, f16 */
        pages p = make_pages(k_dtypes[ti_dt], 16, 1, dk, dk, n_pos);
        float *q = malloc(sizeof(float) * n_q * n_head * dk), *out = malloc(sizeof(float) * n_q * n_head * dk);
        float want[64], row[64];
        for (int i = 0; i < n_q * n_head * dk; i++) q[i] = q_mag * frand();
        int32_t lo[ATTN_TILE_ROWS], hi[ATTN_TILE_ROWS];
        for (int i = 0; i < n_q; i++) lo[i] = i % 3 ? 0 : i, hi[i] = start + i; /* some rows see few keys */
        for (int avx2 = 0; avx2 <= (int)wtype_using_avx2(); avx2++) {
            const attn_tile t = {.q = q, .out = out, .q_stride = (size_t)n_head * dk,
                                 .out_stride = (size_t)n_head * dk, .lo = lo, .hi = hi, .n_tok = n_q / 2,
                                 .n_head = ratio, .softcap = cap, .sinks = sinks};
            attn_tile second = t;
            second.q += (size_t)(n_q / 2) * n_head * dk, second.out += (size_t)(n_q / 2) * n_head * dk;
            second.lo += n_q / 2, second.hi += n_q / 2;
            (avx2 ? attn_tile_avx2 : attn_tile_ref)(&p.kv, p.table, 0, &t, scale);
            (avx2 ? attn_tile_avx2 : attn_tile_ref)(&p.kv, p.table, 0, &second, scale);
            for (int i = 0; i < n_q; i++)
                for (int h = 0; h < n_head; h++) {
                    const float *qr = q + ((size_t)i * n_head + h) * dk, *got = out + ((size_t)i * n_head + h) * dk;
                    naive_full(&p, 0, qr, lo[i], hi[i], scale, cap, sinks ? sinks[h] : -INFINITY, want);
                    for (int d = 0; d < dk; d++)
                        if (fabsf(got[d] - want[d]) > 2e-5f)
                            fail_msg("%s %s %s token=%d head=%d d=%d: %g want %g", avx2 ? "avx2" : "ref", what,
                                     kv_dtype_name(k_dtypes[ti_dt]), i, h, d, got[d], want[d]);
                    if (!avx2) continue;
                    const attn_tile one = {.q = qr, .out = row, .q_stride = (size_t)dk, .out_stride = (size_t)dk,
                                           .lo = &lo[i], .hi = &hi[i], .n_tok = 1, .n_head = 1, .softcap = cap,
                                           .sinks = sinks ? sinks + h : NULL};
                    attn_tile_avx2(&p.kv, p.table, 0, &one, scale);
                    if (memcmp(row, got, sizeof(float) * dk))
                        fail_msg("avx2 %s token=%d head=%d: not the bits of the row alone", what, i, h);
                }
        }
        free(p.k), free(p.v), free(q), free(out);
    }
}

/* q large enough that the cap bends every score. */
static void test_tiles_soft_capped(void **state) {
    (void)state;
    check_capped_or_sunk(2.0f, NULL, 8.0f);
}

/* One sink far above the scores (it takes most of the probability, so a
 * sink left out fails by far) and one below them. */
static void test_tiles_with_sinks(void **state) {
    (void)state;
    const float sinks[2] = {3.0f, -1.5f};
    check_capped_or_sunk(0, sinks, 1.0f);
}

/* One key: the output is its value times sigmoid(score - sink), the share
 * the sink leaves it. */
static void test_sink_share_of_one_key(void **state) {
    (void)state;
    const int dk = 16;
    pages p = make_pages(KV_F32, 16, 1, dk, dk, 1);
    float q[16], out[16];
    for (int d = 0; d < dk; d++) q[d] = frand();
    double score = 0;
    for (int d = 0; d < dk; d++) score += (double)q[d] * elem(&p, p.k, dk, 0, 0, d);
    score *= 0.25;
    const float sink = 0.7f;
    const int32_t lo = 0, hi = 0;
    for (int avx2 = 0; avx2 <= (int)wtype_using_avx2(); avx2++) {
        const attn_tile t = {.q = q, .out = out, .q_stride = (size_t)dk, .out_stride = (size_t)dk, .lo = &lo,
                             .hi = &hi, .n_tok = 1, .n_head = 1, .sinks = &sink};
        (avx2 ? attn_tile_avx2 : attn_tile_ref)(&p.kv, p.table, 0, &t, 0.25f);
        const double share = 1.0 / (1.0 + exp(sink - score));
        for (int d = 0; d < dk; d++)
            assert_float_equal(out[d], share * elem(&p, p.v, dk, 0, 0, d), 1e-6);
    }
    free(p.k), free(p.v);
}

/* Direct softmax of one query over a list of key positions, in double. */
static void naive_keys(const pages *p, int head, const float *q, const int *keys, int n_keys, float scale,
                       float *out) {
    const int dk = p->kv.head_dim_k, dv = p->kv.head_dim_v;
    double s[128], m = -INFINITY, l = 0;
    for (int j = 0; j < n_keys; j++) {
        double x = 0;
        for (int d = 0; d < dk; d++) x += (double)q[d] * elem(p, p->k, dk, head, keys[j], d);
        s[j] = x * scale;
        if (s[j] > m) m = s[j];
    }
    for (int j = 0; j < n_keys; j++) l += exp(s[j] - m);
    for (int d = 0; d < dv; d++) {
        double acc = 0;
        for (int j = 0; j < n_keys; j++) acc += exp(s[j] - m) / l * elem(p, p->v, dv, head, keys[j], d);
        out[d] = (float)acc;
    }
}

/* A copy of p (n_pos positions) whose positions to[0..n) hold p's rows of
 * positions from[0..n) (every kv head). */
static pages moved_copy(const pages *p, int n_pos, const int *from, const int *to, int n) {
    const int bs = p->kv.block_size, n_rows = ((n_pos + bs - 1) / bs + 3) * p->kv.n_kv_heads * bs;
    const size_t k_row = kv_row_bytes(p->kv.dtype, p->kv.head_dim_k), v_row = kv_row_bytes(p->kv.dtype, p->kv.head_dim_v);
    pages c = *p;
    c.k = malloc(n_rows * k_row), c.v = malloc(n_rows * v_row);
    memcpy(c.k, p->k, n_rows * k_row), memcpy(c.v, p->v, n_rows * v_row);
    c.kv.k = c.k, c.kv.v = c.v;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < p->kv.n_kv_heads; h++) {
            const size_t src = ((size_t)p->table[from[i] / bs] * p->kv.n_kv_heads + h) * bs + from[i] % bs;
            const size_t dst = ((size_t)p->table[to[i] / bs] * p->kv.n_kv_heads + h) * bs + to[i] % bs;
            memcpy(c.k + dst * k_row, p->k + src * k_row, k_row);
            memcpy(c.v + dst * v_row, p->v + src * v_row, v_row);
        }
    return c;
}

/* A draft tree of n nodes at positions start .. start + n - 1 (node 0 the
 * root, parent[i] < i), each node a tile of its own: in both kernels its
 * output equals the direct softmax over the prefix and the path from the
 * root to it (the keys listed by walking the parents, not read from the
 * masks), and in the AVX2 kernel it has the bits of plain attention over a
 * cache where that path sits at positions start, start + 1, ...: what
 * decoding the path token by token computes. */
static void check_tree(kv_dtype dt, int start, int n, int ratio, const int *parent) {
    const int dk = 64, n_head = ratio, n_pos = start + n;
    pages p = make_pages(dt, 16, 1, dk, dk, n_pos);
    const size_t qs = (size_t)n_head * dk;
    float *q = malloc(sizeof(float) * n * qs), *out = malloc(sizeof(float) * n * qs), *plain = malloc(sizeof(float) * qs);
    float want[64];
    uint8_t *rows = malloc(attn_tree_rows_bytes(&p.kv));
    uint32_t anc[ATTN_TREE_MAX];
    for (int i = 0; i < n; i++) anc[i] = (i ? anc[parent[i]] : 0) | 1u << i;
    for (size_t i = 0; i < n * qs; i++) q[i] = frand();
    const float scale = 1.0f / sqrtf((float)dk);
    for (int avx2 = 0; avx2 <= (int)wtype_using_avx2(); avx2++)
        for (int i = 0; i < n; i++) {
            int keys[128], n_keys = 0, path[ATTN_TREE_MAX], depth = 0;
            for (int j = 0; j < start; j++) keys[n_keys++] = j;
            for (int v = i; v >= 0; v = v ? parent[v] : -1) path[depth++] = v;
            const int32_t lo = 0, hi = start + depth - 1;
            while (depth > 0) keys[n_keys++] = start + path[--depth];
            const attn_tile t = {.q = q + i * qs, .out = out + i * qs, .q_stride = qs, .out_stride = qs, .lo = &lo,
                                 .hi = &hi, .n_tok = 1, .n_head = n_head, .tree = &anc[i], .tree_base = start,
                                 .tree_rows = rows};
            (avx2 ? attn_tile_avx2 : attn_tile_ref)(&p.kv, p.table, 0, &t, scale);
            for (int h = 0; h < n_head; h++) {
                naive_keys(&p, 0, q + i * qs + (size_t)h * dk, keys, n_keys, scale, want);
                const float *got = out + i * qs + (size_t)h * dk;
                for (int d = 0; d < dk; d++)
                    if (fabsf(got[d] - want[d]) > 2e-5f)
                        fail_msg("tree %s %s start=%d n=%d node=%d head=%d d=%d: %g want %g", avx2 ? "avx2" : "ref",
                                 kv_dtype_name(dt), start, n, i, h, d, got[d], want[d]);
            }
            if (!avx2) continue;
            int to[ATTN_TREE_MAX];
            for (int j = start; j < n_keys; j++) to[j - start] = j;
            pages chain = moved_copy(&p, n_pos, keys + start, to, n_keys - start);
            const attn_tile t_plain = {.q = q + i * qs, .out = plain, .q_stride = qs, .out_stride = qs, .lo = &lo,
                                       .hi = &hi, .n_tok = 1, .n_head = n_head};
            attn_tile_avx2(&chain.kv, chain.table, 0, &t_plain, scale);
            if (memcmp(plain, out + i * qs, sizeof(float) * qs))
                fail_msg("tree avx2 %s start=%d n=%d node=%d: not the bits of plain attention over its path",
                         kv_dtype_name(dt), start, n, i);
            pages_free(&chain);
        }
    pages_free(&p), free(q), free(out), free(plain), free(rows);
}

/* Trees across block boundaries (blocks of 16), with nodes whose ancestors
 * skip a whole block of the tree (the root's late children), a chain, a
 * star, the largest tree (32 nodes: every bit), and one from position 0. */
static void test_tree_sees_its_path_as_plain_decoding_does(void **state) {
    (void)state;
    int random_tree[ATTN_TREE_MAX], chain[ATTN_TREE_MAX], star[ATTN_TREE_MAX];
    uint64_t r = 12345;
    for (int i = 1; i < ATTN_TREE_MAX; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        random_tree[i] = (int)((r >> 33) % (uint64_t)i);
        chain[i] = i - 1, star[i] = 0;
    }
    random_tree[25] = 0, random_tree[26] = 25, random_tree[31] = 26;
    const int *trees[] = {random_tree, chain, star};
    for (int di = 0; di < 2; di++)
        for (int ti = 0; ti < 3; ti++) {
            check_tree(k_dtypes[di], 29, ATTN_TREE_MAX, 1, trees[ti]);
            check_tree(k_dtypes[di], 40, 12, 2, trees[ti]);
            check_tree(k_dtypes[di], 0, 20, 4, trees[ti]);
        }
    check_tree(KV_INT8, 17, 16, 2, random_tree);
}

/* Latent attention's cache (paged_kv.v_in_k): V rows are the K rows' first
 * dv dims and have no pages of their own. Every kernel gives the bits it
 * gives over a cache whose V rows are copies of those prefixes (the same
 * bytes: an 8-bit row's scale, then its first dv codes), which the tests
 * above hold to the direct softmax. */
static void test_values_read_from_key_rows(void **state) {
    (void)state;
    const int dk = 72, dv = 64, n_pos = 45, n_q = 8, ratio = 4, bs = 16; /* 32 rows: a whole tile */
    for (int ti = 0; ti < N_DTYPES; ti++) {
        const kv_dtype dt = k_dtypes[ti];
        pages sep = make_pages(dt, bs, 1, dk, dv, n_pos);
        const size_t k_row = kv_row_bytes(dt, dk), v_row = kv_row_bytes(dt, dv);
        const int n_rows = ((n_pos + bs - 1) / bs + 3) * bs;
        for (int r = 0; r < n_rows; r++) memcpy(sep.v + (size_t)r * v_row, sep.k + (size_t)r * k_row, v_row);
        pages shared = sep;
        shared.kv.v = sep.k, shared.kv.v_block_stride = sep.kv.k_block_stride, shared.kv.v_in_k = true;
        float q[9 * 4 * 72], a[9 * 4 * 64], b[9 * 4 * 64];
        int32_t lo[9], hi[9];
        for (int i = 0; i < n_q * ratio * dk; i++) q[i] = frand();
        for (int i = 0; i < n_q; i++) lo[i] = i % 4 ? 0 : 3 * i, hi[i] = n_pos - n_q + i;
        for (int avx2 = 0; avx2 <= (int)wtype_using_avx2(); avx2++) {
            attn_tile t = {.q = q, .out = a, .q_stride = (size_t)ratio * dk, .out_stride = (size_t)ratio * dv,
                           .lo = lo, .hi = hi, .n_tok = n_q, .n_head = ratio};
            (avx2 ? attn_tile_avx2 : attn_tile_ref)(&sep.kv, sep.table, 0, &t, 0.125f);
            t.out = b;
            (avx2 ? attn_tile_avx2 : attn_tile_ref)(&shared.kv, shared.table, 0, &t, 0.125f);
            if (memcmp(a, b, sizeof(float) * n_q * ratio * dv))
                fail_msg("%s tile %s: V read from the K rows differs from V rows of the same bytes",
                         avx2 ? "avx2" : "ref", kv_dtype_name(dt));
            (avx2 ? attn_paged_avx2 : attn_paged_ref)(&sep.kv, sep.table, 0, q, 5, n_pos - 1, 0.125f, a);
            (avx2 ? attn_paged_avx2 : attn_paged_ref)(&shared.kv, shared.table, 0, q, 5, n_pos - 1, 0.125f, b);
            if (memcmp(a, b, sizeof(float) * dv))
                fail_msg("%s row %s: V read from the K rows differs", avx2 ? "avx2" : "ref", kv_dtype_name(dt));
        }
        pages_free(&sep);
    }
}

int main(void) {
    wtype_init();
    kernel_paths_print("paths compared with ref", KP_SET_AVX2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages_every_dtype),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_wide_value_heads),
        cmocka_unit_test(test_tiles_match_rows),
        cmocka_unit_test(test_tiles_sliding_window),
        cmocka_unit_test(test_tiles_odd_shapes),
        cmocka_unit_test(test_tiles_soft_capped),
        cmocka_unit_test(test_tiles_with_sinks),
        cmocka_unit_test(test_sink_share_of_one_key),
        cmocka_unit_test(test_tree_sees_its_path_as_plain_decoding_does),
        cmocka_unit_test(test_values_read_from_key_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
