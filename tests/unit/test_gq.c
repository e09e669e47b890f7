/* The GQ group-quantized formats (format/qgroup.h), all 16 types (2/3/4/8
 * bits x group 32/64/128/row), over several row lengths with a fixed seed:
 *  - the registry's geometry: names, block sizes (0 for per-row types), row
 *    sizes, and the lengths it refuses;
 *  - packing random levels into a block and unpacking them is exact;
 *  - quantize -> dequantize: every element within half a step of its group
 *    (plus the f16 rounding of the scale), and an rms error per bit width;
 *  - the AVX2 dot products equal the scalar reference (quantized data and
 *    random raw blocks, every level and zero point);
 *  - a dot equals the dot of the dequantized operands, and differs from the
 *    f32 dot only by what activation quantization explains;
 *  - the AVX2 gemm tiles: every tile shape laid over a ragged matrix gives
 *    the reference dot of every pair to f32 rounding, and the same bits
 *    whatever the shape and the output's place in the tile; matmul's result
 *    for a token does not depend on the batch or the thread count;
 *  - matmul through weight.perm (act-order) equals the matmul of the
 *    unpermuted matrix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/gq.h"
#include "kernels/matmul.h"
#include "kernels/quants_blocks.h"
#include "kernels/wtype.h"
#include "kernel_paths.h"
#include "quants_testdata.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Weight-like: gaussian rows whose groups of 32 have different scales, some
 * with an offset (so the zero point matters), a few outliers. */
static void fill_group_weights(float *x, int n, uint64_t seed) {
    uint64_t s = seed;
    for (int g = 0; g < n; g += 32) {
        const float scale = (float)(0.2 + 2.0 * rng_uniform(&s));
        const float offset = rng_uniform(&s) < 0.3 ? (float)(rng_uniform(&s) - 0.5) * scale : 0.f;
        for (int i = g; i < g + 32; i++) {
            x[i] = 0.02f * (scale * rng_gauss(&s) + offset);
            if (rng_uniform(&s) < 0.004) x[i] *= 6;
        }
    }
}


static const int k_lengths[] = {128, 384, 640, 1024, 2048};
#define N_LENGTHS (sizeof k_lengths / sizeof k_lengths[0])

static bool fits(uint32_t t, int n) { return gq_row_size(t, n) != 0; }

static void dot_f64(const float *a, const float *b, int n, double *dot, double *abs_sum) {
    double s = 0, as = 0;
    for (int i = 0; i < n; i++) {
        s += (double)a[i] * b[i];
        as += fabs((double)a[i] * b[i]);
    }
    *dot = s;
    *abs_sum = as;
}

static void test_registry_geometry(void **state) {
    (void)state;
    for (uint32_t t = WT_GQ_BASE; t < WT_GQ_BASE + WT_GQ_COUNT; t++) {
        const wtype_traits *tr = wtype_get((wtype)t), *ref = wtype_get_ref((wtype)t);
        assert_non_null(tr);
        assert_non_null(ref);
        assert_string_equal(wtype_name(t), tr->name);
        assert_int_equal(gq_type_from_name(tr->name), (int)t);
        assert_int_equal(tr->vec_dot_type, WT_Q8_1);
        assert_non_null(tr->vec_dot);
        assert_non_null(tr->from_float);
        const int bits = gq_type_bits(t), gc = gq_type_group_code(t);
        assert_int_equal(gq_type(bits, gc), (int)t);
        if (gc == GQ_GROUP_ROW) {
            assert_true(wtype_row_block(t));
            assert_int_equal(wtype_block_size(t), 0);
            assert_int_equal(tr->block_size, 0);
            assert_int_equal(wtype_row_size(t, 640), 4 + 640 * bits / 8);
            assert_int_equal(wtype_row_size(t, 96), 4 + 96 * bits / 8);
            assert_int_equal(wtype_row_size(t, 100), 0); /* not a multiple of 32 */
        } else {
            const int g = 32 << gc;
            assert_false(wtype_row_block(t));
            assert_int_equal(wtype_block_size(t), g);
            assert_int_equal(tr->type_size, 4 + g * bits / 8);
            assert_int_equal(wtype_row_size(t, 4 * g), 4 * (4 + g * bits / 8));
            assert_int_equal(wtype_row_size(t, g == 32 ? 48 : g + 32), 0);
        }
    }
    assert_int_equal(gq_type(4, GQ_GROUP_128), WT_GQ_BASE + 10);
    assert_string_equal(wtype_name((uint32_t)gq_type(4, GQ_GROUP_128)), "GQ4_G128");
    assert_int_equal(gq_type(5, GQ_GROUP_32), -1);
    assert_int_equal(gq_group_code(96), -1);
    assert_int_equal(gq_type_from_name("gq3_row"), gq_type(3, GQ_GROUP_ROW));
    assert_int_equal(gq_type_from_name("GQ3"), -1);
    assert_null(wtype_get((wtype)(WT_GQ_BASE + WT_GQ_COUNT)));
}

