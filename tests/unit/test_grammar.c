/* The grammar engine: the byte-level recognizer (accepting, refusing, ending,
 * copies as rollback points), each frontend (GBNF, regex, choice, JSON
 * Schema) on strings it must take and strings it must refuse, integer ranges
 * checked against plain arithmetic over every value in a window, optional
 * properties over every subset, error messages that name the line, column,
 * position or keyword, the size limits, token masks against a token-by-token
 * check of every token, the mask cache against the uncached walk, and the
 * compile cache returning the same constraint for the same request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "grammar/grammar_match.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/token_mask.h"
#include "schema_match.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static grammar *gbnf(const char *text) {
    grammar *g = grammar_from_gbnf(text);
    if (!g) fail_msg("grammar failed: %s", err_get());
    return g;
}

/* The error of a frontend that must refuse its input. */
static const char *gbnf_error(const char *text) {
    grammar *g = grammar_from_gbnf(text);
    assert_null(g);
    return err_get();
}

static const char *regex_error(const char *re) {
    assert_null(grammar_from_regex(re));
    return err_get();
}

/* ---- GBNF ---- */

static void test_gbnf_literals_alternation_repetition(void **state) {
    (void)state;
    grammar *g = gbnf("# a comment\nroot ::= \"ab\" (\"c\" | \"de\")* x? y{2,3}\nx ::= [0-9]+\ny ::= \"!\"\n");
    assert_true(matches(g, "ab!!"));
    assert_true(matches(g, "abcdec42!!!"));
    assert_false(matches(g, "ab!"));
    assert_false(matches(g, "ab!!!!"));
    assert_false(matches(g, "abd!!"));
    assert_false(matches(g, "a"));
    grammar_free(g);
}

static void test_gbnf_classes_and_escapes(void **state) {
    (void)state;
    grammar *g = gbnf("root ::= [a-c\\x41] [^a\\n] \"\\t\\\"\\u00e9\" .\n");
    assert_true(matches(g, "aZ\t\"\xc3\xa9x"));
    assert_true(matches(g, "A\xe6\x97\xa5\t\"\xc3\xa9\xf0\x9f\x98\x80"));
    assert_false(matches(g, "aa\t\"\xc3\xa9x"));   /* [^a] refuses a */
    assert_false(matches(g, "a\n\t\"\xc3\xa9x"));  /* and newline */
    assert_false(matches(g, "d!\t\"\xc3\xa9x"));
    grammar_free(g);
}

static void test_gbnf_only_valid_utf8(void **state) {
    (void)state;
    grammar *g = gbnf("root ::= [^x]\n");
    assert_true(matches(g, "\xc3\xa9"));
    assert_true(matches(g, "\xe0\xa0\x80"));      /* U+0800 */
    assert_false(matches(g, "\xc0\x80"));         /* overlong */
    assert_false(matches(g, "\xe0\x80\x80"));     /* overlong */
    assert_false(matches(g, "\xed\xa0\x80"));     /* a surrogate */
    assert_true(matches(g, "\xed\x9f\xbf"));      /* U+D7FF */
    assert_true(matches(g, "\xf4\x8f\xbf\xbf"));  /* U+10FFFF */
    assert_false(matches(g, "\xf4\x90\x80\x80")); /* past U+10FFFF */
    assert_false(matches(g, "\xc3"));             /* cut short: not the end */
    grammar_free(g);
}

static void test_gbnf_errors_name_line_and_column(void **state) {
    (void)state;
    assert_contains(gbnf_error("root ::= \"a\"\nb ::= [a-"), "line 2 column 7");
    assert_contains(gbnf_error("root ::= \"abc"), "unterminated string");
    assert_contains(gbnf_error("root ::= (\"a\""), "line 1 column 10");
    assert_contains(gbnf_error("root ::= item"), "undefined rule 'item'");
    assert_contains(gbnf_error("root ::= root \"a\" | \"a\""), "left-recursive");
    assert_contains(gbnf_error("root ::= x \"a\"\nx ::= \"\" | root"), "left-recursive");
    assert_contains(gbnf_error("item ::= \"a\""), "no rule named 'root'");
    assert_contains(gbnf_error("root ::= \"a\"\nroot ::= \"b\""), "defined twice");
    assert_contains(gbnf_error("root ::= \"\\q\""), "unknown escape");
    assert_contains(gbnf_error("root ::= [z-a]"), "out of order");
    assert_contains(gbnf_error("root ::= \"a\"{3,1}"), "n < m");
    assert_contains(gbnf_error("root = \"a\""), "expected '::='");
}

