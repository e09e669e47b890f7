/* GPTQ (quant/gptq.c):
 *  - the inverse Cholesky factor: U upper triangular with U^T U H = I;
 *  - on a random layer whose inputs are strongly correlated, GPTQ's output
 *    error || (W - Q) X^T || is well below round-to-nearest's at the same
 *    format (4-bit g128 asym, 3-bit g128, Q4_0, per-row 8-bit, per-tensor),
 *    with and without act-order, on the calibration inputs and on fresh
 *    inputs from the same distribution;
 *  - the packed rows dequantize (through the registry) to exactly the values
 *    GPTQ reported, and act-order's permutation is a permutation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/wtype.h"
#include "quants_testdata.h"
#include "quant/gptq.h"
#include "quant/qformat.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


static threadpool *g_tp;

static void test_inverse_cholesky(void **state) {
    (void)state;
    const int n = 40;
    double *a = malloc(sizeof(double) * n * n), *h = malloc(sizeof(double) * n * n);
    double *u = malloc(sizeof(double) * n * n);
    uint64_t s = 1;
    for (int i = 0; i < n * n; i++) a[i] = rng_gauss(&s);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double t = i == j ? 0.5 : 0;
            for (int k = 0; k < n; k++) t += a[i * n + k] * a[j * n + k];
            h[i * n + j] = t;
        }
    memcpy(u, h, sizeof(double) * n * n);
    assert_int_equal(gptq_inverse_cholesky(u, n), 0);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) assert_true(u[i * n + j] == 0);
    /* (U^T U) H = I */
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double t = 0;
            for (int k = 0; k < n; k++) {
                double inv_ik = 0;
                for (int l = 0; l < n; l++) inv_ik += u[l * n + i] * u[l * n + k];
                t += inv_ik * h[k * n + j];
            }
            worst = fmax(worst, fabs(t - (i == j)));
        }
    assert_true(worst < 1e-8);
    /* Not positive definite. */
    for (int i = 0; i < n * n; i++) u[i] = 0;
    assert_int_equal(gptq_inverse_cholesky(u, n), -1);
    free(a), free(h), free(u);
}

/* Inputs with a decaying spectrum and mixed channels: x = z A, A = D M with
 * D a steep diagonal, so a few directions carry most of the energy. */
static float *make_inputs(int n_tok, int n_in, uint64_t seed, const float *mix) {
    uint64_t s = seed;
    float *z = malloc(sizeof(float) * n_tok * n_in), *x = calloc((size_t)n_tok * n_in, sizeof(float));
    for (int i = 0; i < n_tok * n_in; i++) z[i] = rng_gauss(&s);
    for (int t = 0; t < n_tok; t++)
        for (int k = 0; k < n_in; k++) {
            const float zk = z[t * n_in + k] * (float)exp(-k / 24.0);
            for (int c = 0; c < n_in; c++) x[t * n_in + c] += zk * mix[k * n_in + c];
        }
    free(z);
    return x;
}

static double output_error(const float *w, const float *q, int n_out, int n_in, const float *x, int n_tok) {
    double e = 0;
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < n_out; r++) {
            double d = 0;
            for (int c = 0; c < n_in; c++) d += ((double)w[r * n_in + c] - q[r * n_in + c]) * x[t * n_in + c];
            e += d * d;
        }
    return e;
}

