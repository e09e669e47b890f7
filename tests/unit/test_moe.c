/* The mixture-of-experts FFN (model/moe.h) on toy F32 weights: the router's
 * choice (softmax or sigmoid, top-k with ties to the lower index,
 * renormalized or not, scaled), the layer's output against a direct
 * computation written here, each token's row the same alone as in a batch,
 * and experts no token chose never read (their weights are NaN, which would
 * poison any output that touched them). The checks against transformers
 * and llama.cpp are in tests/integration/test_families.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/wtype.h"
#include "model/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { E = 4, K = 2, D = 8, FF = 8, SH = 8, T = 3 };

typedef struct {
    model m; /* hp and layer 0's experts, for moe_scratch_create */
    model_hparams hp;
    moe_weights w;
    weight gate[E], up[E], down[E];
    float router[E][D], g[E][FF][D], u[E][FF][D], dn[E][D][FF];
    float sg[SH][D], su[SH][D], sd[D][SH], sh_router[D];
} toy;

static weight f32(const void *data, int64_t n_in, int64_t n_out) {
    return (weight){.name = "toy", .data = data, .type = WT_F32, .n_in = n_in, .n_out = n_out,
                    .row_bytes = (size_t)n_in * sizeof(float)};
}

static toy *make_toy(bool shared) {
    wtype_init();
    toy *t = calloc(1, sizeof *t);
    t->hp = (model_hparams){.traits = arch_find(shared ? "qwen2moe" : "qwen3moe"), .n_embd = D, .n_expert = E,
                            .n_expert_used = K, .n_ff_exp = FF, .n_ff_shexp = shared ? SH : 0,
                            .gating = GATING_SOFTMAX, .expert_norm = true, .expert_scale = 1.0f};
    for (int e = 0; e < E; e++)
        for (int i = 0; i < D; i++) {
            t->router[e][i] = sinf(1.3f * (float)(e * D + i));
            for (int f = 0; f < FF; f++) {
                t->g[e][f][i] = 0.3f * sinf(0.7f * (float)(e * 97 + f * D + i));
                t->u[e][f][i] = 0.3f * cosf(0.5f * (float)(e * 89 + f * D + i));
                t->dn[e][i][f] = 0.3f * sinf(0.9f * (float)(e * 83 + i * FF + f));
            }
        }
    for (int i = 0; i < D; i++) {
        t->sh_router[i] = 0.2f * cosf((float)i);
        for (int f = 0; f < SH; f++) {
            t->sg[f][i] = 0.25f * sinf((float)(f * D + i));
            t->su[f][i] = 0.25f * cosf((float)(f * D + i));
            t->sd[i][f] = 0.25f * sinf(0.3f * (float)(i * SH + f));
        }
    }
    for (int e = 0; e < E; e++) {
        t->gate[e] = f32(t->g[e], D, FF);
        t->up[e] = f32(t->u[e], D, FF);
        t->down[e] = f32(t->dn[e], FF, D);
    }
    t->w = (moe_weights){.router = f32(t->router, D, E), .gate = t->gate, .up = t->up, .down = t->down};
    if (shared) {
        t->w.sh_gate = f32(t->sg, D, SH);
        t->w.sh_up = f32(t->su, D, SH);
        t->w.sh_down = f32(t->sd, SH, D);
        t->w.sh_router = t->sh_router;
    }
    t->m.hp = t->hp;
    t->m.hp.n_layer = 1;
    t->m.w.layers[0].moe = t->w;
    return t;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* y += a * down . (silu(gate . x) * (up . x)), all straight from the arrays. */
static void add_mlp(float a, const float *g, const float *u, const float *dn, int ff, const float *x, float *y) {
    float h[FF > SH ? FF : SH];
    for (int f = 0; f < ff; f++) {
        float zg = 0, zu = 0;
        for (int i = 0; i < D; i++) zg += g[f * D + i] * x[i], zu += u[f * D + i] * x[i];
        h[f] = silu(zg) * zu;
    }
    for (int i = 0; i < D; i++) {
        float z = 0;
        for (int f = 0; f < ff; f++) z += dn[i * ff + f] * h[f];
        y[i] += a * z;
    }
}

/* The layer computed directly: softmax over all experts, the best K,
 * renormalized, plus the gated shared expert. */
static void reference(const toy *t, const float *x, float *y) {
    float p[E], mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) {
        p[e] = 0;
        for (int i = 0; i < D; i++) p[e] += t->router[e][i] * x[i];
        mx = fmaxf(mx, p[e]);
    }
    for (int e = 0; e < E; e++) sum += p[e] = expf(p[e] - mx);
    int best[K];
    float total = 0;
    for (int j = 0; j < K; j++) {
        best[j] = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++) taken |= best[q] == e;
            if (!taken && (best[j] < 0 || p[e] > p[best[j]])) best[j] = e;
        }
        total += p[best[j]] / sum;
    }
    memset(y, 0, D * sizeof *y);
    for (int e = 0; e < E; e++) /* ascending expert order, as moe_ffn adds them */
        for (int j = 0; j < K; j++)
            if (best[j] == e) add_mlp(p[e] / sum / total, &t->g[e][0][0], &t->u[e][0][0], &t->dn[e][0][0], FF, x, y);
    if (t->hp.n_ff_shexp) {
        float z = 0;
        for (int i = 0; i < D; i++) z += t->sh_router[i] * x[i];
        add_mlp(1.0f / (1.0f + expf(-z)), &t->sg[0][0], &t->su[0][0], &t->sd[0][0], SH, x, y);
    }
}

