/* AWQ (quant/awq.c): on a layer whose inputs have a few channels with large
 * activations (as LLM hidden states do), the searched scales make the
 * quantized layer's output error lower than round-to-nearest's, on the
 * calibration rows and on fresh ones; alpha = 0 reproduces RTN exactly, so
 * the search never reports worse than RTN; the scales favour the large
 * channels. The clip search lowers the output error of a layer with
 * heavy-tailed weights and never raises it on its sample. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/wtype.h"
#include "quants_testdata.h"
#include "quant/awq.h"
#include "quant/qformat.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


enum { N_IN = 256, N_OUT = 96, N_TOK = 384 };

static bool is_hot(int c) { return c % 41 == 5; } /* 7 channels */

static float *make_inputs(int n_tok, uint64_t seed) {
    uint64_t s = seed;
    float *x = malloc(sizeof(float) * n_tok * N_IN);
    for (int t = 0; t < n_tok; t++)
        for (int c = 0; c < N_IN; c++) x[t * N_IN + c] = rng_gauss(&s) * (is_hot(c) ? 25.0f : 1.0f);
    return x;
}

static double output_error(const float *w, const float *q, const float *x, int n_tok) {
    double e = 0;
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < N_OUT; r++) {
            double d = 0;
            for (int c = 0; c < N_IN; c++) d += ((double)w[r * N_IN + c] - q[r * N_IN + c]) * x[t * N_IN + c];
            e += d * d;
        }
    return e;
}

/* Q(W diag(s)) diag(s)^-1. */
static void quantize_scaled(const qformat *f, const float *w, const float *s, float *out) {
    float *ws = malloc(sizeof(float) * N_OUT * N_IN);
    uint8_t *packed = malloc(qformat_row_bytes(f, N_IN) * N_OUT);
    for (int r = 0; r < N_OUT; r++)
        for (int c = 0; c < N_IN; c++) ws[r * N_IN + c] = w[r * N_IN + c] * s[c];
    assert_int_equal(quant_rtn(f, ws, N_OUT, N_IN, packed, out), 0);
    for (int r = 0; r < N_OUT; r++)
        for (int c = 0; c < N_IN; c++) out[r * N_IN + c] /= s[c];
    free(ws), free(packed);
}

static void run_case(threadpool *threads, int bits, int group, bool sym) {
    uint64_t s = 3;
    float *w = malloc(sizeof(float) * N_OUT * N_IN);
    for (int i = 0; i < N_OUT * N_IN; i++) w[i] = rng_gauss(&s) * 0.05f;
    float *x = make_inputs(N_TOK, 11), *x_test = make_inputs(N_TOK, 12);
    float mean[N_IN], scales[N_IN], ones[N_IN];
    awq_act_mean(x, N_TOK, N_IN, mean);
    for (int c = 0; c < N_IN; c++) ones[c] = 1;
    qformat f;
    assert_int_equal(qformat_init(&f, bits, group, sym, false, true), 0);
    const float *ws[1] = {w};
    const int64_t n_out[1] = {N_OUT};
    const awq_opts o = {.n_grid = 20};
    awq_result res;
    assert_int_equal(awq_search(&f, ws, n_out, 1, N_IN, x, N_TOK, mean, &o, threads, scales, &res), 0);
    float *q_rtn = malloc(sizeof(float) * N_OUT * N_IN), *q_awq = malloc(sizeof(float) * N_OUT * N_IN);
    quantize_scaled(&f, w, ones, q_rtn);
    quantize_scaled(&f, w, scales, q_awq);
    const double e_rtn = output_error(w, q_rtn, x, N_TOK), e_awq = output_error(w, q_awq, x, N_TOK);
    const double t_rtn = output_error(w, q_rtn, x_test, N_TOK), t_awq = output_error(w, q_awq, x_test, N_TOK);
    print_message("  %-9s %s: alpha %.2f, AWQ/RTN output error %.3f (calibration), %.3f (fresh inputs)\n",
                  wtype_name(f.type), sym ? "sym" : "asym", res.alpha, e_awq / e_rtn, t_awq / t_rtn);
    /* The search's own losses are these errors (f32 matmul vs double here). */
    assert_true(fabs(res.loss_rtn - e_rtn) < 1e-3 * e_rtn);
    assert_true(fabs(res.loss - e_awq) < 1e-3 * e_awq);
    assert_true(res.loss <= res.loss_rtn);
    assert_true(res.alpha > 0);
    if (!(e_awq < 0.8 * e_rtn) || !(t_awq < 0.8 * t_rtn))
        fail_msg("AWQ does not beat RTN enough: %.4g vs %.4g (fresh %.4g vs %.4g)", e_awq, e_rtn, t_awq, t_rtn);
    /* Large channels get the larger scales. */
    double hot = 0, cold = 0;
    int n_hot = 0;
    for (int c = 0; c < N_IN; c++) {
        if (is_hot(c)) hot += scales[c], n_hot++;
        else cold += scales[c];
    }
    assert_true(hot / n_hot > 2 * cold / (N_IN - n_hot));
    free(w), free(x), free(x_test), free(q_rtn), free(q_awq);
}

