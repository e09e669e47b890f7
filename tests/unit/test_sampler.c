/* Sampling: greedy picks the argmax; a seed fixes the draw; top-k, top-p and
 * min-p never return a token outside their set and sample inside it in
 * proportion to the probabilities; penalties and logit bias change exactly
 * the logits they should; any logits at all (NaN, +inf, -inf, mixes) give a
 * possible token under every option, or -1 when no token is possible. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NV 1000

/* logits where token i has probability proportional to 2^-(i/100) except a few peaks */
static void fill(float *l) {
    for (int i = 0; i < NV; i++) l[i] = -0.01f * i;
    l[500] = 3.0f; /* p ~ e^3 relative */
    l[7] = 2.0f;
    l[900] = 1.0f;
}

static void test_greedy_is_argmax(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    float l[NV];
    fill(l);
    sampling_params p = sampling_defaults();
    p.temperature = 0;
    rng_state r;
    rng_seed(&r, 1);
    assert_int_equal(sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0), 500);
    sampler_free(s);
}

static void test_seed_determinism(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    sampling_params p = sampling_defaults();
    int32_t a[50], b[50];
    for (int run = 0; run < 2; run++) {
        rng_state r;
        rng_seed(&r, 42);
        for (int i = 0; i < 50; i++) {
            float l[NV];
            fill(l);
            (run ? b : a)[i] = sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0);
        }
    }
    assert_memory_equal(a, b, sizeof a);
    sampler_free(s);
}

static void test_top_k_one_is_greedy_and_top_k_limits(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    sampling_params p = sampling_defaults();
    rng_state r;
    rng_seed(&r, 3);
    p.top_k = 1;
    for (int i = 0; i < 100; i++) {
        float l[NV];
        fill(l);
        assert_int_equal(sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0), 500);
    }
    p.top_k = 3; /* the three peaks */
    int hits[NV] = {0};
    for (int i = 0; i < 20000; i++) {
        float l[NV];
        fill(l);
        int t = sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0);
        assert_true(t == 500 || t == 7 || t == 900);
        hits[t]++;
    }
    /* Renormalized over the three: e^3, e^2, e^1. */
    double z = exp(3) + exp(2) + exp(1);
    assert_true(fabs(hits[500] / 20000.0 - exp(3) / z) < 0.02);
    assert_true(fabs(hits[7] / 20000.0 - exp(2) / z) < 0.02);
    sampler_free(s);
}

static void test_top_p_nucleus(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    sampling_params p = sampling_defaults();
    rng_state r;
    rng_seed(&r, 9);
    /* Compute the exact nucleus by full sort. */
    float l[NV];
    fill(l);
    double prob[NV], z = 0;
    for (int i = 0; i < NV; i++) z += prob[i] = exp(l[i]);
    int order[NV];
    for (int i = 0; i < NV; i++) order[i] = i;
    for (int i = 0; i < NV; i++)
        for (int j = i + 1; j < NV; j++)
            if (prob[order[j]] > prob[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    p.top_p = 0.95f;
    double mass = 0;
    int n_nucleus = 0;
    while (mass < (double)0.95f * z) mass += prob[order[n_nucleus++]];
    assert_true(n_nucleus > 256); /* exercises the growing prefix */
    char in_set[NV] = {0};
    for (int i = 0; i < n_nucleus; i++) in_set[order[i]] = 1;
    for (int i = 0; i < 5000; i++) {
        fill(l);
        int t = sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0);
        assert_true(in_set[t]);
    }
    sampler_free(s);
}

static void test_min_p(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    sampling_params p = sampling_defaults();
    rng_state r;
    rng_seed(&r, 5);
    p.min_p = 0.2f; /* keeps tokens with p >= 0.2 * p(500): 500 (1), 7 (e^-1 = .37); not 900 (.135) */
    for (int i = 0; i < 5000; i++) {
        float l[NV];
        fill(l);
        int t = sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0);
        assert_true(t == 500 || t == 7);
    }
    sampler_free(s);
}

static void test_penalties_and_bias(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    sampling_params p = sampling_defaults();
    p.temperature = 0;
    rng_state r;
    rng_seed(&r, 1);
    float l[NV];
    fill(l);
    int32_t prompt[] = {7, 900};
    int32_t out[] = {500, 500, 7};
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    sampler_sample(s, &p, &r, l, prompt, 2, out, 3);
    /* 500: 3/2 - 0.25*2 - 0.5 = 0.5; 7: 2/2 - 0.25 - 0.5 = 0.25; 900: 1/2 (prompt only). */
    assert_true(fabsf(l[500] - 0.5f) < 1e-6f);
    assert_true(fabsf(l[7] - 0.25f) < 1e-6f);
    assert_true(fabsf(l[900] - 0.5f) < 1e-6f);
    assert_true(l[1] == -0.01f); /* untouched */
    /* Counts are reset: a second call with no history changes nothing. */
    fill(l);
    p.repetition_penalty = 1, p.presence_penalty = 0, p.frequency_penalty = 0;
    logit_bias_entry bias[] = {{42, 100.0f}};
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    assert_int_equal(sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0), 42);
    sampler_free(s);
}

/* ---- hostile logits ---- */

