/* model_shift_keys (streaming eviction's re-rotation): a cached key shifted
 * by delta positions equals the key rotated at its new position, computed
 * here directly from rope's definition (angle pos * base^(-2i/d) per pair),
 * for a plain head (pairs in halves order, as forward.c stores keys) and for
 * latent attention's row (the latent untouched, then the rope key with its
 * pairs adjacent, as mla.c stores it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/wtype.h"
#include "model/kv_shift.h"
#include "model/model.h"

#include <math.h>
#include <string.h>

/* x rotated to position pos: pair i is (x[a], x[b]) with a, b = 2i, 2i + 1
 * (adjacent) or i, i + d/2 (halves). */
static void rotate(const float *x, float *out, int d, int pos, double base, int halves) {
    memcpy(out, x, sizeof(float) * (size_t)d);
    for (int i = 0; i < d / 2; i++) {
        const int a = halves ? i : 2 * i, b = halves ? i + d / 2 : 2 * i + 1;
        const double th = pos * pow(base, -2.0 * i / d), c = cos(th), s = sin(th);
        out[a] = (float)(x[a] * c - x[b] * s);
        out[b] = (float)(x[a] * s + x[b] * c);
    }
}

static void check_shift(int head_dim, int rope_dim, int mla_rank) {
    static model m; /* large (its layer table): not on the stack */
    memset(&m, 0, sizeof m);
    m.hp.n_layer = 1, m.hp.head_dim_k = head_dim, m.hp.rope_dim = rope_dim, m.hp.mla_kv_rank = mla_rank;
    m.hp.rope_base = 10000.0f, m.hp.rope_pos_scale = 1.0f;
    const kv_shift_ctx ctx = {.m = &m, .rope_factors = NULL};
    enum { ROWS = 3 };
    float v[ROWS][64], rows[ROWS * 64], want[64]; /* rows: ROWS keys of head_dim, one after the other */
    const int pos = 37, delta = -12;
    for (int r = 0; r < ROWS; r++) {
        for (int d = 0; d < head_dim; d++) v[r][d] = cosf((float)(r * 13 + d * 7));
        float *row = rows + r * head_dim;
        memcpy(row, v[r], sizeof(float) * (size_t)head_dim);
        rotate(v[r] + mla_rank, row + mla_rank, rope_dim, pos, 10000.0, mla_rank == 0);
    }
    model_shift_keys((void *)&ctx, 0, rows, ROWS, delta);
    for (int r = 0; r < ROWS; r++) {
        memcpy(want, v[r], sizeof(float) * (size_t)head_dim);
        rotate(v[r] + mla_rank, want + mla_rank, rope_dim, pos + delta, 10000.0, mla_rank == 0);
        for (int d = 0; d < head_dim; d++) assert_float_equal(rows[r * head_dim + d], want[d], 2e-5);
    }
}

static void test_plain_head(void **state) {
    (void)state;
    check_shift(16, 16, 0);
}

static void test_latent_row(void **state) {
    (void)state;
    check_shift(40, 8, 32);
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_head),
        cmocka_unit_test(test_latent_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