static void test_gbnf_too_large_is_refused(void **state) {
    (void)state;
    char *deep = malloc(100020);
    strcpy(deep, "root ::= ");
    memset(deep + 9, '(', 100000);
    deep[100009] = 0;
    assert_contains(gbnf_error(deep), "nested too deeply");
    free(deep);
    char *text = malloc(200000);
    strcpy(text, "root ::=");
    for (int i = 0; i < 1000; i++) snprintf(text + strlen(text), 100, " \"%d\"{3000}", i); /* 3M elements */
    assert_contains(gbnf_error(text), "too large");
    free(text);
}

/* ---- regex ---- */

static void test_regex_subset(void **state) {
    (void)state;
    grammar *g = grammar_from_regex("^(\\d{3}-)?\\w+\\s[A-Fa-f]{2,}|x.y$");
    assert_non_null(g);
    assert_true(matches(g, "123-ab_9 fF"));
    assert_true(matches(g, "z\tabc"));
    assert_true(matches(g, "x\xc3\xa9y"));
    assert_false(matches(g, "x\ny"));
    assert_false(matches(g, "12-ab ff"));
    assert_false(matches(g, "ab f"));
    grammar_free(g);
    g = grammar_from_regex("[^\\d]+?(?:ab|cd)*\\.");
    assert_non_null(g);
    assert_true(matches(g, "xyabcd."));
    assert_false(matches(g, "1ab."));
    grammar_free(g);
    /* \S \W \D inside a class: the complements, non-ASCII included; joined with other members. */
    g = grammar_from_regex("[\\S]+ [\\W\\d]+ [\\Da]");
    assert_non_null(g);
    assert_true(matches(g, "a\xc3\xa9! -1\xe6\x97\xa5 x"));
    assert_true(matches(g, "x 5 a"));
    assert_false(matches(g, "a\tb - x"));
    assert_false(matches(g, "a b x"));
    assert_false(matches(g, "a - 7"));
    grammar_free(g);
    /* \p{Cc} (the C0 and C1 controls) and \P{Cc}, alone and inside classes (CircleCI's orb
     * pattern). */
    g = grammar_from_regex("[^\\s\\p{Cc}]+\\p{Cc}\\P{Cc}");
    assert_non_null(g);
    assert_true(matches(g, "ab\xc3\xa9\x01z"));
    assert_true(matches(g, "a\x7f\xc2\xa0")); /* U+00A0 is no control */
    assert_false(matches(g, "a b\x01z"));
    assert_false(matches(g, "a\xc2\x85\x01z")); /* U+0085 is a C1 control */
    assert_false(matches(g, "ab\x01\x02"));
    grammar_free(g);
}

static void test_regex_errors_name_the_position(void **state) {
    (void)state;
    assert_contains(regex_error("ab(c"), "unclosed '(' at position 2");
    assert_contains(regex_error("(a)\\1"), "backreferences are not supported at position 3");
    assert_contains(regex_error("a(?=b)"), "lookaround");
    assert_contains(regex_error("*a"), "nothing to repeat at position 0");
    assert_contains(regex_error("a{3,1}"), "position 1");
    assert_contains(regex_error("[b-a]"), "out of order");
    assert_contains(regex_error("ab)"), "unbalanced ')' at position 2");
    assert_contains(regex_error("a\\bc"), "word boundaries");
    assert_contains(regex_error("\\p{L}"),
                    "unsupported Unicode property (only \\p{Cc}) at position 0");
}

/* ---- JSON Schema ---- */

