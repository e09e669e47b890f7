/* Log-probabilities from logits, as a request's logprobs and beam search's
 * candidates see them: the log-sum-exp normalizes, top-k ranks by logit with
 * the lower id first on ties, and a skipped token is never ranked; NaN
 * logits are impossible tokens, never ranked and not in the normalizer; a
 * prompt token's rank (prompt_logprobs) counts the tokens at least as likely. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/logprobs.h"
#include "util/top_k.h"

#include <math.h>

static void test_logsumexp_normalizes_and_does_not_overflow(void **state) {
    (void)state;
    const float uniform[4] = {0, 0, 0, 0};
    assert_float_equal(logprobs_logsumexp(uniform, 4), logf(4), 1e-6);
    const float big[3] = {1000, 1000, -INFINITY}; /* exp(1000) overflows a double */
    assert_float_equal(logprobs_logsumexp(big, 3), 1000 + logf(2), 1e-3);
    const float x[3] = {1, 2, 3};
    double p = 0;
    const float lse = logprobs_logsumexp(x, 3);
    for (int i = 0; i < 3; i++) p += exp(x[i] - lse);
    assert_float_equal(p, 1.0, 1e-6);
}

static void test_top_k_is_largest_first_lower_id_on_ties(void **state) {
    (void)state;
    const float x[8] = {0.5f, 3, 1, 3, -2, 7, 1, 0};
    int32_t top[8];
    assert_int_equal(top_k_indices(x, 8, 4, NULL, NULL, top), 4);
    const int32_t want[4] = {5, 1, 3, 2};
    for (int i = 0; i < 4; i++) assert_int_equal(top[i], want[i]);
    assert_int_equal(top_k_indices(x, 8, 0, NULL, NULL, top), 0);
    assert_int_equal(top_k_indices(x, 3, 8, NULL, NULL, top), 3); /* fewer tokens than k */
    assert_int_equal(top[0], 1);
    assert_int_equal(top[1], 2);
    assert_int_equal(top[2], 0);
}

static bool skip_odd(const void *ctx, int32_t token) {
    (void)ctx;
    return token % 2 == 1;
}

static void test_top_k_never_ranks_a_skipped_token(void **state) {
    (void)state;
    const float x[6] = {0, 9, 1, 8, 2, 7};
    int32_t top[6];
    assert_int_equal(top_k_indices(x, 6, 2, skip_odd, NULL, top), 2);
    assert_int_equal(top[0], 4);
    assert_int_equal(top[1], 2);
    assert_int_equal(top_k_indices(x, 6, 5, skip_odd, NULL, top), 3); /* only 3 even ids */
}

static void test_nan_logits_are_impossible_tokens(void **state) {
    (void)state;
    const float x[] = {NAN, 0, NAN, 0, -INFINITY};
    assert_float_equal(logprobs_logsumexp(x, 5), logf(2), 1e-6);
    int32_t top[5];
    assert_int_equal(top_k_indices(x, 5, 5, NULL, NULL, top), 3);
    assert_int_equal(top[0], 1);
    assert_int_equal(top[1], 3);
    assert_int_equal(top[2], 4);
    const float all_nan[] = {NAN, NAN};
    assert_true(logprobs_logsumexp(all_nan, 2) == -INFINITY);
    assert_int_equal(top_k_indices(all_nan, 2, 2, NULL, NULL, top), 0);
    const float inf[] = {1, INFINITY};
    assert_true(logprobs_logsumexp(inf, 2) == INFINITY);
}

/* vLLM's rank: the tokens at least as likely, itself included; checked
 * against counting by hand over random rows with ties. */
static void test_rank_counts_tokens_at_least_as_likely(void **state) {
    (void)state;
    const float x[6] = {0.5f, 3, 1, 3, -INFINITY, 7};
    assert_int_equal(logprobs_rank(x, 6, 5), 1);
    assert_int_equal(logprobs_rank(x, 6, 1), 3); /* a tie with token 3 counts against both */
    assert_int_equal(logprobs_rank(x, 6, 3), 3);
    assert_int_equal(logprobs_rank(x, 6, 2), 4);
    assert_int_equal(logprobs_rank(x, 6, 4), 6);
    const float nan_row[4] = {1, NAN, 2, NAN};
    assert_int_equal(logprobs_rank(nan_row, 4, 0), 2);  /* NaN is never more likely */
    assert_int_equal(logprobs_rank(nan_row, 4, 1), 3); /* and ranks after every real token */
    unsigned seed = 7;
    float row[64];
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < 64; i++) {
            seed = seed * 1103515245u + 12345u;
            row[i] = (float)((seed >> 16) % 16); /* many ties */
        }
        const int32_t tok = (int32_t)(seed % 64);
        int want = 0;
        for (int i = 0; i < 64; i++) want += row[i] >= row[tok];
        assert_int_equal(logprobs_rank(row, 64, tok), want);
        /* Nothing is more likely than the top-1 token: its rank is its ties. */
        int32_t top;
        top_k_indices(row, 64, 1, NULL, NULL, &top);
        int ties = 0;
        for (int i = 0; i < 64; i++) ties += row[i] == row[top];
        assert_int_equal(logprobs_rank(row, 64, top), ties);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logsumexp_normalizes_and_does_not_overflow),
        cmocka_unit_test(test_top_k_is_largest_first_lower_id_on_ties),
        cmocka_unit_test(test_top_k_never_ranks_a_skipped_token),
        cmocka_unit_test(test_nan_logits_are_impossible_tokens),
        cmocka_unit_test(test_rank_counts_tokens_at_least_as_likely),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
