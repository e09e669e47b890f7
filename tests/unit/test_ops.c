/* Row operations: the AVX2 versions agree with the scalar references (which
 * use libm) over ordinary and extreme inputs and every length tail; rope
 * rotates by the right angle in both pair layouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/ops.h"
#include "kernels/wtype.h"
#include "kernel_paths.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 42;
static float frand(float scale) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((float)(g_rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f) * scale;
}

static void fill(float *v, int n, float scale) {
    for (int i = 0; i < n; i++) v[i] = frand(scale);
}

static void expect_close(const float *a, const float *b, int n, float rel, float abs_tol, const char *what) {
    for (int i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= abs_tol + rel * fabsf(b[i])))
            fail_msg("%s[%d]: avx2 %.9g ref %.9g", what, i, a[i], b[i]);
}

static void test_activations_agree(void **state) {
    (void)state;
    if (!wtype_using_avx2()) skip();
    const int lens[] = {1, 7, 8, 9, 64, 2048, 2051};
    const float scales[] = {0.1f, 3.0f, 20.0f, 200.0f};
    float g1[2051], g2[2051], u[2051];
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
        for (size_t si = 0; si < sizeof scales / sizeof *scales; si++) {
            const int n = lens[li];
            fill(g1, n, scales[si]);
            fill(u, n, 2.0f);
            memcpy(g2, g1, sizeof(float) * (size_t)n);
            gelu_tanh_mul_avx2(g1, u, n);
            gelu_tanh_mul_ref(g2, u, n);
            /* The reference's 1 + tanh cancels in the negative tail (its own error is
             * ~1e-7 of |x|); the AVX2 form x * sigmoid(2y) does not. */
            expect_close(g1, g2, n, 2e-6f, 2e-7f * scales[si], "gelu");
            fill(g1, n, scales[si]);
            memcpy(g2, g1, sizeof(float) * (size_t)n);
            silu_mul_avx2(g1, u, n);
            silu_mul_ref(g2, u, n);
            expect_close(g1, g2, n, 2e-6f, 2e-7f * scales[si], "silu");
            /* Scales past the limit (7) exercise both clamps. */
            fill(g1, n, scales[si]);
            fill(u, n, scales[si]);
            memcpy(g2, g1, sizeof(float) * (size_t)n);
            swiglu_oai_mul_avx2(g1, u, n, 1.702f, 7.0f);
            swiglu_oai_mul_ref(g2, u, n, 1.702f, 7.0f);
            expect_close(g1, g2, n, 2e-6f, 2e-6f, "swiglu_oai");
        }
}

/* gpt-oss's activation at points where each clamp does or does not act,
 * against the formula: x = min(g, 7), y = clamp(u, -7, 7), x sigmoid(1.702 x) (y + 1). */
static void test_swiglu_oai_clamps(void **state) {
    (void)state;
    float g[4] = {10.0f, -3.0f, 2.0f, 7.5f}, u[4] = {-9.0f, 0.5f, 20.0f, -7.0f};
    const float want[4] = {
        (float)(7.0 / (1 + exp(-1.702 * 7.0)) * (-7.0 + 1)),
        (float)(-3.0 / (1 + exp(1.702 * 3.0)) * (0.5 + 1)),
        (float)(2.0 / (1 + exp(-1.702 * 2.0)) * (7.0 + 1)),
        (float)(7.0 / (1 + exp(-1.702 * 7.0)) * (-7.0 + 1)),
    };
    swiglu_oai_mul_ref(g, u, 4, 1.702f, 7.0f);
    for (int i = 0; i < 4; i++) assert_float_equal(g[i], want[i], 1e-5f * fabsf(want[i]));
}

static void test_rmsnorm_agrees(void **state) {
    (void)state;
    if (!wtype_using_avx2()) skip();
    float x[2051], w[2051], a[2051], b[2051];
    const int lens[] = {1, 8, 13, 640, 2051};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int n = lens[li];
        fill(x, n, 50.0f);
        fill(w, n, 2.0f);
        rmsnorm_avx2(a, x, w, n, 1e-6f);
        rmsnorm_ref(b, x, w, n, 1e-6f);
        expect_close(a, b, n, 1e-6f, 0, "rmsnorm");
        rmsnorm_avx2(a, x, NULL, n, 1e-6f);
        rmsnorm_ref(b, x, NULL, n, 1e-6f);
        expect_close(a, b, n, 1e-6f, 0, "rmsnorm (no weight)");
    }
}