static void test_pack_unpack_exact(void **state) {
    (void)state;
    static const int bits_list[] = {2, 3, 4, 8};
    uint64_t s = 11;
    for (int bi = 0; bi < 4; bi++) {
        const int bits = bits_list[bi];
        for (int g = 32; g <= 256; g *= 2) {
            uint8_t q[256], q2[256], blk[4 + 256];
            for (int j = 0; j < g; j++) q[j] = (uint8_t)(rng_next(&s) & ((1u << bits) - 1));
            const int z = (int)(rng_next(&s) & 255);
            gq_pack_block(bits, g, 0.125f, z, q, blk);
            float d;
            int z2;
            gq_unpack_block(bits, g, blk, &d, &z2, q2);
            assert_true(d == 0.125f);
            assert_int_equal(z2, z);
            assert_memory_equal(q, q2, (size_t)g);
            /* The dequantizer reads the same levels. */
            const uint32_t t = (uint32_t)gq_type(bits, GQ_GROUP_ROW);
            float y[256];
            wtype_get_ref((wtype)t)->to_float(blk, y, g);
            for (int j = 0; j < g; j++) assert_true(y[j] == 0.125f * (float)(q[j] - z));
        }
    }
    /* The documented byte layout of a 4-bit and a 3-bit chunk. */
    uint8_t q[32], blk[4 + 16];
    for (int j = 0; j < 32; j++) q[j] = (uint8_t)(j % 16);
    gq_pack_block(4, 32, 1.0f, 8, q, blk);
    assert_int_equal(blk[4 + 3], 3 | (3 << 4)); /* q_3 | q_19 << 4 */
    for (int j = 0; j < 32; j++) q[j] = (uint8_t)(j == 9 ? 7 : j == 1 ? 4 : 0);
    gq_pack_block(3, 32, 1.0f, 4, q, blk);
    assert_int_equal(blk[4 + 1], 3 << 2); /* low bits of q_9 at bits 2-3 of byte 1 */
    assert_int_equal(blk[4 + 8], 1 << 1); /* high bit of q_1 */
    assert_int_equal(blk[4 + 9], 1 << 1); /* high bit of q_9 */
}

/* Per-element error bound of round to nearest on a group's grid: half a
 * step, plus clamping at the range ends when the f16 scale rounded down (a
 * relative 2^-11 of the range). */
