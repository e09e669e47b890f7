/* Quantized weight formats (Q4_0 .. Q8_0, Q2_K .. Q6_K and the activation
 * formats Q8_0, Q8_1, Q8_K), over several row lengths with a fixed seed:
 *  - quantize -> dequantize loses no more than a per-type share of the rms;
 *  - the AVX2 dequantizers and activation quantizers give exactly the
 *    reference's floats and bytes;
 *  - the AVX2 dot products equal the reference ones to f32 rounding, on
 *    quantized data and on random raw blocks (every bit pattern);
 *    these comparisons run on each kernel table this CPU runs (AVX2, and the
 *    VNNI ones' own entries: kernel_paths.h) and say which ran;
 *  - a dot product equals the dot of the dequantized operands, and differs
 *    from the f32 dot only by what activation quantization explains.
 * The dequantizers themselves are checked against the Python gguf package in
 * tests/integration/test_dequant_gguf_py.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/quants_blocks.h"
#include "kernels/wtype.h"
#include "kernel_paths.h"
#include "quants_testdata.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the cases ---- */

typedef struct {
    wtype type;
    /* max rms(dequant(quant(x)) - x) / rms(x) on plain gaussian rows and on
     * fill_weights rows (outliers make the 32-blocks of the legacy types lose
     * more) */
    double rms_bound_gauss, rms_bound;
} type_case;

/* Our quantizers write the same blocks as ggml's reference quantizers (checked
 * on 1M values per type while writing them); the bounds are about 1.1x
 * (gaussian) and 1.2x (weight-like) the worst errors measured over the row
 * lengths below, so a quality regression shows. */
static const type_case k_types[] = {
    {WT_Q4_0, 0.100, 0.150}, {WT_Q4_1, 0.094, 0.125},   {WT_Q5_0, 0.050, 0.075},
    {WT_Q5_1, 0.047, 0.057}, {WT_Q8_0, 0.0066, 0.0098}, {WT_Q2_K, 0.34, 0.38},
    {WT_Q3_K, 0.170, 0.20},  {WT_Q4_K, 0.085, 0.100},   {WT_Q5_K, 0.043, 0.050},
    {WT_Q6_K, 0.021, 0.029}, {WT_MXFP4, 0.128, 0.177},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

static const int k_lengths[] = {32, 96, 160, 256, 512, 768, 2048, 4096};
#define N_LENGTHS (sizeof k_lengths / sizeof k_lengths[0])

static bool length_fits(wtype t, int n) {
    return n % wtype_block_size((uint32_t)t) == 0;
}

/* Element-wise |a_i * b_i| summed, and the dot, in double. */
static void dot_f64(const float *a, const float *b, int n, double *dot, double *abs_sum) {
    double d = 0, s = 0;
    for (int i = 0; i < n; i++) {
        d += (double)a[i] * b[i];
        s += fabs((double)a[i] * b[i]);
    }
    *dot = d;
    *abs_sum = s;
}

/* ---- tests ---- */

static void test_registry_entries(void **state) {
    (void)state;
    static const struct {
        wtype type, act;
    } pairs[] = {{WT_Q4_0, WT_Q8_0}, {WT_Q4_1, WT_Q8_1}, {WT_Q5_0, WT_Q8_0}, {WT_Q5_1, WT_Q8_1},
                 {WT_Q8_0, WT_Q8_0}, {WT_Q2_K, WT_Q8_K}, {WT_Q3_K, WT_Q8_K}, {WT_Q4_K, WT_Q8_K},
                 {WT_Q5_K, WT_Q8_K}, {WT_Q6_K, WT_Q8_K}, {WT_MXFP4, WT_Q8_0}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        for (int fast = 0; fast < 2; fast++) {
            const wtype_traits *tr = fast ? wtype_get(pairs[i].type) : wtype_get_ref(pairs[i].type);
            assert_non_null(tr);
            assert_int_equal(tr->vec_dot_type, pairs[i].act);
            assert_non_null(tr->to_float);
            assert_non_null(tr->from_float);
            assert_non_null(tr->vec_dot);
            const wtype_traits *act =
                fast ? wtype_get(tr->vec_dot_type) : wtype_get_ref(tr->vec_dot_type);
            assert_non_null(act);
            assert_non_null(act->from_float);
            assert_non_null(act->to_float);
        }
    }
}

static void test_roundtrip_error_within_type_bound(void **state) {
    (void)state;
    kernel_paths_print("paths compared with ref", KP_SET_ALL);
    for (size_t c = 0; c < N_TYPES; c++) {
        const wtype t = k_types[c].type;
        const wtype_traits *ref = wtype_get_ref(t);
        for (int plain = 0; plain < 2; plain++) {
            const double bound = plain ? k_types[c].rms_bound_gauss : k_types[c].rms_bound;
            double worst = 0;
            for (size_t l = 0; l < N_LENGTHS; l++) {
                const int n = k_lengths[l];
                if (!length_fits(t, n)) continue;
                float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n),
                      *yf = malloc(sizeof(float) * n);
                uint8_t *q = malloc(row_bytes(t, n)), *qf = malloc(row_bytes(t, n));
                fill_weights_as(x, n, 1000 + (uint64_t)n, plain);
                ref->from_float(x, q, n);
                ref->to_float(q, y, n);
                for (int p = KP_AVX2; p < KP_COUNT; p++) {
                    wtype_traits fast;
                    if (!kernel_path_entry(p, t, &fast)) continue;
                    fast.from_float(x, qf, n);
                    if (memcmp(q, qf, row_bytes(t, n)))
                        fail_msg("%s n=%d: %s quantizer bytes differ from the reference",
                                 ref->name, n, kernel_path_name(p));
                    fast.to_float(q, yf, n);
                    if (memcmp(y, yf, sizeof(float) * n))
                        fail_msg("%s n=%d: %s dequantizer differs from the reference", ref->name,
                                 n, kernel_path_name(p));
                }
                double err2 = 0, x2 = 0;
                for (int i = 0; i < n; i++) {
                    assert_true(isfinite(y[i]));
                    err2 += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
                    x2 += (double)x[i] * x[i];
                }
                const double rel = sqrt(err2 / x2);
                if (rel > worst) worst = rel;
                if (rel > bound)
                    fail_msg("%s n=%d %s: round-trip rms error %.4f of rms, bound %.4f", ref->name,
                             n, plain ? "gaussian" : "weight-like", rel, bound);
                free(x), free(y), free(yf), free(q), free(qf);
            }
            print_message("  %-5s %-11s worst round-trip rms error %.4f of rms (bound %.4f)\n",
                          ref->name, plain ? "gaussian" : "weight-like", worst, bound);
        }
    }
}