static void test_rope_rotates_pairs(void **state) {
    (void)state;
    float cs[8], x[16], y[16];
    rope_angles(cs, 3, 8, 10000.0f, 1.0f, NULL);
    fill(x, 16, 1.0f);
    for (int pairs = 0; pairs < 2; pairs++) {
        memcpy(y, x, sizeof x);
        rope_apply(y, 2, 8, 8, cs, (rope_pairs)pairs);
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++) {
                const int a = pairs ? i : 2 * i, b = pairs ? i + 4 : 2 * i + 1;
                const double th = 3 * pow(10000.0, -2.0 * i / 8);
                const double x0 = x[h * 8 + a], x1 = x[h * 8 + b];
                assert_true(fabs(y[h * 8 + a] - (x0 * cos(th) - x1 * sin(th))) < 1e-6);
                assert_true(fabs(y[h * 8 + b] - (x0 * sin(th) + x1 * cos(th))) < 1e-6);
            }
    }
}

static void test_gelu_erf_agrees(void **state) {
    (void)state;
    if (!wtype_using_avx2()) skip();
    const int lens[] = {1, 7, 8, 9, 64, 2051};
    const float scales[] = {0.1f, 3.0f, 20.0f, 200.0f};
    float a[2051], b[2051];
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
        for (size_t si = 0; si < sizeof scales / sizeof *scales; si++) {
            const int n = lens[li];
            fill(a, n, scales[si]);
            memcpy(b, a, sizeof(float) * (size_t)n);
            gelu_erf_avx2(a, n);
            gelu_erf_ref(b, n);
            /* The polynomial erf is within 1.5e-7 of libm's: x/2 times that. */
            expect_close(a, b, n, 2e-6f, 2e-7f * scales[si], "gelu_erf");
        }
    /* Known values: GELU(1) = 0.8413447, GELU(-1) = -0.1586553, GELU(0) = 0. */
    float v[3] = {1.0f, -1.0f, 0.0f};
    gelu_erf_avx2(v, 3);
    assert_true(fabsf(v[0] - 0.8413447f) < 1e-6f && fabsf(v[1] + 0.1586553f) < 1e-6f && v[2] == 0.0f);
    float w8[8] = {1, -1, 0, 2, -2, 3, -3, 0.5f}, r8[8];
    memcpy(r8, w8, sizeof w8);
    gelu_erf_avx2(w8, 8);
    gelu_erf_ref(r8, 8);
    expect_close(w8, r8, 8, 2e-6f, 6e-7f, "gelu_erf (known)"); /* |x| <= 3 */
    assert_true(fabsf(w8[0] - 0.8413447f) < 1e-6f && fabsf(w8[1] + 0.1586553f) < 1e-6f);
}

static void test_layernorm_agrees(void **state) {
    (void)state;
    if (!wtype_using_avx2()) skip();
    const int lens[] = {1, 7, 8, 9, 384, 1031};
    float x[1031], w[1031], bias[1031], a[1031], b[1031];
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int n = lens[li];
        fill(x, n, 5.0f);
        for (int i = 0; i < n; i++) x[i] += 3.0f; /* a mean far from 0 */
        fill(w, n, 1.0f);
        fill(bias, n, 1.0f);
        layernorm_avx2(a, x, w, bias, n, 1e-12f);
        layernorm_ref(b, x, w, bias, n, 1e-12f);
        expect_close(a, b, n, 1e-6f, 1e-6f, "layernorm");
    }
    /* The definition: zero mean, unit variance with w = 1, b = 0. */
    const int n = 384;
    for (int i = 0; i < n; i++) w[i] = 1.0f, bias[i] = 0.0f;
    fill(x, n, 4.0f);
    layernorm_ref(b, x, w, bias, n, 1e-12f);
    double m = 0, v = 0;
    for (int i = 0; i < n; i++) m += b[i];
    for (int i = 0; i < n; i++) v += (b[i] - m / n) * (b[i] - m / n);
    assert_true(fabs(m / n) < 1e-6 && fabs(v / n - 1.0) < 1e-5);
}

/* The softmax weights: the reference against exp in double, special logits
 * (NaN, -inf, far below the maximum) weighing nothing, then AVX2 against the
 * reference over every tail length, with and without the output row. */