static void test_roundtrip_error(void **state) {
    (void)state;
    /* rms error of the worst scheme (symmetric on groups with an offset), by
     * bits (2, 3, 4, 8) and group (32, 64, 128, row); rows mix groups of
     * different scales, as real rows do, so one scale per row does worst. */
    static const double rms_bound[4][4] = {{0.55, 0.60, 0.70, 1.00},
                                           {0.33, 0.33, 0.35, 0.90},
                                           {0.24, 0.17, 0.20, 0.52},
                                           {0.009, 0.014, 0.013, 0.033}};
    for (uint32_t t = WT_GQ_BASE; t < WT_GQ_BASE + WT_GQ_COUNT; t++) {
        const int bits = gq_type_bits(t);
        double worst = 0;
        for (int sym = 0; sym < 2; sym++)
            for (size_t l = 0; l < N_LENGTHS; l++) {
                const int n = k_lengths[l];
                if (!fits(t, n)) continue;
                const int64_t g = gq_type_group(t, n);
                float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
                uint8_t *q = malloc(gq_row_size(t, n));
                fill_group_weights(x, n, 100 + (uint64_t)n + t);
                gq_quantize_row(t, x, q, n, sym);
                wtype_get_ref((wtype)t)->to_float(q, y, n);
                double e2 = 0, x2 = 0;
                for (int64_t b = 0; b < n / g; b++) {
                    float lo = 0, hi = 0;
                    for (int64_t i = b * g; i < (b + 1) * g; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
                    const double range = hi - lo, amax = fmax(hi, -lo);
                    const double step = sym ? amax / (1 << (bits - 1)) : range / ((1 << bits) - 1);
                    /* Symmetric grids reach only (2^(b-1) - 1) steps on the
                     * side opposite the extreme. */
                    const double clamp = sym ? amax - step * ((1 << (bits - 1)) - 1) : 0;
                    for (int64_t i = b * g; i < (b + 1) * g; i++) {
                        const double err = fabs((double)y[i] - x[i]);
                        const double bound = fmax(0.5 * step * (1 + 0x1p-9), clamp * 1.001) + range * 0x1p-10 + 1e-12;
                        if (err > bound)
                            fail_msg("%s %s n=%d: element %lld: %g -> %g, error %g > bound %g", wtype_name(t),
                                     sym ? "sym" : "asym", n, (long long)i, x[i], y[i], err, bound);
                        e2 += err * err;
                        x2 += (double)x[i] * x[i];
                    }
                }
                const double rel = sqrt(e2 / x2);
                if (rel > worst) worst = rel;
                if (rel > rms_bound[bits == 8 ? 3 : bits - 2][gq_type_group_code(t)])
                    fail_msg("%s %s n=%d: rms error %.4f of rms", wtype_name(t), sym ? "sym" : "asym", n, rel);
                free(x), free(y), free(q);
            }
        print_message("  %-9s worst round-trip rms error %.4f of rms\n", wtype_name(t), worst);
    }
}

/* Random bytes with finite scales: every level pattern and zero point. */
static void fill_raw_gq(uint32_t t, uint8_t *p, int n, uint64_t seed) {
    uint64_t s = seed;
    const size_t bytes = gq_row_size(t, n);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_next(&s);
    const int64_t g = gq_type_group(t, n);
    const size_t bb = gq_block_bytes(gq_type_bits(t), g);
    for (int64_t b = 0; b < n / g; b++) {
        const f16_t d = f32_to_f16((float)(rng_uniform(&s) - 0.5) * 0.25f);
        memcpy(p + b * bb, &d, 2);
    }
}

/* How far two f32 evaluations of the dot may differ: 2e-6 of the sum of
 * the terms' magnitudes, the zero-point term (up to 255 * sum |s|) included. */
static double dot_tolerance(uint32_t t, const uint8_t *wq, const uint8_t *xq, int n) {
    float *wd = malloc(sizeof(float) * n), *xd = malloc(sizeof(float) * n);
    wtype_get_ref((wtype)t)->to_float(wq, wd, n);
    wtype_get_ref(WT_Q8_1)->to_float(xq, xd, n);
    double dot, abs_sum, zterm = 0;
    dot_f64(wd, xd, n, &dot, &abs_sum);
    const block_q8_1 *y = (const block_q8_1 *)xq;
    for (int b = 0; b < n / 32; b++) zterm += 32.0 * fabs(f16_to_f32(y[b].s));
    free(wd), free(xd);
    return 2e-6 * (abs_sum + zterm) + 1e-30;
}

/* The AVX2 table's dot (the GQ types have no VNNI entries). */
static void check_fast_dot(uint32_t t, const uint8_t *wq, const uint8_t *xq, int n, const char *what) {
    const wtype_traits *ref = wtype_get_ref((wtype)t), *fast = &wtype_traits_avx2[t];
    float s_ref = 0, s_fast = 0;
    ref->vec_dot(n, &s_ref, wq, xq);
    fast->vec_dot(n, &s_fast, wq, xq);
    const double tol = dot_tolerance(t, wq, xq, n);
    if (fabs((double)s_fast - s_ref) > tol)
        fail_msg("%s n=%d (%s): avx2 dot %.9g, reference %.9g, tolerance %.3g", ref->name, n, what, s_fast,
                 s_ref, tol);
}

static void test_vec_dot_fast_equals_ref(void **state) {
    (void)state;
    kernel_paths_print("paths compared with ref", KP_SET_AVX2);
    if (!kernel_path_runs(KP_AVX2)) return; /* not the reference against itself */
    for (uint32_t t = WT_GQ_BASE; t < WT_GQ_BASE + WT_GQ_COUNT; t++)
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (!fits(t, n)) continue;
            float *w = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
            uint8_t *wq = malloc(gq_row_size(t, n)), *xq = malloc(wtype_row_size(WT_Q8_1, n));
            fill_group_weights(w, n, 2000 + (uint64_t)n);
            fill_acts(x, n, 3000 + (uint64_t)n);
            wtype_get_ref(WT_Q8_1)->from_float(x, xq, n);
            for (int sym = 0; sym < 2; sym++) {
                gq_quantize_row(t, w, wq, n, sym);
                check_fast_dot(t, wq, xq, n, sym ? "symmetric" : "asymmetric");
            }
            fill_raw_gq(t, wq, n, 4000 + (uint64_t)n + t);
            check_fast_dot(t, wq, xq, n, "random raw blocks");
            free(w), free(x), free(wq), free(xq);
        }
}