/* Activation quantizers: the AVX2 versions must write the reference's bytes,
 * including on exact ties (x / d = k + 0.5) and all-zero blocks. */
static void test_activation_quantizers_fast_equal_ref(void **state) {
    (void)state;
    kernel_paths_print("paths compared with ref", KP_SET_ALL);
    static const wtype acts[] = {WT_Q8_0, WT_Q8_1, WT_Q8_K};
    for (size_t a = 0; a < 3; a++) {
        const wtype_traits *ref = wtype_get_ref(acts[a]);
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (!length_fits(acts[a], n)) continue;
            float *x = malloc(sizeof(float) * n);
            size_t bytes = row_bytes(acts[a], n);
            uint8_t *q = malloc(bytes), *qf = malloc(bytes);
            for (int variant = 0; variant < 3; variant++) {
                fill_acts(x, n, 7 + (uint64_t)n);
                if (variant == 1) {
                    /* amax 127 makes d = 1: every k + 0.5 is a tie; 0.49999997 is
                     * the classic trap for round-by-adding-one-half. */
                    static const float ties[] = {127,   0.5f,   -0.5f,       1.5f,
                                                 -2.5f, 126.5f, 0.49999997f, -3.5f};
                    for (int i = 0; i < n; i++)
                        x[i] = ties[i % 8];
                } else if (variant == 2) {
                    for (int i = 0; i < n / 2; i++)
                        x[i] = 0; /* zero blocks */
                }
                ref->from_float(x, q, n);
                for (int p = KP_AVX2; p < KP_COUNT; p++) {
                    wtype_traits fast;
                    if (!kernel_path_entry(p, acts[a], &fast)) continue;
                    fast.from_float(x, qf, n);
                    if (memcmp(q, qf, bytes))
                        fail_msg("%s n=%d variant %d: %s quantizer bytes differ from the "
                                 "reference",
                                 ref->name, n, variant, kernel_path_name(p));
                }
            }
            free(x), free(q), free(qf);
        }
    }
}

/* Q8_K's bsums are what the AVX2 dots use for mins and offsets: check them
 * against the quants (the reference dots never read them). */