/* The option sets every hostile pattern is sampled under. */
static sampling_params option_set(int i, const logit_bias_entry *bias, int n_bias) {
    sampling_params p = sampling_defaults();
    switch (i) {
    case 0: p.temperature = 0; break;
    case 1: break;
    case 2: p.temperature = 0.7f, p.top_k = 5; break;
    case 3: p.top_p = 0.5f; break;
    case 4: p.min_p = 0.1f; break;
    case 5: p.min_p = 1.0f; break;
    case 6: p.temperature = 1.5f, p.top_k = 3, p.top_p = 0.9f, p.min_p = 0.05f; break;
    case 7: p.repetition_penalty = 1.5f, p.presence_penalty = 1, p.frequency_penalty = 2; break;
    case 8: p.logit_bias = bias, p.n_logit_bias = n_bias; break;
    case 9: p.temperature = 0, p.repetition_penalty = 2, p.logit_bias = bias, p.n_logit_bias = n_bias; break;
    }
    return p;
}
#define N_OPTION_SETS 10

typedef enum { ALL_NAN, ALL_NEG_INF, ONE_FINITE, MIXED, TWO_POS_INF, ALL_POS_INF, NAN_AND_NEG_INF } pattern;

static void fill_pattern(float *l, pattern pat) {
    for (int i = 0; i < NV; i++) {
        switch (pat) {
        case ALL_NAN: l[i] = NAN; break;
        case ALL_NEG_INF: l[i] = -INFINITY; break;
        case ONE_FINITE: l[i] = i == 42 ? 0.5f : NAN; break;
        case MIXED: l[i] = i == 10 ? 1.0f : i == 20 ? 2.0f : i % 2 ? NAN : -INFINITY; break;
        case TWO_POS_INF: l[i] = i == 3 || i == 77 ? INFINITY : i % 3 ? NAN : (float)i; break;
        case ALL_POS_INF: l[i] = INFINITY; break;
        case NAN_AND_NEG_INF: l[i] = i % 2 ? NAN : -INFINITY; break;
        }
    }
}

/* Whether `tok` is a token the pattern leaves possible (-1: none is). */
static bool allowed(pattern pat, int32_t tok) {
    switch (pat) {
    case ALL_NAN:
    case ALL_NEG_INF:
    case NAN_AND_NEG_INF: return tok == -1;
    case ONE_FINITE: return tok == 42;
    case MIXED: return tok == 10 || tok == 20;
    case TWO_POS_INF: return tok == 3 || tok == 77;
    case ALL_POS_INF: return tok >= 0 && tok < NV;
    }
    return false;
}

static void test_hostile_logits_under_every_option(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    /* Bias (finite, as the server allows) on a possible and an impossible token of each pattern. */
    const logit_bias_entry bias[] = {{10, 100.0f}, {20, -100.0f}, {42, 5.0f}, {1, 100.0f}, {3, -100.0f}};
    const int32_t prompt[] = {10, 20, 42, 3, 1};
    const int32_t output[] = {20, 20, 77, 42, 999};
    float l[NV];
    for (int pat = ALL_NAN; pat <= NAN_AND_NEG_INF; pat++) {
        for (int o = 0; o < N_OPTION_SETS; o++) {
            const sampling_params p = option_set(o, bias, (int)(sizeof bias / sizeof *bias));
            rng_state r;
            rng_seed(&r, (uint64_t)(pat * 100 + o));
            for (int draw = 0; draw < 20; draw++) {
                fill_pattern(l, (pattern)pat);
                const int32_t tok = sampler_sample(s, &p, &r, l, prompt, 5, output, 5);
                if (!allowed((pattern)pat, tok)) fail_msg("pattern %d, option set %d: token %d", pat, o, tok);
            }
        }
    }
    sampler_free(s);
}

/* Greedy over +inf picks the first +inf; a -inf bias can take away the only
 * possible token; parameters no server would send (a NaN temperature, min_p
 * above 1, a NaN top_p) still give a possible token. */
static void test_hostile_edges(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    rng_state r;
    rng_seed(&r, 7);
    float l[NV];
    sampling_params p = sampling_defaults();
    p.temperature = 0;
    fill_pattern(l, TWO_POS_INF);
    assert_int_equal(sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0), 3);

    const logit_bias_entry kill[] = {{42, -INFINITY}};
    p = sampling_defaults();
    p.logit_bias = kill, p.n_logit_bias = 1;
    fill_pattern(l, ONE_FINITE);
    assert_int_equal(sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0), -1);

    const float odd[][3] = {{NAN, 0, 1}, {1, 0, 5}, {1, 0, 1}, {1e-30f, 0, 0}, {INFINITY, 0, 0}};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        p = sampling_defaults();
        p.temperature = odd[i][0], p.min_p = odd[i][2];
        if (i == 2) p.top_p = NAN;
        fill(l);
        const int32_t tok = sampler_sample(s, &p, &r, l, NULL, 0, NULL, 0);
        if (tok < 0 || tok >= NV) fail_msg("odd parameters %zu: token %d", i, tok);
    }
    sampler_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_top_k_one_is_greedy_and_top_k_limits),
        cmocka_unit_test(test_top_p_nucleus),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_penalties_and_bias),
        cmocka_unit_test(test_hostile_logits_under_every_option),
        cmocka_unit_test(test_hostile_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