/* vec_dot(w, x) is dot(w', x') of the dequantized operands up to f32 rounding
 * and the f16 rounding of each activation block's s (in the zero-point term),
 * and differs from the f32 dot(w', x) by at most what quantizing x explains:
 * |x - x'| <= 0.57 d per element with d = amax(block) / 127. */
static void test_vec_dot_matches_dequantized(void **state) {
    (void)state;
    for (uint32_t t = WT_GQ_BASE; t < WT_GQ_BASE + WT_GQ_COUNT; t++)
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (!fits(t, n)) continue;
            const wtype_traits *wt = wtype_get((wtype)t), *act = wtype_get(WT_Q8_1);
            const int bits = gq_type_bits(t);
            const int64_t g = gq_type_group(t, n);
            float *w = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
            float *wd = malloc(sizeof(float) * n), *xd = malloc(sizeof(float) * n);
            uint8_t *wq = malloc(gq_row_size(t, n)), *xq = malloc(wtype_row_size(WT_Q8_1, n));
            fill_group_weights(w, n, 5000 + (uint64_t)n);
            fill_acts(x, n, 6000 + (uint64_t)n);
            gq_quantize_row(t, w, wq, n, false);
            act->from_float(x, xq, n);
            wt->to_float(wq, wd, n);
            act->to_float(xq, xd, n);
            float s = 0;
            wt->vec_dot(n, &s, wq, xq);
            double dq, dq_abs;
            dot_f64(wd, xd, n, &dq, &dq_abs);
            double tol = 1e-5 * dq_abs + 1e-30;
            const size_t bb = gq_block_bytes(bits, g);
            const int o = bits == 8 ? 128 : 0;
            for (int b = 0; b < n / 32; b++) {
                const uint8_t *blk = wq + (b * 32 / g) * bb;
                f16_t d;
                memcpy(&d, blk, 2);
                const block_q8_1 *yb = (const block_q8_1 *)xq + b;
                tol += fabs(f16_to_f32(d) * (blk[2] - o) * f16_to_f32(yb->s)) * 0x1p-10;
            }
            if (fabs(s - dq) > tol)
                fail_msg("%s n=%d: vec_dot %.9g but dot of dequantized operands %.9g (tol %.3g)", wt->name, n, s, dq,
                         tol);
            double df, df_abs, bound = tol;
            dot_f64(wd, x, n, &df, &df_abs);
            for (int b = 0; b < n; b += 32) {
                float amax = 0;
                double wsum = 0;
                for (int i = b; i < b + 32; i++) amax = fmaxf(amax, fabsf(x[i])), wsum += fabs(wd[i]);
                bound += wsum * 0.57 * amax / 127;
            }
            if (fabs(s - df) > bound)
                fail_msg("%s n=%d: vec_dot %.9g vs f32 dot %.9g beyond activation quantization (%.3g)", wt->name, n,
                         s, df, bound);
            free(w), free(x), free(wd), free(xd), free(wq), free(xq);
        }
}