static void test_schema_object_required_and_optional_subsets(void **state) {
    (void)state;
    grammar *g = schema("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": "
                        "{\"type\": \"string\"}, \"c\": {\"type\": \"boolean\"}}, \"required\": [\"b\"]}", false);
    const char *parts[] = {"\"a\": 1", "\"b\": \"x\"", "\"c\": true"};
    for (int mask = 0; mask < 8; mask++) {
        char doc[128] = "{";
        for (int i = 0; i < 3; i++)
            if (mask & (1 << i)) {
                if (strlen(doc) > 1) strcat(doc, ", ");
                strcat(doc, parts[i]);
            }
        strcat(doc, "}");
        assert_int_equal(matches(g, doc), (mask & 2) != 0);
    }
    assert_false(matches(g, "{\"b\": \"x\", \"a\": 1}")); /* listed order */
    assert_false(matches(g, "{\"b\": \"x\", \"d\": 1}")); /* no additional properties */
    assert_false(matches(g, "{\"b\":\"x\"}"));            /* the compact layout has spaces */
    grammar_free(g);
    g = schema("{\"type\": \"object\", \"properties\": {\"b\": {\"type\": \"string\"}}, "
               "\"required\": [\"b\"], "
               "\"additionalProperties\": {\"type\": \"integer\"}}",
               true);
    assert_true(matches(g, "{ \"b\" :\"x\",\n\t\"zz\": -5 ,\"y\":0}"));
    assert_false(matches(g, "{\"b\": \"x\", \"zz\": \"s\"}"));
    grammar_free(g);
}

/* An integer schema accepts exactly the values its bounds allow. */
static void check_integer_range(const char *bounds, long lo, long hi) {
    char js[256];
    snprintf(js, sizeof js, "{\"type\": \"integer\"%s}", bounds);
    grammar *g = schema(js, false);
    for (long v = -1200; v <= 1200; v++) {
        char num[32];
        snprintf(num, sizeof num, "%ld", v);
        if (matches(g, num) != (v >= lo && v <= hi)) fail_msg("%s: %ld", js, v);
    }
    assert_false(matches(g, "01"));
    assert_false(matches(g, "-0"));
    grammar_free(g);
}

static void test_schema_integer_bounds_exact(void **state) {
    (void)state;
    check_integer_range(", \"minimum\": 0, \"maximum\": 120", 0, 120);
    check_integer_range(", \"minimum\": -15, \"maximum\": 7", -15, 7);
    check_integer_range(", \"minimum\": 37, \"maximum\": 1005", 37, 1005);
    check_integer_range(", \"minimum\": -999, \"maximum\": -10", -999, -10);
    check_integer_range(", \"exclusiveMinimum\": 9, \"exclusiveMaximum\": 100", 10, 99);
    check_integer_range(", \"minimum\": 100", 100, 1L << 40);
    check_integer_range(", \"minimum\": -42", -42, 1L << 40);
    check_integer_range(", \"maximum\": 42", -(1L << 40), 42);
    check_integer_range(", \"maximum\": -7", -(1L << 40), -7);
    /* draft 4: a boolean exclusiveMinimum/exclusiveMaximum makes minimum/maximum exclusive */
    check_integer_range(", \"minimum\": 3, \"exclusiveMinimum\": true, \"maximum\": 9, \"exclusiveMaximum\": true", 4, 8);
}

