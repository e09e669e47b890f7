/* GPTQ / AWQ -> GQ repacking (format/hf_quant.c) on small layers packed here
 * by the formats' rules: every GQ block must hold exactly the checkpoint's
 * levels (in act-order, the columns sorted by group with the permutation
 * returned), its zero (v1: stored + 1) and its f16 scale bits. Inconsistent
 * inputs are refused with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/hf_quant.h"
#include "kernels/gq.h"
#include "util/error.h"
#include "util/fp16.h"

#include <stdlib.h>
#include <string.h>

enum { N_IN = 128, N_OUT = 16 };

typedef struct {
    int bits, group; /* group: -1 for the row */
    uint8_t q[N_IN][N_OUT]; /* levels, input-major as the checkpoints store them */
    int32_t g_idx[N_IN];
    int n_groups;
    uint8_t zero[N_IN][N_OUT]; /* stored zeros [group][out] */
    uint16_t scale[N_IN][N_OUT];
    uint32_t qweight[N_IN * N_OUT], qzeros[N_IN * N_OUT];
} layer;

static void fill(layer *L, int bits, int group, bool act_order, unsigned seed) {
    memset(L, 0, sizeof *L);
    srand(seed);
    L->bits = bits, L->group = group;
    const int g = group == -1 ? N_IN : group, maxq = (1 << bits) - 1;
    L->n_groups = N_IN / g;
    int perm[N_IN];
    for (int i = 0; i < N_IN; i++) perm[i] = i;
    for (int i = N_IN - 1; act_order && i > 0; i--) {
        int j = rand() % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int k = 0; k < N_IN; k++) L->g_idx[perm[k]] = k / g;
    for (int i = 0; i < N_IN; i++)
        for (int o = 0; o < N_OUT; o++) L->q[i][o] = (uint8_t)(rand() & maxq);
    for (int gi = 0; gi < L->n_groups; gi++)
        for (int o = 0; o < N_OUT; o++) {
            L->zero[gi][o] = (uint8_t)(rand() & maxq);
            L->scale[gi][o] = f32_to_f16(0.001f + (float)(rand() % 1000) / 7919.0f);
        }
}

/* AutoGPTQ: qweight [in/pack][out] along the input, qzeros [groups][out/pack]. */
static void pack_gptq(layer *L) {
    const int pack = 32 / L->bits;
    for (int r = 0; r < N_IN / pack; r++)
        for (int o = 0; o < N_OUT; o++)
            for (int k = 0; k < pack; k++) L->qweight[r * N_OUT + o] |= (uint32_t)L->q[r * pack + k][o] << (k * L->bits);
    for (int gi = 0; gi < L->n_groups; gi++)
        for (int o = 0; o < N_OUT; o++)
            L->qzeros[gi * (N_OUT / pack) + o / pack] |= (uint32_t)L->zero[gi][o] << (o % pack * L->bits);
}

/* AutoAWQ GEMM: qweight [in][out/8], nibble p holds output 8c + order[p]. */
static void pack_awq(layer *L) {
    static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int i = 0; i < N_IN; i++)
        for (int c = 0; c < N_OUT / 8; c++)
            for (int p = 0; p < 8; p++) L->qweight[i * (N_OUT / 8) + c] |= (uint32_t)L->q[i][8 * c + order[p]] << (4 * p);
    for (int gi = 0; gi < L->n_groups; gi++)
        for (int c = 0; c < N_OUT / 8; c++)
            for (int p = 0; p < 8; p++)
                L->qzeros[gi * (N_OUT / 8) + c] |= (uint32_t)L->zero[gi][8 * c + order[p]] << (4 * p);
}

/* Every block against the source; perm NULL for plain column order. */
static void check_blocks(const layer *L, const uint8_t *out, const int32_t *perm, int zero_add) {
    const gq_layer gl = {.bits = L->bits, .group_size = L->group, .n_in = N_IN, .n_out = N_OUT};
    const int64_t g = gq_layer_group(&gl);
    const size_t row_bytes = gq_layer_row_bytes(&gl), bb = gq_block_bytes(L->bits, g);
    uint8_t q[N_IN];
    for (int o = 0; o < N_OUT; o++)
        for (int64_t b = 0; b < N_IN / g; b++) {
            const uint8_t *blk = out + o * row_bytes + b * bb;
            float d;
            int z;
            gq_unpack_block(L->bits, g, blk, &d, &z, q);
            const int col0 = perm ? perm[b * g] : (int)(b * g);
            const int gi = L->g_idx[col0];
            uint16_t dbits;
            memcpy(&dbits, blk, 2);
            assert_int_equal(dbits, L->scale[gi][o]);
            assert_int_equal(z, L->zero[gi][o] + zero_add);
            for (int64_t j = 0; j < g; j++) {
                const int col = perm ? perm[b * g + j] : (int)(b * g + j);
                assert_int_equal(L->g_idx[col], gi);
                assert_int_equal(q[j], L->q[col][o]);
            }
        }
}

