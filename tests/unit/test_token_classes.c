/* Token masks from the vocabulary's token classes (token_mask_class.h)
 * against the walk of the whole vocabulary (token_mask.c), state by state
 * along random valid outputs, on a vocabulary large enough for the classes
 * to be used: every printable ASCII byte and pair of them, plus tokens that
 * cross string boundaries, escapes and UTF-8 pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grammar/constraint.h"
#include "grammar/token_mask.h"
#include "grammar/token_mask_class.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static token_vocab *large_vocab(void) {
    static const char *extra[] = {"\"",
                                  "\",",
                                  "\"}",
                                  "\": ",
                                  "\": \"",
                                  "{\"",
                                  ", \"",
                                  "\\n",
                                  "\\\"",
                                  "\\u00e9",
                                  "\xc3\xa9",
                                  "\xc3",
                                  "\xa9",
                                  "\xe2\x82\xac",
                                  "a\"",
                                  "ab\"}",
                                  "\n",
                                  "\n  ",
                                  "\t",
                                  "true",
                                  "false",
                                  "null",
                                  "[\"",
                                  "\"]",
                                  "123",
                                  "-1",
                                  "1.5e3",
                                  "{}",
                                  "[]",
                                  "\"\"",
                                  "abcdefghijklmnop",
                                  "\"abc\", \"de",
                                  "((((",
                                  "))))"};
    const int n_extra = (int)(sizeof extra / sizeof *extra);
    const int n = 95 + 95 * 95 + n_extra + 1;
    char **toks = malloc((size_t)n * sizeof *toks);
    int *lens = malloc((size_t)n * sizeof *lens);
    bool *eog = calloc((size_t)n, sizeof *eog);
    int k = 0;
    for (int a = 32; a < 127; a++) {
        toks[k] = malloc(2), toks[k][0] = (char)a, lens[k++] = 1;
        for (int b = 32; b < 127; b++)
            toks[k] = malloc(2), toks[k][0] = (char)a, toks[k][1] = (char)b, lens[k++] = 2;
    }
    for (int i = 0; i < n_extra; i++)
        toks[k] = strdup(extra[i]), lens[k++] = (int)strlen(extra[i]);
    toks[k] = strdup(""), lens[k] = 0, eog[k++] = true;
    token_vocab *v = token_vocab_create(n, (const char *const *)toks, lens, eog);
    for (int i = 0; i < n; i++)
        free(toks[i]);
    free(toks), free(lens), free(eog);
    return v;
}

/* Follows `walks` random outputs of the constraint; at each state the mask
 * (classes, cached per state) must equal the whole walk's. */
static void check_walks(const token_vocab *v, constraint *c, int walks, int steps, unsigned seed) {
    const size_t words = (size_t)(v->n_vocab + 31) / 32;
    uint32_t *want = malloc(words * 4), *got = malloc(words * 4);
    int32_t *allowed = malloc((size_t)v->n_vocab * sizeof *allowed);
    srand(seed);
    for (int w = 0; w < walks; w++) {
        constraint_state cs;
        assert_int_equal(constraint_state_init(&cs, c), 0);
        for (int step = 0; step < steps; step++) {
            assert_int_equal(token_mask_walk(constraint_grammar(c), v, &cs.st, want), 0);
            assert_int_equal(constraint_mask(&cs, v, got), 0);
            for (size_t i = 0; i < words; i++)
                if (want[i] != got[i])
                    fail_msg("walk %d step %d: masks differ at tokens %zu..%zu", w, step, i * 32,
                             i * 32 + 31);
            int n = 0;
            for (int t = 0; t < v->n_vocab; t++)
                if (want[t / 32] >> (t % 32) & 1) allowed[n++] = t;
            if (n == 0) break;
            /* Prefer long tokens, so outputs reach past their first values. */
            int t = allowed[rand() % n];
            for (int tries = 0; tries < 3 && !v->is_eog[t]; tries++) {
                const int u = allowed[rand() % n];
                if (v->offset[u + 1] - v->offset[u] > v->offset[t + 1] - v->offset[t]) t = u;
            }
            assert_int_equal(constraint_accept(&cs, v, t), 1);
            if (v->is_eog[t]) break;
        }
        constraint_state_free(&cs);
    }
    free(want), free(got), free(allowed);
}

static constraint *schema(const char *text, bool any_ws) {
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    const json_schema_options opt = {.any_whitespace = any_ws};
    constraint *c = constraint_compile(CONSTRAINT_JSON_SCHEMA, j, &opt);
    if (!c) fail_msg("%s", err_get());
    json_decref(j);
    return c;
}