static void test_schema_strings_formats_enums_refs(void **state) {
    (void)state;
    grammar *g =
        schema("{\"type\": \"array\", \"items\": {\"anyOf\": [{\"type\": \"string\", \"format\": "
               "\"date\"}, "
               "{\"enum\": [\"x\", 3, null]}, {\"const\": {\"k\": [1, 2]}}]}, \"minItems\": 1, "
               "\"maxItems\": 3}",
               false);
    assert_true(matches(g, "[\"2024-02-29\"]"));
    assert_true(matches(g, "[\"x\", 3, null]"));
    assert_true(matches(g, "[{\"k\": [1, 2]}]"));
    assert_false(matches(g, "[]"));
    assert_false(matches(g, "[3, 3, 3, 3]"));
    assert_false(matches(g, "[\"2024-13-01\"]"));
    grammar_free(g);
    g = schema("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}", false);
    assert_true(matches(g, "\"ab\""));
    assert_true(matches(g, "\"a\\n\\u00e9\""));
    assert_false(matches(g, "\"a\""));
    assert_false(matches(g, "\"abcd\""));
    assert_false(matches(g, "\"a\x01\""));
    grammar_free(g);
    g = schema("{\"type\": \"string\", \"pattern\": \"ab+\"}", false); /* searched, as JSON Schema says */
    assert_true(matches(g, "\"xxabbby\""));
    assert_false(matches(g, "\"xxay\""));
    grammar_free(g);
    g = schema("{\"type\": \"string\", \"pattern\": \"^a.c$\"}", false);
    assert_true(matches(g, "\"abc\""));
    assert_true(matches(g, "\"a\\\"c\""));   /* '.' may be a quote, escaped in JSON */
    assert_false(matches(g, "\"a\"c\""));
    assert_false(matches(g, "\"xabc\""));
    grammar_free(g);
    g = schema("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"kids\": "
               "{\"type\": \"array\", "
               "\"items\": {\"$ref\": \"#/$defs/node\"}}}}}, \"$ref\": \"#/$defs/node\"}",
               false);
    assert_true(matches(g, "{\"kids\": [{}, {\"kids\": [{\"kids\": []}]}]}"));
    assert_false(matches(g, "{\"kids\": [1]}"));
    grammar_free(g);
    g = schema("{\"required\": [\"b\", \"a\"], \"properties\": {\"a\": {\"type\": \"integer\"}}}", false);
    assert_true(matches(g, "{\"a\": 1, \"b\": [true]}")); /* b: any value, after the described ones */
    assert_false(matches(g, "{\"a\": 1}"));
    grammar_free(g);
    g = schema("{\"$ref\": \"#/$defs/s\", \"type\": \"string\", \"$defs\": {\"s\": {\"type\": "
               "\"string\"}}}",
               false); /* a type beside $ref that the target says too */
    assert_true(matches(g, "\"x\""));
    grammar_free(g);
    /* Keywords of no vocabulary (a vendor's) are annotations, beside $ref too. */
    g = schema("{\"type\": \"object\", \"tsType\": \"C\", \"properties\": {\"a\": {\"$ref\": "
               "\"#/$defs/s\", "
               "\"defaultSnippets\": [], \"x-y\": 1}}, \"required\": [\"a\"], \"$defs\": {\"s\": "
               "{\"type\": \"string\", "
               "\"fileMatch\": [\"*\"]}}}",
               false);
    assert_true(matches(g, "{\"a\": \"x\"}"));
    assert_false(matches(g, "{\"a\": 1}"));
    grammar_free(g);
    g = schema("{\"type\": [\"number\", \"null\"], \"minimum\": 0}", false);
    assert_true(matches(g, "1.5e-3"));
    assert_true(matches(g, "null"));
    assert_false(matches(g, "-1"));
    grammar_free(g);
}

static void test_schema_errors_name_keyword_and_place(void **state) {
    (void)state;
    assert_contains(schema_error("{\"$ref\": \"#/$defs/x\"}"), "cannot resolve $ref '#/$defs/x'");
    /* A reference to another document is not fetched: any value there (not enforced). */
    {
        json_t *j = json_loads("{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": "
                               "\"http://example.com/s.json\"}}, "
                               "\"required\": [\"a\"]}",
                               0, NULL);
        grammar *g = grammar_from_json_schema(j, NULL);
        json_decref(j);
        assert_non_null(g);
        assert_true(matches(g, "{\"a\": [1, {\"b\": null}]}"));
        assert_false(matches(g, "{}"));
        grammar_free(g);
    }
    assert_contains(schema_error("{\"type\": \"number\", \"maximum\": 3.5}"),
                    "'maximum' on a non-integer");
    assert_contains(schema_error("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}"),
                    "no integer fits");
    assert_contains(schema_error("{\"type\": \"thing\"}"), "unknown type 'thing'");
    assert_contains(schema_error("{\"type\": \"string\", \"pattern\": \"(a\"}"), "position");
    assert_contains(schema_error("false"), "matches nothing");
    /* Nesting deeper than the bound is refused, not followed until the stack runs out. */
    char *deep = malloc(40000);
    deep[0] = 0;
    for (int i = 0; i < 1000; i++) strcat(deep, "{\"items\": ");
    strcat(deep, "{}");
    for (int i = 0; i < 1000; i++) strcat(deep, "}");
    assert_contains(schema_error(deep), "nested too deeply");
    free(deep);
    /* A chain of 5000 references is compiled one body after another, without deep recursion. */
    char *chain = malloc(400000);
    strcpy(chain, "{\"$ref\": \"#/$defs/d0\", \"$defs\": {");
    for (int i = 0; i < 5000; i++)
        snprintf(chain + strlen(chain), 80, "%s\"d%d\": {\"$ref\": \"#/$defs/d%d\"}", i ? ", " : "", i, i + 1);
    strcat(chain, ", \"d5000\": {\"type\": \"integer\"}}}");
    grammar *g = schema(chain, false);
    assert_true(matches(g, "7"));
    assert_false(matches(g, "\"7\""));
    grammar_free(g);
    free(chain);
}

