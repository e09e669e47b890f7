/* The embedding cache (server/embed_cache.h): hits return the stored vector
 * and token count, the key is the whole text and the truncation, the least
 * recently used entry goes first, counters count. And util/base64.h against
 * RFC 4648's test vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/embed_cache.h"
#include "util/base64.h"

#include <stdio.h>
#include <string.h>

static void put(embed_cache *c, const char *text, int truncate, float x, int n_tokens) {
    const float v[3] = {x, x + 1, x + 2};
    embed_cache_put(c, text, strlen(text), truncate, v, n_tokens);
}

static bool get(embed_cache *c, const char *text, int truncate, float *x, int *n_tokens) {
    float v[3] = {0};
    const bool hit = embed_cache_get(c, text, strlen(text), truncate, v, n_tokens);
    *x = v[0];
    return hit;
}

static void test_hit_returns_what_was_put(void **state) {
    (void)state;
    embed_cache *c = embed_cache_create(4, 3);
    assert_non_null(c);
    float x;
    int n = 0;
    assert_false(get(c, "hello", 0, &x, &n));
    put(c, "hello", 0, 1.5f, 7);
    assert_true(get(c, "hello", 0, &x, &n));
    assert_true(x == 1.5f && n == 7);
    /* The key is the whole text and the truncation. */
    assert_false(get(c, "hell", 0, &x, &n));
    assert_false(get(c, "hello!", 0, &x, &n));
    assert_false(get(c, "hello", 5, &x, &n));
    /* Texts with NUL bytes are keys of their own length. */
    const char a[] = {'a', 0, 'b'}, b[] = {'a', 0, 'c'};
    const float va[3] = {9, 9, 9};
    float out[3];
    embed_cache_put(c, a, 3, 0, va, 3);
    assert_false(embed_cache_get(c, b, 3, 0, out, &n));
    assert_true(embed_cache_get(c, a, 3, 0, out, &n) && out[2] == 9);
    embed_cache_stats st;
    embed_cache_get_stats(c, &st);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 5);
    assert_int_equal(st.entries, 2);
    embed_cache_free(c);
}

static void test_least_recently_used_goes_first(void **state) {
    (void)state;
    embed_cache *c = embed_cache_create(3, 3);
    float x;
    int n;
    put(c, "a", 0, 1, 1);
    put(c, "b", 0, 2, 1);
    put(c, "c", 0, 3, 1);
    assert_true(get(c, "a", 0, &x, &n)); /* a is now the most recent; b the least */
    put(c, "d", 0, 4, 1);
    assert_false(get(c, "b", 0, &x, &n));
    assert_true(get(c, "a", 0, &x, &n) && x == 1);
    assert_true(get(c, "c", 0, &x, &n) && x == 3);
    assert_true(get(c, "d", 0, &x, &n) && x == 4);
    put(c, "c", 0, 30, 1); /* already there: kept, refreshed */
    assert_true(get(c, "c", 0, &x, &n) && x == 3);
    /* Many more than fit, with colliding buckets: only the last 3 stay. */
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        put(c, key, i % 3, (float)i, i);
    }
    embed_cache_stats st;
    embed_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 3);
    for (int i = 997; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_true(get(c, key, i % 3, &x, &n) && x == (float)i && n == i);
    }
    snprintf(key, sizeof key, "k%d", 996);
    assert_false(get(c, key, 996 % 3, &x, &n));
    embed_cache_free(c);
}

static void test_base64_rfc4648_vectors(void **state) {
    (void)state;
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[16];
    for (int i = 0; i < 7; i++) {
        assert_int_equal(base64_encoded_len(strlen(in[i])), strlen(want[i]));
        base64_encode(in[i], strlen(in[i]), out);
        assert_string_equal(out, want[i]);
    }
    const unsigned char bytes[] = {0x00, 0xff, 0xfe, 0x80, 0x3f};
    base64_encode(bytes, sizeof bytes, out);
    assert_string_equal(out, "AP/+gD8=");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_returns_what_was_put),
        cmocka_unit_test(test_least_recently_used_goes_first),
        cmocka_unit_test(test_base64_rfc4648_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
