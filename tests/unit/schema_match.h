/* Helpers of the grammar tests: compile a JSON Schema (or fail the test with
 * the compiler's message), ask whether a grammar matches a whole string or
 * can still continue a prefix, and read a refusal's message. Include after
 * cmocka.h. */
#ifndef CLLM_TESTS_SCHEMA_MATCH_H
#define CLLM_TESTS_SCHEMA_MATCH_H

#include "grammar/grammar.h"
#include "grammar/grammar_match.h"
#include "grammar/json_schema.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <string.h>

/* Whether g takes every byte of s (1), and whether it may end there. */
static inline bool schema_walk(const grammar *g, const char *s, size_t n, bool need_end) {
    gstate st = {0};
    gscratch w = {0};
    assert_int_equal(gstate_init(&st, g, &w), 0);
    const int rc = gstate_advance_bytes(g, &st, (const unsigned char *)s, n, &w);
    const bool ok = rc == 1 && (!need_end || st.accept);
    gstate_free(&st);
    gscratch_free(&w);
    return ok;
}

/* Whether g matches all of s (the state accepts the end after every byte). */
static inline bool matches_n(const grammar *g, const char *s, size_t n) {
    return schema_walk(g, s, n, true);
}
static inline bool matches(const grammar *g, const char *s) {
    return matches_n(g, s, strlen(s));
}
/* Whether s is a prefix that g can still continue. */
static inline bool viable(const grammar *g, const char *s) {
    return schema_walk(g, s, strlen(s), false);
}

static inline grammar *schema(const char *json, bool any_ws) {
    json_error_t je;
    json_t *s = json_loads(json, JSON_DECODE_ANY, &je);
    if (!s) fail_msg("bad test JSON: %s: %s", je.text, json);
    const json_schema_options opt = {.any_whitespace = any_ws};
    grammar *g = grammar_from_json_schema(s, &opt);
    json_decref(s);
    if (!g) fail_msg("schema failed: %s", err_get());
    return g;
}

static inline const char *schema_error(const char *json) {
    json_t *s = json_loads(json, JSON_DECODE_ANY, NULL);
    assert_non_null(s);
    grammar *g = grammar_from_json_schema(s, NULL);
    json_decref(s);
    assert_null(g);
    return err_get();
}

#define assert_contains(hay, needle)                                                               \
    do {                                                                                           \
        if (!strstr((hay), (needle))) fail_msg("\"%s\" does not contain \"%s\"", (hay), (needle)); \
    } while (0)

#endif