/* Zero rows: zero scale, zero dequantized values, zero dots. */
static void test_zero_rows(void **state) {
    (void)state;
    const int n = 256;
    float x[256] = {0}, y[256], a[256];
    uint8_t wq[4 + 256 * 2], xq[36 * 8];
    fill_acts(a, n, 5);
    for (uint32_t t = WT_GQ_BASE; t < WT_GQ_BASE + WT_GQ_COUNT; t++)
        for (int fast = 0; fast < 2; fast++) {
            const wtype_traits *tr = fast ? wtype_get((wtype)t) : wtype_get_ref((wtype)t);
            tr->from_float(x, wq, n);
            tr->to_float(wq, y, n);
            for (int i = 0; i < n; i++) assert_true(y[i] == 0);
            wtype_get(WT_Q8_1)->from_float(a, xq, n);
            float s = 1;
            tr->vec_dot(n, &s, wq, xq);
            assert_true(s == 0);
        }
}

/* A weight stored with permuted columns plus perm gives the same matmul as
 * the unpermuted weight (both quantized from the same permuted values). */
static void test_matmul_perm_gathers_activations(void **state) {
    (void)state;
    const int n_in = 256, n_out = 24, n_tok = 5;
    const uint32_t t = (uint32_t)gq_type(4, GQ_GROUP_64);
    float *w = malloc(sizeof(float) * n_in * n_out), *wp = malloc(sizeof(float) * n_in * n_out);
    float *x = malloc(sizeof(float) * n_in * n_tok), *xp = malloc(sizeof(float) * n_in * n_tok);
    float *y1 = malloc(sizeof(float) * n_out * n_tok), *y2 = malloc(sizeof(float) * n_out * n_tok);
    int32_t *perm = malloc(sizeof(int32_t) * n_in);
    const size_t rb = gq_row_size(t, n_in);
    uint8_t *wq = malloc(rb * n_out);
    uint64_t s = 3;
    for (int i = 0; i < n_in; i++) perm[i] = i;
    for (int i = n_in - 1; i > 0; i--) {
        const int j = (int)(rng_next(&s) % (uint64_t)(i + 1));
        const int32_t tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    fill_group_weights(w, n_in * n_out, 9);
    fill_acts(x, n_in * n_tok, 10);
    /* Stored column k holds original column perm[k]. */
    for (int r = 0; r < n_out; r++) {
        for (int k = 0; k < n_in; k++) wp[r * n_in + k] = w[r * n_in + perm[k]];
        gq_quantize_row(t, wp + r * n_in, wq + r * rb, n_in, false);
    }
    for (int tk = 0; tk < n_tok; tk++)
        for (int k = 0; k < n_in; k++) xp[tk * n_in + k] = x[tk * n_in + perm[k]];
    threadpool *threads = threadpool_create(2);
    weight plain = {.name = "plain", .data = wq, .type = (wtype)t, .n_in = n_in, .n_out = n_out, .row_bytes = rb};
    weight permuted = plain;
    permuted.perm = perm;
    void *scratch = malloc(matmul_scratch_size(&permuted, n_tok) + 64);
    assert_true(matmul_scratch_size(&permuted, n_tok) >= matmul_scratch_size(&plain, n_tok) + sizeof(float) * n_in * n_tok);
    matmul(threads, &plain, xp, n_tok, y1, scratch);    /* pre-gathered activations */
    matmul(threads, &permuted, x, n_tok, y2, scratch);  /* gathered by matmul */
    assert_memory_equal(y1, y2, sizeof(float) * n_out * n_tok);
    threadpool_free(threads);
    free(w), free(wp), free(x), free(xp), free(y1), free(y2), free(perm), free(wq), free(scratch);
}

/* Runs gemm over [rows] x [toks] in tiles of at most tr x tc. */
static void gemm_tiled(const wtype_traits *tr, int n, int rows, int toks, int tr_max, int tc_max, const uint8_t *wq,
                       size_t wrow, const uint8_t *xq, size_t xrow, float *out) {
    for (int r = 0; r < rows; r += tr_max)
        for (int t = 0; t < toks; t += tc_max) {
            const int nr = rows - r < tr_max ? rows - r : tr_max, nc = toks - t < tc_max ? toks - t : tc_max;
            tr->gemm(n, nr, nc, out + (size_t)t * rows + r, (size_t)rows, wq + r * wrow, wrow, xq + t * xrow, xrow);
        }
}

static void test_gemm_tiles(void **state) {
    (void)state;
    kernel_paths_print("paths compared with ref", KP_SET_AVX2);
    if (!wtype_using_avx2()) return;
    const int rows = 7, toks = 6;
    for (uint32_t t = WT_GQ_BASE; t < WT_GQ_BASE + WT_GQ_COUNT; t++)
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (!fits(t, n)) continue;
            const wtype_traits *tr = wtype_get((wtype)t), *ref = wtype_get_ref((wtype)t);
            assert_non_null(tr->gemm);
            const size_t wrow = gq_row_size(t, n), xrow = wtype_row_size(WT_Q8_1, n);
            uint8_t *wq = malloc(wrow * rows), *xq = malloc(xrow * toks);
            float *w = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
            float *first = malloc(sizeof(float) * rows * toks), *out = malloc(sizeof(float) * rows * toks);
            for (int r = 0; r < rows; r++) {
                fill_group_weights(w, n, 700 + (uint64_t)r);
                if (r == 3) fill_raw_gq(t, wq + r * wrow, n, 900);
                else gq_quantize_row(t, w, wq + r * wrow, n, r % 2);
            }
            for (int k = 0; k < toks; k++) {
                fill_acts(x, n, 800 + (uint64_t)k);
                wtype_get(WT_Q8_1)->from_float(x, xq + k * xrow, n);
            }
            for (int a = 1; a <= tr->gemm_rows; a++)
                for (int b = 1; b <= tr->gemm_cols; b++) {
                    gemm_tiled(tr, n, rows, toks, a, b, wq, wrow, xq, xrow, out);
                    if (a == 1 && b == 1) {
                        memcpy(first, out, sizeof(float) * rows * toks);
                        for (int r = 0; r < rows; r++)
                            for (int k = 0; k < toks; k++) {
                                float want;
                                ref->vec_dot(n, &want, wq + r * wrow, xq + k * xrow);
                                const double tol = dot_tolerance(t, wq + r * wrow, xq + k * xrow, n);
                                if (fabs(first[k * rows + r] - want) > tol)
                                    fail_msg("%s n=%d row %d tok %d: gemm %.9g, reference %.9g", tr->name, n, r, k,
                                             first[k * rows + r], want);
                            }
                    } else if (memcmp(first, out, sizeof(float) * rows * toks)) {
                        fail_msg("%s n=%d: tiles of %d x %d give other bits than 1 x 1", tr->name, n, a, b);
                    }
                }
            /* matmul: one token alone equals its row in a batch, with 1 and 3 threads. */
            float *xs = malloc(sizeof(float) * n * toks), *y1 = malloc(sizeof(float) * rows * toks),
                  *y3 = malloc(sizeof(float) * rows * toks), *ysolo = malloc(sizeof(float) * rows);
            for (int k = 0; k < toks; k++) fill_acts(xs + k * n, n, 800 + (uint64_t)k);
            weight wt = {.name = "g", .data = wq, .type = (wtype)t, .n_in = n, .n_out = rows, .row_bytes = wrow};
            void *scratch = malloc(matmul_scratch_size(&wt, toks) + 64);
            threadpool *tp1 = threadpool_create(1), *tp3 = threadpool_create(3);
            matmul(tp1, &wt, xs, toks, y1, scratch);
            matmul(tp3, &wt, xs, toks, y3, scratch);
            assert_memory_equal(y1, y3, sizeof(float) * rows * toks);
            assert_memory_equal(y1, first, sizeof(float) * rows * toks);
            matmul(tp3, &wt, xs + 4 * n, 1, ysolo, scratch);
            assert_memory_equal(ysolo, y1 + 4 * rows, sizeof(float) * rows);
            threadpool_free(tp1), threadpool_free(tp3);
            free(xs), free(y1), free(y3), free(ysolo), free(scratch);
            free(wq), free(xq), free(w), free(x), free(first), free(out);
        }
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_geometry),
        cmocka_unit_test(test_pack_unpack_exact),
        cmocka_unit_test(test_roundtrip_error),
        cmocka_unit_test(test_vec_dot_fast_equals_ref),
        cmocka_unit_test(test_vec_dot_matches_dequantized),
        cmocka_unit_test(test_zero_rows),
        cmocka_unit_test(test_gemm_tiles),
        cmocka_unit_test(test_matmul_perm_gathers_activations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