static void test_exp_weights(void **state) {
    (void)state;
    enum { N = 2051 };
    float x[N], a[N], b[N];
    fill(x, N, 30.0f);
    x[3] = NAN, x[17] = -INFINITY, x[40] = -1e30f;
    float mx = -INFINITY;
    for (int i = 0; i < N; i++)
        if (x[i] > mx) mx = x[i];
    const float temps[] = {0.7f, 1.0f, 3.0f, 1e-20f};
    for (size_t ti = 0; ti < sizeof temps / sizeof *temps; ti++) {
        const float t = temps[ti];
        const double sum = exp_weights_ref(b, x, N, mx, t);
        double want = 0;
        for (int i = 0; i < N; i++) {
            const float arg = (x[i] - mx) / t; /* the exponent in float, as the kernels form it */
            const double w = isnan(x[i]) || arg < EXP_WEIGHT_MIN_ARG ? 0 : exp(arg);
            assert_true(fabs(b[i] - w) <= 1e-6 * w);
            want += w;
        }
        assert_true(fabs(sum - want) <= 1e-6 * want && sum >= 1.0);
        assert_true(b[3] == 0 && b[17] == 0 && b[40] == 0);
        assert_true(exp_weights_ref(NULL, x, N, mx, t) == sum);
        if (!wtype_using_avx2()) continue;
        const int lens[] = {1, 7, 8, 9, 64, 2051};
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            const int n = lens[li];
            float m = -INFINITY;
            for (int i = 0; i < n; i++)
                if (x[i] > m) m = x[i];
            if (m == -INFINITY) continue;
            const double sa = exp_weights_avx2(a, x, n, m, t), sb = exp_weights_ref(b, x, n, m, t);
            expect_close(a, b, n, 1e-6f, 0, "exp_weights");
            assert_true(fabs(sa - sb) <= 1e-6 * sb);
            assert_true(exp_weights_avx2(NULL, x, n, m, t) == sa);
        }
    }
}

/* The first largest non-NaN value, wherever it, its ties and the NaNs
 * stand, over every tail length. */
static void test_row_argmax(void **state) {
    (void)state;
    enum { N = 77 };
    float x[N];
    for (int n = 1; n <= N; n++)
        for (int at = 0; at < n; at += 5) {
            fill(x, n, 10.0f);
            for (int i = 0; i < n; i += 3) x[i] = NAN;
            x[at] = 11.0f;
            if (at + 9 < n) x[at + 9] = 11.0f; /* a later tie */
            assert_int_equal(row_argmax_ref(x, n), at);
            if (wtype_using_avx2()) assert_int_equal(row_argmax_avx2(x, n), at);
        }
    for (int i = 0; i < N; i++) x[i] = i % 2 ? -INFINITY : NAN;
    assert_int_equal(row_argmax_ref(x, N), 1);
    if (wtype_using_avx2()) assert_int_equal(row_argmax_avx2(x, N), 1);
    for (int i = 0; i < N; i++) x[i] = NAN;
    assert_int_equal(row_argmax_ref(x, N), 0);
    if (wtype_using_avx2()) assert_int_equal(row_argmax_avx2(x, N), 0);
}

/* softmax_prob against a softmax in doubles, with NaN and -inf entries
 * left out, and its edge cases. */
static void test_softmax_prob(void **state) {
    (void)state;
    enum { N = 301 };
    float x[N];
    fill(x, N, 8.0f);
    for (int i = 0; i < N; i += 7) x[i] = NAN;
    x[5] = -INFINITY;
    double max = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++)
        if (!isnan(x[i]) && x[i] > max) max = x[i];
    for (int i = 0; i < N; i++)
        if (!isnan(x[i])) sum += exp((double)x[i] - max);
    for (int at = 1; at < N; at += 3) {
        const double want = isnan(x[at]) ? 0 : exp((double)x[at] - max) / sum;
        assert_float_equal(softmax_prob(x, N, at), want, 1e-6 + 1e-5 * want);
    }
    assert_float_equal(softmax_prob(x, N, 5), 0, 0);
    const float one[1] = {3.0f}, two[2] = {0.0f, 0.0f}, inf[2] = {1.0f, INFINITY};
    assert_float_equal(softmax_prob(one, 1, 0), 1, 0);
    assert_float_equal(softmax_prob(two, 2, 1), 0.5, 1e-7);
    assert_float_equal(softmax_prob(inf, 2, 1), 1, 0);
    assert_float_equal(softmax_prob(inf, 2, 0), 0, 0);
}

int main(void) {
    wtype_init();
    kernel_paths_print("paths compared with ref", KP_SET_AVX2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activations_agree),
        cmocka_unit_test(test_swiglu_oai_clamps),
        cmocka_unit_test(test_rmsnorm_agrees),
        cmocka_unit_test(test_gelu_erf_agrees),
        cmocka_unit_test(test_layernorm_agrees),
        cmocka_unit_test(test_exp_weights),
        cmocka_unit_test(test_row_argmax),
        cmocka_unit_test(test_softmax_prob),
        cmocka_unit_test(test_rope_rotates_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
