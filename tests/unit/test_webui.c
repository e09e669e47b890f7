/* The chat page's embedded files (server/webui.c and the table cmake/webui.cmake
 * generates): every URL the page loads is in the table with its content type,
 * cache policy and a quoted ETag; "/" and "/index.html" are the page; unknown
 * paths are not served; If-None-Match is compared as RFC 9110 says (a list,
 * weak tags, "*"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/webui.h"

#include <string.h>

static const webui_asset *must_find(const char *path) {
    const webui_asset *a = webui_find(path);
    assert_non_null(a);
    assert_string_equal(a->path, strcmp(path, "/index.html") ? path : "/");
    assert_true(a->len > 0);
    return a;
}

static bool holds(const webui_asset *a, const char *text) {
    const size_t n = strlen(text);
    for (size_t i = 0; i + n <= a->len; i++)
        if (!memcmp(a->data + i, text, n)) return true;
    return false;
}

static void test_page_and_its_assets_are_embedded(void **state) {
    (void)state;
    const webui_asset *page = must_find("/");
    assert_ptr_equal(webui_find("/index.html"), page);
    assert_string_equal(page->content_type, "text/html; charset=utf-8");
    assert_string_equal(page->cache_control, "no-cache");
    assert_true(holds(page, "<!DOCTYPE html>"));
    /* Every file the page loads is served, with the type a browser executes. */
    static const char *scripts[] = {"/webui/app.js", "/webui/marked.min.js", "/webui/highlight.min.js"};
    for (size_t i = 0; i < sizeof scripts / sizeof *scripts; i++) {
        assert_true(holds(page, scripts[i]));
        assert_string_equal(must_find(scripts[i])->content_type, "text/javascript; charset=utf-8");
    }
    static const char *styles[] = {"/webui/style.css", "/webui/highlight.css"};
    for (size_t i = 0; i < sizeof styles / sizeof *styles; i++) {
        assert_true(holds(page, styles[i]));
        assert_string_equal(must_find(styles[i])->content_type, "text/css; charset=utf-8");
    }
    /* The libraries are Debian's, as installed. */
    assert_true(holds(must_find("/webui/marked.min.js"), "marked"));
    assert_true(holds(must_find("/webui/highlight.min.js"), "hljs"));
    assert_string_equal(must_find("/webui/marked.min.js")->cache_control, "public, max-age=86400");
}

static void test_etags_are_quoted_and_distinct(void **state) {
    (void)state;
    for (size_t i = 0; i < webui_n_assets; i++) {
        const char *etag = webui_assets[i].etag;
        assert_int_equal(strlen(etag), 18);
        assert_true(etag[0] == '"' && etag[17] == '"');
        for (size_t j = 0; j < i; j++) assert_string_not_equal(etag, webui_assets[j].etag);
    }
}

static void test_unknown_paths_are_not_served(void **state) {
    (void)state;
    assert_null(webui_find("/webui/"));
    assert_null(webui_find("/webui/nope.js"));
    assert_null(webui_find("/webui/../index.html"));
    assert_null(webui_find("/v1/models"));
    assert_null(webui_find(""));
    assert_null(webui_find(NULL));
}

static void test_if_none_match(void **state) {
    (void)state;
    const char *etag = "\"0123456789abcdef\"";
    assert_true(webui_etag_matches("\"0123456789abcdef\"", etag));
    assert_true(webui_etag_matches("W/\"0123456789abcdef\"", etag));
    assert_true(webui_etag_matches("\"aaaa\", W/\"0123456789abcdef\"", etag));
    assert_true(webui_etag_matches(" \"aaaa\",\t\"0123456789abcdef\" ", etag));
    assert_true(webui_etag_matches("*", etag));
    assert_false(webui_etag_matches(NULL, etag));
    assert_false(webui_etag_matches("", etag));
    assert_false(webui_etag_matches("\"0123456789abcde\"", etag));
    assert_false(webui_etag_matches("\"0123456789abcdef", etag)); /* unterminated */
    assert_false(webui_etag_matches("0123456789abcdef", etag));   /* not quoted */
    assert_false(webui_etag_matches("\"aaaa\", bogus, \"bbbb\"", etag));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_and_its_assets_are_embedded),
        cmocka_unit_test(test_etags_are_quoted_and_distinct),
        cmocka_unit_test(test_unknown_paths_are_not_served),
        cmocka_unit_test(test_if_none_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
