/* The engine's per-request token masks and stop-string matching, against
 * vLLM's rules written out by hand: allowed_token_ids leaves exactly those
 * logits (duplicates and order do not matter once request.c sorted them);
 * a bad word's last token is banned only right after the output spelled the
 * rest of it, a one-token word always; stop_scan reports the matched stop
 * string's length for include_stop_str_in_output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/stop_strings.h"
#include "engine/token_bans.h"

#include <math.h>
#include <string.h>

#define NV 50

static void fill(float *l) {
    for (int i = 0; i < NV; i++) l[i] = (float)i * 0.1f;
}

static int n_finite(const float *l) {
    int n = 0;
    for (int i = 0; i < NV; i++) n += isfinite(l[i]) != 0;
    return n;
}

static void test_allowed_token_ids_leave_only_those(void **state) {
    (void)state;
    static const int32_t sorted[] = {0, 3, 3, 17, 49};
    request_params p = request_params_defaults();
    p.allowed_token_ids = sorted;
    p.n_allowed_token_ids = 5;
    float l[NV];
    fill(l);
    token_bans_apply(&p, NULL, 0, l, NV);
    assert_int_equal(n_finite(l), 4);
    for (int i = 0; i < NV; i++) {
        const bool allowed = i == 0 || i == 3 || i == 17 || i == 49;
        if (allowed) assert_true(l[i] == (float)i * 0.1f);
        else assert_true(isinf(l[i]) && l[i] < 0);
    }
}

static void test_bad_words_ban_the_last_token_after_the_rest(void **state) {
    (void)state;
    /* words: [7] (one token), [4, 5, 6], [9, 5] */
    static const int32_t ids[] = {7, 4, 5, 6, 9, 5};
    static const int lens[] = {1, 3, 2};
    request_params p = request_params_defaults();
    p.bad_word_ids = ids;
    p.bad_word_lens = lens;
    p.n_bad_words = 3;
    static const struct {
        int32_t out[4];
        int n;
        int banned[3]; /* -1 ends */
    } CASES[] = {
        {{0}, 0, {7, -1}},                /* nothing generated: only the one-token word */
        {{4}, 1, {7, -1}},                /* 4 alone is not 4 5 */
        {{1, 4, 5}, 3, {7, 6, -1}},       /* ... 4 5: 6 would finish the word */
        {{4, 5, 9}, 3, {7, 5, -1}},       /* ... 9: 5 would finish [9, 5] */
        {{9, 4, 5, 0}, 4, {7, -1}},       /* the prefix must end the output */
    };
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        float l[NV];
        fill(l);
        token_bans_apply(&p, CASES[c].out, CASES[c].n, l, NV);
        int n_banned = 0;
        for (int k = 0; CASES[c].banned[k] >= 0; k++, n_banned++)
            if (isfinite(l[CASES[c].banned[k]])) fail_msg("case %zu: token %d not banned", c, CASES[c].banned[k]);
        if (n_finite(l) != NV - n_banned)
            fail_msg("case %zu: %d tokens banned, want %d", c, NV - n_finite(l), n_banned);
    }
}

static void test_no_masks_change_nothing(void **state) {
    (void)state;
    request_params p = request_params_defaults();
    float l[NV], want[NV];
    fill(l);
    fill(want);
    token_bans_apply(&p, NULL, 0, l, NV);
    assert_memory_equal(l, want, sizeof l);
}

static void test_stop_scan_reports_the_match_length(void **state) {
    (void)state;
    static const char *const stops[] = {"six", "ab"};
    size_t release = 0, len = 0;
    const char *text = "five, six, seven";
    assert_true(stop_scan(stops, 2, text, strlen(text), &release, &len));
    assert_int_equal(release, 6);
    assert_int_equal(len, 3);
    const char *early = "xab six";
    assert_true(stop_scan(stops, 2, early, strlen(early), &release, &len));
    assert_int_equal(release, 1);
    assert_int_equal(len, 2); /* the earliest match, not the first listed */
    const char *partial = "five, si";
    assert_false(stop_scan(stops, 2, partial, strlen(partial), &release, &len));
    assert_int_equal(release, 6); /* "si" may still become "six" */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_token_ids_leave_only_those),
        cmocka_unit_test(test_bad_words_ban_the_last_token_after_the_rest),
        cmocka_unit_test(test_no_masks_change_nothing),
        cmocka_unit_test(test_stop_scan_reports_the_match_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
