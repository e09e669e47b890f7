/* The CORS settings: vLLM's JSON lists parsed, defaults (no origins, every
 * method and header), and each malformed flag refused naming the flag. The
 * headers themselves are checked over HTTP (test_server_cors.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/cors.h"

#include <string.h>

static void test_defaults(void **state) {
    (void)state;
    cors_config c;
    assert_int_equal(cors_config_parse(&c, NULL, NULL, NULL), 0);
    assert_null(c.origins[0]);
    assert_string_equal(c.methods[0], "*");
    assert_string_equal(c.methods_text, "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
    assert_string_equal(c.headers_text, "*");
    cors_config_free(&c);
}

static void test_lists(void **state) {
    (void)state;
    cors_config c;
    assert_int_equal(cors_config_parse(&c, "[\"http://a\", \"https://b:8443\"]", "[\"GET\", \"POST\"]", "[]"), 0);
    assert_string_equal(c.origins[0], "http://a");
    assert_string_equal(c.origins[1], "https://b:8443");
    assert_null(c.origins[2]);
    assert_string_equal(c.methods_text, "GET, POST");
    assert_string_equal(c.headers_text, "");
    cors_config_free(&c);
}

static void test_bad_lists_name_the_flag(void **state) {
    (void)state;
    static const struct {
        const char *o, *m, *h, *flag;
    } CASES[] = {
        {"http://a", NULL, NULL, "--allowed-origins"},
        {"\"http://a\"", NULL, NULL, "--allowed-origins"},
        {NULL, "{\"GET\": 1}", NULL, "--allowed-methods"},
        {NULL, NULL, "[\"x\", null]", "--allowed-headers"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        cors_config c;
        assert_int_equal(cors_config_parse(&c, CASES[i].o, CASES[i].m, CASES[i].h), -1);
        if (!strstr(err_get(), CASES[i].flag)) fail_msg("case %zu: %s", i, err_get());
        cors_config_free(&c); /* safe after a failure */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_bad_lists_name_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