/* ---- recognizer state ---- */

static void test_state_copy_is_a_rollback_point(void **state) {
    (void)state;
    grammar *g = gbnf("root ::= \"{\" [a-z]* \"}\"\n");
    gstate st = {0}, saved = {0};
    gscratch w = {0};
    assert_int_equal(gstate_init(&st, g, &w), 0);
    assert_int_equal(gstate_advance_bytes(g, &st, (const unsigned char *)"{ab", 3, &w), 1);
    assert_int_equal(gstate_copy(&saved, &st), 0);
    assert_int_equal(gstate_advance_bytes(g, &st, (const unsigned char *)"c}", 2, &w), 1);
    assert_true(st.accept);
    assert_false(gstate_equal(&st, &saved));
    assert_int_equal(gstate_copy(&st, &saved), 0); /* roll back */
    assert_true(gstate_equal(&st, &saved));
    assert_false(st.accept);
    /* A refused byte leaves the state as it was. */
    assert_int_equal(gstate_advance_bytes(g, &st, (const unsigned char *)"x{", 2, &w), 0);
    assert_true(gstate_equal(&st, &saved));
    /* Repetition keeps the stack flat: after 1000 letters the state is the one after 2. */
    assert_int_equal(gstate_advance_bytes(g, &saved, (const unsigned char *)"q", 1, &w), 1);
    for (int i = 0; i < 1000; i++) assert_int_equal(gstate_advance_bytes(g, &st, (const unsigned char *)"q", 1, &w), 1);
    assert_true(gstate_equal(&st, &saved));
    gstate_free(&st);
    gstate_free(&saved);
    gscratch_free(&w);
    grammar_free(g);
}

/* Different parses that reach the same stack are one stack: x's two
 * alternatives both match "a" and return to the same place, so each byte
 * doubles the distinct stacks (the frame below is "b" or "c") while the
 * parses that reach them quadruple. 5 * 2^k stacks after k bytes: the
 * state stays under GRAMMAR_MAX_STACKS through 8 bytes only because the
 * duplicates are merged, and the index that finds them grows from 64 slots
 * on the way. */
static void test_ambiguous_parses_merge_into_distinct_stacks(void **state) {
    (void)state;
    grammar *g = gbnf("root ::= e\ne ::= x e \"b\" | x e \"c\" | \"\"\nx ::= \"a\" | [a]\n");
    gstate st = {0};
    gscratch w = {0}, fresh = {0};
    assert_int_equal(gstate_init(&st, g, &w), 0);
    for (int k = 1; k <= 8; k++) {
        assert_int_equal(gstate_advance_bytes(g, &st, (const unsigned char *)"a", 1, &w), 1);
        assert_int_equal(st.n_stacks, 5 << k);
        /* No stack twice. */
        size_t off_i = 0;
        for (int i = 0; i < st.n_stacks; i++) {
            size_t off_j = off_i + 1 + st.data[off_i];
            for (int j = i + 1; j < st.n_stacks; j++) {
                const bool same = st.data[off_i] == st.data[off_j] &&
                                  !memcmp(st.data + off_i, st.data + off_j, (1 + st.data[off_i]) * sizeof *st.data);
                assert_false(same);
                off_j += 1 + st.data[off_j];
            }
            off_i += 1 + st.data[off_i];
        }
    }
    /* The same state from a scratch that has not been used before. */
    gstate again = {0};
    assert_int_equal(gstate_init(&again, g, &fresh), 0);
    assert_int_equal(gstate_advance_bytes(g, &again, (const unsigned char *)"aaaaaaaa", 8, &fresh), 1);
    assert_true(gstate_equal(&again, &st));
    /* A ninth byte would need 2,560. */
    assert_int_equal(gstate_advance_bytes(g, &st, (const unsigned char *)"a", 1, &w), -1);
    assert_contains(err_get(), "too ambiguous");
    /* Endings still match after all that. */
    assert_true(matches(g, "aabc"));
    assert_false(matches(g, "aab"));
    gstate_free(&st);
    gstate_free(&again);
    gscratch_free(&w);
    gscratch_free(&fresh);
    grammar_free(g);
}