static void test_classes_equal_the_whole_walk_on_schemas(void **state) {
    (void)state;
    token_vocab *v = large_vocab();
    static const char *schemas[] = {
        "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"city\": "
        "{\"type\": \"string\"}, "
        "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}, \"n\": {\"type\": "
        "\"integer\"}}, "
        "\"required\": [\"name\", \"city\", \"tags\"]}",
        "{\"type\": \"object\", \"properties\": {\"short\": {\"type\": \"string\", \"maxLength\": "
        "3}, \"long\": "
        "{\"type\": \"string\", \"minLength\": 4, \"maxLength\": 70}, \"code\": {\"type\": "
        "\"string\", \"pattern\": "
        "\"^[a-z]+-[0-9]{2}$\"}}, \"required\": [\"short\", \"long\", \"code\"]}",
        "{\"anyOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, "
        "\"required\": [\"a\"]}, "
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"maxLength\": 2}, "
        "\"b\": {\"type\": "
        "\"string\"}}, \"required\": [\"a\", \"b\"]}, {\"type\": \"string\"}]}",
        "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}",
        "{\"type\": \"array\", \"items\": {\"enum\": [\"red\", \"green\", \"a\\\"b\"]}, "
        "\"minItems\": 2}",
        "{\"type\": \"object\", \"properties\": {\"doc\": {}}, \"required\": [\"doc\"]}",
        /* Two kinds with their own copy of one string (their stacks inside it are
         * classified once) and a third whose string is one longer (not a copy). */
        "{\"anyOf\": [{\"$ref\": \"#/$defs/A\"}, {\"$ref\": \"#/$defs/B\"}, {\"$ref\": \"#/$defs/C\"}], "
        "\"$defs\": {\"A\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", "
        "\"maxLength\": 12}, \"a\": {\"type\": \"integer\"}}, \"required\": [\"name\", \"a\"]}, "
        "\"B\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, "
        "\"b\": {\"type\": \"string\"}}, \"required\": [\"name\", \"b\"]}, "
        "\"C\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 13}, "
        "\"c\": {\"type\": \"null\"}}, \"required\": [\"name\", \"c\"]}}}",
    };
    for (size_t s = 0; s < sizeof schemas / sizeof *schemas; s++)
        for (int ws = 0; ws < 2; ws++) {
            constraint *c = schema(schemas[s], ws);
            check_walks(v, c, 6, 40, (unsigned)(s * 2 + ws + 1));
            constraint_release(c);
        }
    token_class_stats st;
    token_class_stats_get(v, &st);
    /* The classes did the work: suffixes classified once, then found again. */
    assert_true(st.walks > 0);
    assert_true(st.hits > st.walks);
    assert_true(st.copies > 0);
    token_vocab_free(v);
}

static void test_classes_are_shared_across_constraints(void **state) {
    (void)state;
    token_vocab *v = large_vocab();
    constraint *a =
        schema("{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"string\"}}, "
               "\"required\": [\"x\"]}",
               false);
    constraint *b = schema(
        "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"y\": "
        "{\"type\": \"integer\"}, \"z\": {\"type\": \"string\"}}, \"required\": [\"y\", \"z\"]}}",
        false);
    const size_t words = (size_t)(v->n_vocab + 31) / 32;
    uint32_t *mask = malloc(words * 4), *want = malloc(words * 4);
    constraint_state sa, sb;
    assert_int_equal(constraint_state_init(&sa, a), 0);
    assert_int_equal(constraint_state_init(&sb, b), 0);
    const char *pa = "{\"x\": \"", *pb = "[{\"y\": 1, \"z\": \"";
    gscratch w = {0};
    assert_int_equal(gstate_advance_bytes(constraint_grammar(a), &sa.st, (const unsigned char *)pa,
                                          strlen(pa), &w),
                     1);
    token_class_stats before, after;
    assert_int_equal(constraint_mask(&sa, v, mask), 0);
    token_class_stats_get(v, &before);
    assert_int_equal(gstate_advance_bytes(constraint_grammar(b), &sb.st, (const unsigned char *)pb,
                                          strlen(pb), &w),
                     1);
    gscratch_free(&w);
    /* The second schema's string, in another context, is found classified. */
    assert_int_equal(constraint_mask(&sb, v, mask), 0);
    token_class_stats_get(v, &after);
    assert_int_equal(after.walks, before.walks);
    assert_true(after.hits > before.hits);
    assert_int_equal(token_mask_walk(constraint_grammar(b), v, &sb.st, want), 0);
    assert_memory_equal(mask, want, words * 4);
    free(mask), free(want);
    constraint_state_free(&sa), constraint_state_free(&sb);
    constraint_release(a), constraint_release(b);
    token_vocab_free(v);
}

static void test_classes_on_deep_and_any_json_grammars(void **state) {
    (void)state;
    token_vocab *v = large_vocab();
    const char *gbnf[] = {
        "root ::= \"(\" root \")\" | [a-z ]*",
        "root ::= item+\nitem ::= \"\\\"\" [^\"]* \"\\\"\" | \"(\" root \")\" | [0-9]",
    };
    for (int i = 0; i < 2; i++) {
        json_t *j = json_string(gbnf[i]);
        constraint *c = constraint_compile(CONSTRAINT_GBNF, j, NULL);
        json_decref(j);
        assert_non_null(c);
        check_walks(v, c, 6, 60, (unsigned)(100 + i));
        constraint_release(c);
    }
    for (int ws = 0; ws < 2; ws++) {
        const json_schema_options opt = {.any_whitespace = ws};
        constraint *c = constraint_compile(CONSTRAINT_JSON_OBJECT, NULL, &opt);
        assert_non_null(c);
        check_walks(v, c, 6, 60, (unsigned)(200 + ws));
        constraint_release(c);
    }
    token_vocab_free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes_equal_the_whole_walk_on_schemas),
        cmocka_unit_test(test_classes_are_shared_across_constraints),
        cmocka_unit_test(test_classes_on_deep_and_any_json_grammars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