static void run_case(int bits, int group, bool sym, bool per_tensor, bool act_order, double max_ratio) {
    const int n_in = 256, n_out = 48, n_tok = 512;
    uint64_t s = 42;
    float *mix = malloc(sizeof(float) * n_in * n_in), *w = malloc(sizeof(float) * n_out * n_in);
    for (int i = 0; i < n_in * n_in; i++) mix[i] = rng_gauss(&s) / 16;
    for (int i = 0; i < n_out * n_in; i++) w[i] = rng_gauss(&s) * 0.05f;
    float *x = make_inputs(n_tok, n_in, 7, mix), *x_test = make_inputs(n_tok / 2, n_in, 8, mix);
    double *h = malloc(sizeof(double) * n_in * n_in);
    for (int i = 0; i < n_in; i++)
        for (int j = 0; j < n_in; j++) {
            double t = 0;
            for (int k = 0; k < n_tok; k++) t += (double)x[k * n_in + i] * x[k * n_in + j];
            h[i * n_in + j] = 2 * t / n_tok;
        }
    qformat f;
    assert_int_equal(qformat_init(&f, bits, group, sym, per_tensor, !act_order), 0);
    const size_t rb = qformat_row_bytes(&f, n_in);
    uint8_t *packed = malloc(rb * n_out);
    float *rtn = malloc(sizeof(float) * n_out * n_in), *gq = malloc(sizeof(float) * n_out * n_in);
    float *gq_in = malloc(sizeof(float) * n_out * n_in), *wc = malloc(sizeof(float) * n_out * n_in);
    int32_t *perm = malloc(sizeof(int32_t) * n_in);
    assert_int_equal(quant_rtn(&f, w, n_out, n_in, packed, rtn), 0);
    memcpy(wc, w, sizeof(float) * n_out * n_in);
    const gptq_opts o = {.damp = 0.01, .block = 128, .act_order = act_order};
    assert_int_equal(gptq_quantize(&f, wc, n_out, n_in, h, &o, g_tp, packed, gq, perm), 0);
    /* The packed rows hold exactly the reported values. */
    float *row = malloc(sizeof(float) * n_in);
    const wtype_traits *tr = wtype_get_ref((wtype)f.type);
    for (int r = 0; r < n_out; r++) {
        tr->to_float(packed + r * rb, row, n_in);
        assert_memory_equal(row, gq + r * n_in, sizeof(float) * n_in);
    }
    /* Back to input column order. */
    char *seen = calloc((size_t)n_in, 1);
    for (int k = 0; k < n_in; k++) {
        assert_true(perm[k] >= 0 && perm[k] < n_in && !seen[perm[k]]);
        seen[perm[k]] = 1;
        if (!act_order) assert_int_equal(perm[k], k);
    }
    for (int r = 0; r < n_out; r++)
        for (int k = 0; k < n_in; k++) gq_in[r * n_in + perm[k]] = gq[r * n_in + k];
    const double e_rtn = output_error(w, rtn, n_out, n_in, x, n_tok);
    const double e_gptq = output_error(w, gq_in, n_out, n_in, x, n_tok);
    const double t_rtn = output_error(w, rtn, n_out, n_in, x_test, n_tok / 2);
    const double t_gptq = output_error(w, gq_in, n_out, n_in, x_test, n_tok / 2);
    print_message("  %-9s %s%s%s: GPTQ/RTN output error %.3f (calibration), %.3f (fresh inputs)\n",
                  wtype_name(f.type), sym ? "sym" : "asym", per_tensor ? " per-tensor" : "",
                  act_order ? " act-order" : "", e_gptq / e_rtn, t_gptq / t_rtn);
    if (!(e_gptq < max_ratio * e_rtn) || !(t_gptq < max_ratio * t_rtn))
        fail_msg("GPTQ does not beat RTN enough: %.4g vs %.4g (fresh: %.4g vs %.4g)", e_gptq, e_rtn, t_gptq, t_rtn);
    free(mix), free(w), free(x), free(x_test), free(h), free(packed), free(rtn), free(gq), free(gq_in), free(wc);
    free(perm), free(row), free(seen);
}

static void test_gptq_beats_rtn(void **state) {
    (void)state;
    run_case(4, 128, false, false, false, 0.7);
    run_case(3, 128, false, false, false, 0.7);
    run_case(4, 32, true, false, false, 0.7);  /* Q4_0 */
    run_case(4, 32, false, false, false, 0.7); /* Q4_1 */
    run_case(2, 64, false, false, false, 0.8);
    run_case(8, -1, true, false, false, 0.7);
    run_case(4, -1, true, true, false, 0.7);   /* per tensor */
    run_case(4, 128, false, false, true, 0.7); /* act-order */
    run_case(3, 32, true, false, true, 0.7);
}

int main(void) {
    wtype_init();
    g_tp = threadpool_create(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inverse_cholesky),
        cmocka_unit_test(test_gptq_beats_rtn),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    threadpool_free(g_tp);
    return rc;
}