/* ---- token masks ---- */

static token_vocab *small_vocab(void) {
    static const char *toks[] = {"{", "}", "\"", "\"a", "a\"", "ab", "a", "b", ":", ": ", ", ", ",", " ", "1", "12",
                                 "-", "true", "tr", "ue", "null", "\"}", "\\", "\\n", "\xc3", "\xa9", "\xc3\xa9",
                                 "{\"", "\": ", "\"key\"", "key", "", ""};
    const int n = (int)(sizeof toks / sizeof *toks);
    int lens[64];
    bool eog[64] = {0};
    for (int i = 0; i < n; i++) lens[i] = (int)strlen(toks[i]);
    eog[n - 1] = true; /* the last empty token ends generation; the one before is a control token */
    return token_vocab_create(n, toks, lens, eog);
}

/* The mask a token-by-token check gives. */
static void brute_mask(const grammar *g, const token_vocab *v, const gstate *st, uint32_t *mask) {
    memset(mask, 0, (size_t)(v->n_vocab + 31) / 32 * 4);
    gscratch w = {0};
    for (int t = 0; t < v->n_vocab; t++) {
        int len;
        const char *p = token_vocab_bytes(v, t, &len);
        bool ok = v->is_eog[t] ? st->accept : false;
        if (len) {
            gstate c = {0};
            gstate_copy(&c, st);
            ok = gstate_advance_bytes(g, &c, (const unsigned char *)p, (size_t)len, &w) == 1;
            gstate_free(&c);
        }
        if (ok) mask[t / 32] |= 1u << (t % 32);
    }
    gscratch_free(&w);
}

static void test_masks_equal_token_by_token_check(void **state) {
    (void)state;
    token_vocab *v = small_vocab();
    json_t *s = json_loads("{\"type\": \"object\", \"properties\": {\"key\": {\"anyOf\": [{\"type\": \"string\"}, "
                           "{\"type\": \"integer\"}, {\"type\": \"null\"}]}, \"b\": {\"type\": \"boolean\"}}}",
                           0, NULL);
    constraint *c = constraint_compile(CONSTRAINT_JSON_SCHEMA, s, NULL);
    assert_non_null(c);
    const grammar *g = constraint_grammar(c);
    srand(3);
    for (int walk = 0; walk < 50; walk++) {
        constraint_state cs;
        assert_int_equal(constraint_state_init(&cs, c), 0);
        for (int step = 0; step < 30; step++) {
            uint32_t want[2] = {0}, got[2] = {0}, cached[2] = {0};
            brute_mask(g, v, &cs.st, want);
            assert_int_equal(token_mask_walk(g, v, &cs.st, got), 0);
            assert_int_equal(constraint_mask(&cs, v, cached), 0);
            assert_memory_equal(want, got, sizeof want);
            assert_memory_equal(want, cached, sizeof want);
            int allowed[64], n = 0;
            for (int t = 0; t < v->n_vocab; t++)
                if (want[t / 32] >> (t % 32) & 1) allowed[n++] = t;
            if (n == 0) break;
            const int t = allowed[rand() % n];
            assert_int_equal(constraint_accept(&cs, v, t), 1);
            if (v->is_eog[t]) break;
        }
        constraint_state_free(&cs);
    }
    /* A token outside the mask is refused and leaves the state alone. */
    constraint_state cs;
    assert_int_equal(constraint_state_init(&cs, c), 0);
    assert_int_equal(constraint_accept(&cs, v, 1), 0); /* "}" first */
    assert_int_equal(constraint_accept(&cs, v, v->n_vocab - 1), 0); /* the end, too early */
    assert_int_equal(constraint_accept(&cs, v, 0), 1);
    constraint_state_free(&cs);
    constraint_release(c);
    json_decref(s);
    token_vocab_free(v);
}