static void run(toy *t, const float *x, int n, float *y) {
    threadpool *threads = threadpool_create(2);
    t->m.w.layers[0].moe = t->w;
    moe_scratch *s = moe_scratch_create(&t->m, T);
    void *mm = malloc(moe_matmul_scratch_size(&t->hp, &t->w, T) + 64);
    assert_non_null(s);
    assert_non_null(mm);
    moe_ffn(threads, &t->hp, &t->w, x, n, y, s, mm);
    free(mm);
    moe_scratch_free(s);
    threadpool_free(threads);
}

static void test_route_softmax_topk_renormalized_and_scaled(void **state) {
    (void)state;
    model_hparams hp = {.n_expert = 4, .n_expert_used = 2, .gating = GATING_SOFTMAX, .expert_norm = false,
                        .expert_scale = 1.0f};
    float logits[4] = {1.0f, 3.0f, 2.0f, 3.0f}, w[2];
    int32_t ex[2];
    moe_route(&hp, logits, NULL, ex, w);
    const float z = expf(1) + 2 * expf(3) + expf(2);
    assert_int_equal(ex[0], 1); /* a tie: the lower index first */
    assert_int_equal(ex[1], 3);
    assert_float_equal(w[0], expf(3) / z, 1e-6);
    assert_float_equal(w[1], expf(3) / z, 1e-6);
    hp.expert_norm = true, hp.expert_scale = 2.5f;
    float again[4] = {1.0f, 3.0f, 2.0f, 3.0f};
    moe_route(&hp, again, NULL, ex, w);
    assert_float_equal(w[0], 1.25f, 1e-6);
    assert_float_equal(w[1], 1.25f, 1e-6);
}

static void test_route_sigmoid(void **state) {
    (void)state;
    model_hparams hp = {.n_expert = 3, .n_expert_used = 1, .gating = GATING_SIGMOID, .expert_scale = 1.0f};
    float logits[3] = {-1.0f, 0.5f, 0.25f}, w[1];
    int32_t ex[1];
    moe_route(&hp, logits, NULL, ex, w);
    assert_int_equal(ex[0], 1);
    assert_float_equal(w[0], 1.0f / (1.0f + expf(-0.5f)), 1e-6);
}

/* Group-limited routing: 8 experts in 4 groups of 2, 1 group used. Group
 * 3 holds the best expert (7), so the second choice is its weak partner 6,
 * not expert 0, the second best of all; the weights stay softmax over all
 * eight. */
static void test_route_groups(void **state) {
    (void)state;
    model_hparams hp = {.n_expert = 8, .n_expert_used = 2, .gating = GATING_SOFTMAX, .expert_scale = 1.0f,
                        .n_expert_groups = 4, .n_group_used = 1};
    const float in[8] = {2.9f, -1.0f, 1.5f, 1.0f, 1.9f, 0.0f, 0.0f, 3.0f};
    float logits[8], w[2], z = 0;
    memcpy(logits, in, sizeof in);
    for (int e = 0; e < 8; e++) z += expf(in[e]);
    int32_t ex[2];
    moe_route(&hp, logits, NULL, ex, w);
    assert_int_equal(ex[0], 7);
    assert_int_equal(ex[1], 6);
    assert_float_equal(w[0], expf(3.0f) / z, 1e-6);
    assert_float_equal(w[1], expf(0.0f) / z, 1e-6);
}

