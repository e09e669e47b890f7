/* Sampling: greedy picks the argmax; a seed fixes the draw; top-k, top-p and
 * min-p never return a token outside their set and sample inside it in
 * proportion to the probabilities; penalties and logit bias change exactly
 * the logits they should. */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_top_k_one_is_greedy_and_top_k_limits),
        cmocka_unit_test(test_top_p_nucleus),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_penalties_and_bias),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