static void run_gptq(int bits, int group, bool act_order, bool v1) {
    layer *L = malloc(sizeof *L);
    fill(L, bits, group, act_order, (unsigned)(bits * 1000 + group + act_order));
    pack_gptq(L);
    const gq_layer gl = {.bits = bits, .group_size = group, .n_in = N_IN, .n_out = N_OUT};
    uint8_t *out = calloc(N_OUT, gq_layer_row_bytes(&gl));
    int32_t perm[N_IN];
    int rc = gptq_to_gq(&gl, v1, L->qweight, L->qzeros, L->scale, L->g_idx, out, perm, "test");
    if (rc < 0) fail_msg("%s", err_get());
    assert_int_equal(rc, act_order && group != -1 && group < N_IN ? 1 : 0); /* one group: no reorder */
    check_blocks(L, out, rc == 1 ? perm : NULL, v1 ? 1 : 0);
    /* without g_idx: the columns are taken in order */
    if (!act_order) {
        memset(out, 0, N_OUT * gq_layer_row_bytes(&gl));
        assert_int_equal(gptq_to_gq(&gl, v1, L->qweight, L->qzeros, L->scale, NULL, out, perm, "test"), 0);
        check_blocks(L, out, NULL, v1 ? 1 : 0);
    }
    free(out);
    free(L);
}

static void test_gptq_4bit(void **state) {
    (void)state;
    run_gptq(4, 32, false, true);
    run_gptq(4, 64, false, false);
    run_gptq(4, 128, false, true);
    run_gptq(4, -1, false, true);
}

static void test_gptq_4bit_act_order(void **state) {
    (void)state;
    run_gptq(4, 32, true, true);
    run_gptq(4, 64, true, false);
    run_gptq(4, -1, true, true); /* one group: no permutation needed */
}

static void test_gptq_8bit(void **state) {
    (void)state;
    run_gptq(8, 32, false, false); /* v2: zeros up to 255 are fine */
    run_gptq(8, 64, true, false);
    run_gptq(8, 128, true, false);
    run_gptq(8, -1, false, false);
}

static void test_gptq_v1_zero_256_refused(void **state) {
    (void)state;
    layer *L = malloc(sizeof *L);
    fill(L, 8, 32, false, 3);
    L->zero[1][5] = 255; /* read as 256 by v1 kernels */
    pack_gptq(L);
    const gq_layer gl = {.bits = 8, .group_size = 32, .n_in = N_IN, .n_out = N_OUT};
    uint8_t *out = calloc(N_OUT, gq_layer_row_bytes(&gl));
    int32_t perm[N_IN];
    assert_int_equal(gptq_to_gq(&gl, true, L->qweight, L->qzeros, L->scale, L->g_idx, out, perm, "lyr"), -1);
    assert_non_null(strstr(err_get(), "zero point 256"));
    free(out);
    free(L);
}

static void test_gptq_bad_g_idx(void **state) {
    (void)state;
    layer *L = malloc(sizeof *L);
    fill(L, 4, 32, false, 4);
    pack_gptq(L);
    const gq_layer gl = {.bits = 4, .group_size = 32, .n_in = N_IN, .n_out = N_OUT};
    uint8_t *out = calloc(N_OUT, gq_layer_row_bytes(&gl));
    int32_t perm[N_IN];
    L->g_idx[7] = 4; /* outside the 4 groups */
    assert_int_equal(gptq_to_gq(&gl, true, L->qweight, L->qzeros, L->scale, L->g_idx, out, perm, "lyr"), -1);
    assert_non_null(strstr(err_get(), "g_idx[7] = 4"));
    L->g_idx[7] = 1; /* group 0 one short, group 1 one over */
    assert_int_equal(gptq_to_gq(&gl, true, L->qweight, L->qzeros, L->scale, L->g_idx, out, perm, "lyr"), -1);
    assert_non_null(strstr(err_get(), "groups of 32"));
    free(out);
    free(L);
}

static void test_awq(void **state) {
    (void)state;
    const int groups[] = {32, 64, 128, -1};
    for (int k = 0; k < 4; k++) {
        layer *L = malloc(sizeof *L);
        fill(L, 4, groups[k], false, (unsigned)(50 + k));
        pack_awq(L);
        const gq_layer gl = {.bits = 4, .group_size = groups[k], .n_in = N_IN, .n_out = N_OUT};
        uint8_t *out = calloc(N_OUT, gq_layer_row_bytes(&gl));
        if (awq_to_gq(&gl, L->qweight, L->qzeros, L->scale, out, "test")) fail_msg("%s", err_get());
        check_blocks(L, out, NULL, 0);
        free(out);
        free(L);
    }
}

static void test_geometry(void **state) {
    (void)state;
    gq_layer l = {.bits = 4, .group_size = 128, .n_in = 4096, .n_out = 11008};
    assert_int_equal(gq_layer_type(&l), gq_type(4, GQ_GROUP_128));
    assert_int_equal(gq_layer_row_bytes(&l), 32 * 68);
    assert_int_equal(gq_layer_n_groups(&l), 32);
    assert_int_equal(gq_layer_check(&l, false, "x"), 0);
    l.group_size = 16;
    assert_int_equal(gq_layer_check(&l, false, "x"), -1);
    l.group_size = 128, l.n_in = 4000; /* not a whole number of groups */
    assert_int_equal(gq_layer_check(&l, false, "x"), -1);
    l = (gq_layer){.bits = 4, .group_size = -1, .n_in = 48, .n_out = 8}; /* rows must be multiples of 32 */
    assert_int_equal(gq_layer_check(&l, false, "x"), -1);
    assert_non_null(strstr(err_get(), "multiple of 32"));
    l = (gq_layer){.bits = 3, .group_size = 32, .n_in = 64, .n_out = 8};
    assert_int_equal(gq_layer_check(&l, false, "x"), -1); /* 32/3 is no whole packing */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptq_4bit),
        cmocka_unit_test(test_gptq_4bit_act_order),
        cmocka_unit_test(test_gptq_8bit),
        cmocka_unit_test(test_gptq_v1_zero_256_refused),
        cmocka_unit_test(test_gptq_bad_g_idx),
        cmocka_unit_test(test_awq),
        cmocka_unit_test(test_geometry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