/* DeepSeek-V3's noaux_tc routing: sigmoid scores, a selection bias that
 * chooses but does not weigh, and groups ranked by their two best biased
 * scores. 8 experts in 4 groups of 2, 2 groups used, 2 experts chosen.
 * Sigmoid scores s and biased scores c = s + bias:
 *   group 0: s 0.95 0.10 c 0.55 0.20 -> 0.75  (the best score, but biased down)
 *   group 1: s 0.60 0.60 c 0.60 0.60 -> 1.20
 *   group 2: s 0.90 0.05 c 0.90 0.05 -> 0.95  (its best alone would beat group 1's)
 *   group 3: s 0.30 0.30 c 0.50 0.50 -> 1.00
 * Groups 1 and 3 are kept (by their best alone, 2 and 1 would be); the
 * choice is experts 2, 3 (c 0.60) over 6, 7 (c 0.50), and the weights are
 * their unbiased scores, renormalized and scaled. */
static void test_route_selection_bias_and_top2_groups(void **state) {
    (void)state;
    model_hparams hp = {.n_expert = 8, .n_expert_used = 2, .gating = GATING_SIGMOID, .expert_norm = true,
                        .expert_scale = 2.5f, .n_expert_groups = 4, .n_group_used = 2};
    const float s[8] = {0.95f, 0.10f, 0.60f, 0.60f, 0.90f, 0.05f, 0.30f, 0.30f};
    const float bias[8] = {-0.40f, 0.10f, 0.0f, 0.0f, 0.0f, 0.0f, 0.20f, 0.20f};
    float logits[8], w[2];
    for (int e = 0; e < 8; e++) logits[e] = logf(s[e] / (1.0f - s[e])); /* sigmoid^-1 */
    int32_t ex[2];
    moe_route(&hp, logits, bias, ex, w);
    assert_int_equal(ex[0], 2);
    assert_int_equal(ex[1], 3);
    assert_float_equal(w[0], 1.25f, 1e-5);
    assert_float_equal(w[1], 1.25f, 1e-5);
    /* without the bias, V2's rule: groups 0 (0.95) and 2 (0.90), experts 0 and 4 */
    for (int e = 0; e < 8; e++) logits[e] = logf(s[e] / (1.0f - s[e]));
    moe_route(&hp, logits, NULL, ex, w);
    assert_int_equal(ex[0], 0);
    assert_int_equal(ex[1], 4);
    assert_float_equal(w[0], 2.5f * 0.95f / (0.95f + 0.90f), 1e-5);
}

static void check_layer(bool shared) {
    toy *t = make_toy(shared);
    float x[T][D], y[T][D], alone[D], want[D];
    for (int r = 0; r < T; r++)
        for (int i = 0; i < D; i++) x[r][i] = cosf((float)(r * 31 + i * 7));
    run(t, &x[0][0], T, &y[0][0]);
    for (int r = 0; r < T; r++) {
        reference(t, x[r], want);
        run(t, x[r], 1, alone);
        for (int i = 0; i < D; i++) {
            assert_float_equal(y[r][i], want[i], 1e-5);
            assert_float_equal(y[r][i], alone[i], 0); /* a token's row does not depend on the batch */
        }
    }
    free(t);
}

static void test_layer_matches_direct_computation(void **state) {
    (void)state;
    check_layer(false);
}

static void test_shared_expert_with_its_gate(void **state) {
    (void)state;
    check_layer(true);
}

/* One token, the experts it did not choose filled with NaN: its output is
 * finite, so their bytes were never read. */
static void test_unchosen_experts_are_not_read(void **state) {
    (void)state;
    toy *t = make_toy(false);
    float x[D], y[D], p[E];
    for (int i = 0; i < D; i++) x[i] = cosf((float)(i * 7));
    for (int e = 0; e < E; e++) {
        p[e] = 0;
        for (int i = 0; i < D; i++) p[e] += t->router[e][i] * x[i];
    }
    int32_t ex[K];
    float w[K];
    moe_route(&t->hp, p, NULL, ex, w);
    for (int e = 0; e < E; e++) {
        if (e == ex[0] || e == ex[1]) continue;
        for (int f = 0; f < FF; f++)
            for (int i = 0; i < D; i++) t->g[e][f][i] = t->u[e][f][i] = t->dn[e][i][f] = NAN;
    }
    run(t, x, 1, y);
    for (int i = 0; i < D; i++) assert_true(isfinite(y[i]));
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_softmax_topk_renormalized_and_scaled),
        cmocka_unit_test(test_route_sigmoid),
        cmocka_unit_test(test_route_groups),
        cmocka_unit_test(test_route_selection_bias_and_top2_groups),
        cmocka_unit_test(test_layer_matches_direct_computation),
        cmocka_unit_test(test_shared_expert_with_its_gate),
        cmocka_unit_test(test_unchosen_experts_are_not_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