static void test_awq_beats_rtn(void **state) {
    (void)state;
    threadpool *threads = threadpool_create(2);
    run_case(threads, 4, 128, false);
    run_case(threads, 3, 128, false);
    run_case(threads, 4, 32, true); /* Q4_0 */
    run_case(threads, 4, -1, true);
    threadpool_free(threads);
}

static void test_clip_search(void **state) {
    (void)state;
    threadpool *threads = threadpool_create(2);
    uint64_t s = 5;
    float *w = malloc(sizeof(float) * N_OUT * N_IN), *wc = malloc(sizeof(float) * N_OUT * N_IN);
    for (int i = 0; i < N_OUT * N_IN; i++) {
        /* Student-t-like tails: a few weights far outside the bulk. */
        const float g = rng_gauss(&s), u = fabsf(rng_gauss(&s)) + 0.05f;
        w[i] = 0.02f * g / sqrtf(u);
    }
    float *x = make_inputs(N_TOK, 21), *x_test = make_inputs(N_TOK, 22);
    float ones[N_IN];
    for (int c = 0; c < N_IN; c++) ones[c] = 1;
    for (int bits = 3; bits <= 4; bits++) {
        qformat f;
        assert_int_equal(qformat_init(&f, bits, 64, false, false, true), 0);
        memcpy(wc, w, sizeof(float) * N_OUT * N_IN);
        assert_int_equal(awq_clip(&f, wc, N_OUT, N_IN, x, N_TOK, threads), 0);
        float *q0 = malloc(sizeof(float) * N_OUT * N_IN), *q1 = malloc(sizeof(float) * N_OUT * N_IN);
        quantize_scaled(&f, w, ones, q0);
        quantize_scaled(&f, wc, ones, q1);
        const double e0 = output_error(w, q0, x, N_TOK), e1 = output_error(w, q1, x, N_TOK);
        const double t0 = output_error(w, q0, x_test, N_TOK), t1 = output_error(w, q1, x_test, N_TOK);
        print_message("  %-9s clipped/unclipped output error %.3f (calibration), %.3f (fresh inputs)\n",
                      wtype_name(f.type), e1 / e0, t1 / t0);
        assert_true(e1 <= e0);
        assert_true(e1 < 0.95 * e0 && t1 < 0.95 * t0);
        free(q0), free(q1);
    }
    /* Whole-row groups are left alone. */
    qformat f;
    assert_int_equal(qformat_init(&f, 4, -1, false, false, true), 0);
    memcpy(wc, w, sizeof(float) * N_OUT * N_IN);
    assert_int_equal(awq_clip(&f, wc, N_OUT, N_IN, x, N_TOK, threads), 0);
    assert_memory_equal(wc, w, sizeof(float) * N_OUT * N_IN);
    threadpool_free(threads);
    free(w), free(wc), free(x), free(x_test);
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_awq_beats_rtn),
        cmocka_unit_test(test_clip_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