static void test_compile_cache_returns_the_same_constraint(void **state) {
    (void)state;
    json_t *a = json_loads("{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}", 0, NULL);
    json_t *b = json_loads("{\"type\": \"object\",   \"properties\": {\"x\": {\"type\": \"integer\"}}}", 0, NULL);
    json_t *other = json_loads("{\"type\": \"object\", \"properties\": {\"y\": {\"type\": \"integer\"}}}", 0, NULL);
    uint64_t hits0, misses0, hits, misses;
    constraint_cache_stats(&hits0, &misses0);
    constraint *ca = constraint_compile(CONSTRAINT_JSON_SCHEMA, a, NULL);
    constraint_cache_stats(&hits, &misses);
    assert_true(hits == hits0 && misses == misses0 + 1); /* first sight: compiled */
    constraint *cb = constraint_from_json_schema(b);
    constraint_cache_stats(&hits, &misses);
    assert_true(hits == hits0 + 1 && misses == misses0 + 1); /* the same schema spelled apart: a hit */
    constraint *co = constraint_compile(CONSTRAINT_JSON_SCHEMA, other, NULL);
    const json_schema_options ws = {.any_whitespace = true};
    constraint *cw = constraint_compile(CONSTRAINT_JSON_SCHEMA, a, &ws);
    constraint_cache_stats(&hits, &misses);
    assert_true(hits == hits0 + 1 && misses == misses0 + 3); /* another schema, other options: misses */
    assert_ptr_equal(ca, cb);
    assert_ptr_not_equal(ca, co);
    assert_ptr_not_equal(ca, cw);
    constraint_release(ca);
    constraint_release(cb);
    constraint_release(co);
    constraint_release(cw);
    json_decref(a);
    json_decref(b);
    json_decref(other);
}

static void test_choice_and_json_object(void **state) {
    (void)state;
    json_t *list = json_loads("[\"red\", \"green\", \"gr\"]", 0, NULL);
    constraint *c = constraint_compile(CONSTRAINT_CHOICE, list, NULL);
    assert_non_null(c);
    assert_true(matches(constraint_grammar(c), "gr"));
    assert_true(matches(constraint_grammar(c), "green"));
    assert_false(matches(constraint_grammar(c), "gre"));
    constraint_release(c);
    json_decref(list);
    c = constraint_compile(CONSTRAINT_JSON_OBJECT, NULL, NULL);
    assert_true(matches(constraint_grammar(c), "{\"a\": [1, {\"b\": null}, \"x\"], \"c\": -0.5e+3}"));
    assert_true(matches(constraint_grammar(c), "{}"));
    assert_false(matches(constraint_grammar(c), "[1]"));
    assert_false(matches(constraint_grammar(c), "{\"a\": 01}"));
    constraint_release(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gbnf_literals_alternation_repetition),
        cmocka_unit_test(test_gbnf_classes_and_escapes),
        cmocka_unit_test(test_gbnf_only_valid_utf8),
        cmocka_unit_test(test_gbnf_errors_name_line_and_column),
        cmocka_unit_test(test_gbnf_too_large_is_refused),
        cmocka_unit_test(test_regex_subset),
        cmocka_unit_test(test_regex_errors_name_the_position),
        cmocka_unit_test(test_schema_object_required_and_optional_subsets),
        cmocka_unit_test(test_schema_integer_bounds_exact),
        cmocka_unit_test(test_schema_strings_formats_enums_refs),
        cmocka_unit_test(test_schema_errors_name_keyword_and_place),
        cmocka_unit_test(test_state_copy_is_a_rollback_point),
        cmocka_unit_test(test_ambiguous_parses_merge_into_distinct_stacks),
        cmocka_unit_test(test_masks_equal_token_by_token_check),
        cmocka_unit_test(test_compile_cache_returns_the_same_constraint),
        cmocka_unit_test(test_choice_and_json_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