static void test_q8_K_bsums_match_quants(void **state) {
    (void)state;
    const int n = 1024;
    float x[1024];
    block_q8_K y[4];
    fill_acts(x, n, 99);
    for (int fast = 0; fast < 2; fast++) {
        (fast ? wtype_get(WT_Q8_K) : wtype_get_ref(WT_Q8_K))->from_float(x, y, n);
        for (int b = 0; b < 4; b++)
            for (int j = 0; j < 16; j++) {
                int sum = 0;
                for (int i = 0; i < 16; i++)
                    sum += y[b].qs[16 * j + i];
                assert_int_equal(sum, y[b].bsums[j]);
            }
    }
}

/* Each path's dot equals the reference to 1e-5 of sum |w_i x_i|: both sum
 * exact integer block products, and differ only in f32 vs double accumulation
 * over at most 128 blocks (n = 4096), which is good to ~1e-6 relative. */
static void check_fast_dot(wtype t, const void *wq, const void *xq, int n, const char *what) {
    const wtype_traits *ref = wtype_get_ref(t);
    const wtype_traits *act = wtype_get_ref(ref->vec_dot_type);
    float *wd = malloc(sizeof(float) * n), *xd = malloc(sizeof(float) * n);
    ref->to_float(wq, wd, n);
    act->to_float(xq, xd, n);
    double dot, abs_sum;
    dot_f64(wd, xd, n, &dot, &abs_sum);
    float s_ref = 0;
    ref->vec_dot(n, &s_ref, wq, xq);
    const double tol = 1e-5 * abs_sum + 1e-30;
    for (int p = KP_AVX2; p < KP_COUNT; p++) {
        wtype_traits fast;
        if (!kernel_path_entry(p, t, &fast)) continue;
        float s_fast = 0;
        fast.vec_dot(n, &s_fast, wq, xq);
        if (fabs((double)s_fast - s_ref) > tol)
            fail_msg("%s n=%d (%s): %s dot %.9g, reference %.9g, tolerance %.3g", ref->name, n,
                     what, kernel_path_name(p), s_fast, s_ref, tol);
    }
    free(wd), free(xd);
}

static void test_vec_dot_fast_equals_ref(void **state) {
    (void)state;
    kernel_paths_print("paths compared with ref", KP_SET_ALL);
    for (size_t c = 0; c < N_TYPES; c++) {
        const wtype t = k_types[c].type;
        const wtype_traits *ref = wtype_get_ref(t);
        const wtype_traits *act = wtype_get_ref(ref->vec_dot_type);
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (!length_fits(t, n)) continue;
            float *w = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
            uint8_t *wq = malloc(row_bytes(t, n)), *xq = malloc(row_bytes(ref->vec_dot_type, n));
            fill_weights(w, n, 2000 + (uint64_t)n);
            fill_acts(x, n, 3000 + (uint64_t)n);
            ref->from_float(w, wq, n);
            act->from_float(x, xq, n);
            check_fast_dot(t, wq, xq, n, "quantized weights");
            fill_raw_blocks(t, wq, n, 4000 + (uint64_t)n);
            check_fast_dot(t, wq, xq, n, "random raw blocks");
            free(w), free(x), free(wq), free(xq);
        }
    }
}

/* With the row dequantized to w' and the activations to x', vec_dot(w, x)
 * must be dot(w', x') (to f32 rounding; for Q8_1 also the f16 rounding of its
 * stored s = d * sum(q), which the min term uses), and must differ from the
 * f32 dot(w', x) by at most what quantizing x explains: per element
 * |x - x'| <= d/2 + 127 |d - f16(d)| <= 0.57 d with d = amax(block) / 127
 * (Q8_K keeps d in f32: 0.5 d, we allow 0.51). */
static void test_vec_dot_matches_dequantized(void **state) {
    (void)state;
    for (size_t c = 0; c < N_TYPES; c++) {
        const wtype t = k_types[c].type;
        const wtype_traits *wt = wtype_get(t);
        const wtype at = wt->vec_dot_type;
        const wtype_traits *act = wtype_get(at);
        const int abs_block = wtype_block_size((uint32_t)at);
        for (size_t l = 0; l < N_LENGTHS; l++) {
            const int n = k_lengths[l];
            if (!length_fits(t, n)) continue;
            float *w = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
            float *wd = malloc(sizeof(float) * n), *xd = malloc(sizeof(float) * n);
            uint8_t *wq = malloc(row_bytes(t, n)), *xq = malloc(row_bytes(at, n));
            fill_weights(w, n, 5000 + (uint64_t)n);
            fill_acts(x, n, 6000 + (uint64_t)n);
            wt->from_float(w, wq, n);
            act->from_float(x, xq, n);
            wt->to_float(wq, wd, n);
            act->to_float(xq, xd, n);
            float s = 0;
            wt->vec_dot(n, &s, wq, xq);

            double dq, dq_abs;
            dot_f64(wd, xd, n, &dq, &dq_abs);
            double tol = 1e-5 * dq_abs + 1e-30;
            if (at == WT_Q8_1) {
                /* m * s with s rounded to f16 once per block: 2^-11 relative. */
                const size_t wsz = wt->type_size;
                for (int b = 0; b < n / 32; b++) {
                    f16_t m;
                    memcpy(&m, wq + b * wsz + offsetof(block_q4_1, m), sizeof m);
                    const block_q8_1 *yb = (const block_q8_1 *)xq + b;
                    tol += fabs(f16_to_f32(m) * f16_to_f32(yb->s)) * 0x1p-10;
                }
            }
            if (fabs(s - dq) > tol)
                fail_msg("%s n=%d: vec_dot %.9g but dot of dequantized operands %.9g (tol %.3g)",
                         wt->name, n, s, dq, tol);

            double df, df_abs, bound = 0;
            dot_f64(wd, x, n, &df, &df_abs);
            const double per_d = at == WT_Q8_K ? 0.51 : 0.57;
            for (int b = 0; b < n; b += abs_block) {
                float amax = 0;
                for (int i = b; i < b + abs_block; i++)
                    amax = fmaxf(amax, fabsf(x[i]));
                double wsum = 0;
                for (int i = b; i < b + abs_block; i++)
                    wsum += fabs(wd[i]);
                bound += wsum * per_d * amax / 127;
            }
            bound += 1e-5 * df_abs;
            if (fabs(s - df) > bound)
                fail_msg("%s n=%d: vec_dot %.9g vs f32 dot %.9g differ by more than activation "
                         "quantization "
                         "explains (%.3g)",
                         wt->name, n, s, df, bound);
            free(w), free(x), free(wd), free(xd), free(wq), free(xq);
        }
    }
}

/* All-zero rows quantize to zero scales, dequantize to zeros (no NaN from a
 * 0/0), and dot to exactly 0; a constant row survives within its type's
 * step. */
static void test_zero_and_constant_rows(void **state) {
    (void)state;
    const int n = 512;
    float x[512], y[512], a[512];
    _Alignas(16) uint8_t wq[512 * 2];
    _Alignas(16) uint8_t xq[512 * 2];
    fill_acts(a, n, 1);
    for (size_t c = 0; c < N_TYPES; c++) {
        const wtype t = k_types[c].type;
        for (int fast = 0; fast < 2; fast++) {
            const wtype_traits *tr = fast ? wtype_get(t) : wtype_get_ref(t);
            const wtype_traits *act =
                fast ? wtype_get(tr->vec_dot_type) : wtype_get_ref(tr->vec_dot_type);
            memset(x, 0, sizeof x);
            tr->from_float(x, wq, n);
            tr->to_float(wq, y, n);
            for (int i = 0; i < n; i++)
                if (y[i] != 0) fail_msg("%s: zero row dequantizes to %g at %d", tr->name, y[i], i);
            act->from_float(a, xq, n);
            float s = 1;
            tr->vec_dot(n, &s, wq, xq);
            assert_true(s == 0);
            act->from_float(x, xq, n); /* zero activations too */
            fill_weights(y, n, 3);
            tr->from_float(y, wq, n);
            s = 1;
            tr->vec_dot(n, &s, wq, xq);
            assert_true(s == 0);

            for (int i = 0; i < n; i++)
                x[i] = 0.75f;
            tr->from_float(x, wq, n);
            tr->to_float(wq, y, n);
            for (int i = 0; i < n; i++)
                if (fabsf(y[i] - 0.75f) > 0.75f * (float)k_types[c].rms_bound)
                    fail_msg("%s: constant 0.75 dequantizes to %g at %d", tr->name, y[i], i);
        }
    }
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_entries),
        cmocka_unit_test(test_roundtrip_error_within_type_bound),
        cmocka_unit_test(test_activation_quantizers_fast_equal_ref),
        cmocka_unit_test(test_q8_K_bsums_match_quants),
        cmocka_unit_test(test_vec_dot_fast_equals_ref),
        cmocka_unit_test(test_vec_dot_matches_dequantized),
        cmocka_unit_test(test_zero_and_constant_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
