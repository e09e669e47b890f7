/* Tool-call markup parsers (src/chat/tool_parse.c), one format at a time:
 * whole replies give the calls (name, arguments as the model wrote them)
 * and the content around them; malformed or unfinished markup gives plain
 * content; and every prefix of a reply, parsed as an unfinished stream,
 * reports a prefix of what the whole reply gives (content, names, argument
 * text), never markup as content, so a stream that sends the differences
 * reassembles exactly the finished reply. Detection from real templates'
 * markers and the constraint schemas are checked too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chat/tool_parse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char content[512];
    int n_calls;
    char names[8][64];
    char args[8][256];
} flat;

static void span_cat(char *dst, size_t cap, const char *text, tool_span s) {
    const size_t have = strlen(dst);
    assert_true(have + s.len < cap);
    memcpy(dst + have, text + s.off, s.len);
    dst[have + s.len] = '\0';
}

/* What a parse reports, flattened: content joined, names, argument text. */
static flat flatten(tool_format f, const char *text, size_t len, bool final) {
    tool_parse_result r;
    tool_parse(f, text, len, final, &r);
    flat out = {0};
    for (int i = 0; i < r.n_content; i++) span_cat(out.content, sizeof out.content, text, r.content[i]);
    out.n_calls = r.n_calls;
    for (int i = 0; i < r.n_calls && i < 8; i++) {
        const tool_parsed_call *c = &r.calls[i];
        if (c->name_done) {
            char *name = tool_parse_name(text, c);
            assert_non_null(name);
            snprintf(out.names[i], sizeof out.names[i], "%s", name);
            free(name);
        }
        if (c->args_missing) snprintf(out.args[i], sizeof out.args[i], "{}");
        else span_cat(out.args[i], sizeof out.args[i], text, c->args);
    }
    return out;
}

static bool is_prefix(const char *p, const char *s) { return !strncmp(p, s, strlen(p)); }

/* Every prefix, as a stream, reports a prefix of the finished parse. */
static void check_stream(tool_format f, const char *text, const flat *whole) {
    const size_t n = strlen(text);
    for (size_t k = 0; k <= n; k++) {
        const flat part = flatten(f, text, k, false);
        if (!is_prefix(part.content, whole->content))
            fail_msg("prefix %zu of %s: content '%s' is not a prefix of '%s'", k, text, part.content, whole->content);
        assert_true(part.n_calls <= whole->n_calls);
        for (int i = 0; i < part.n_calls; i++) {
            if (part.names[i][0]) assert_string_equal(part.names[i], whole->names[i]);
            if (!is_prefix(part.args[i], whole->args[i]))
                fail_msg("prefix %zu of %s: args '%s' not a prefix of '%s'", k, text, part.args[i], whole->args[i]);
        }
    }
}

static void expect(tool_format f, const char *text, const char *content, int n_calls, const char *const *names,
                   const char *const *args) {
    tool_parse_result r;
    tool_parse(f, text, strlen(text), true, &r);
    const flat whole = flatten(f, text, strlen(text), true);
    if (n_calls == 0) {
        assert_true(tool_parse_is_plain(&r));
    } else {
        assert_false(tool_parse_is_plain(&r));
        assert_string_equal(whole.content, content);
        assert_int_equal(whole.n_calls, n_calls);
        for (int i = 0; i < n_calls; i++) {
            assert_string_equal(whole.names[i], names[i]);
            assert_string_equal(whole.args[i], args[i]);
        }
    }
    if (n_calls) check_stream(f, text, &whole);
}

static void test_hermes(void **state) {
    (void)state;
    const char *n1[] = {"get_weather"}, *a1[] = {"{\"city\": \"Paris\", \"days\": [1, 2]}"};
    expect(TOOL_FORMAT_HERMES,
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n"
           "</tool_call>",
           "", 1, n1, a1);
    /* Text before, two calls, arguments before the name, escapes. */
    const char *n2[] = {"a\"b", "lookup"}, *a2[] = {"{\"q\": \"x}y\\\"\"}", "{}"};
    expect(TOOL_FORMAT_HERMES,
           "Let me check.\n<tool_call>\n{\"arguments\": {\"q\": \"x}y\\\"\"}, \"name\": \"a\\\"b\"}\n</tool_call>\n"
           "<tool_call>{\"name\": \"lookup\"}</tool_call>\nDone.",
           "Let me check.Done.", 2, n2, a2);
}

static void test_hermes_malformed(void **state) {
    (void)state;
    /* Bad JSON, a missing close tag, a name that is a number, a cut-off call:
     * all plain content. */
    expect(TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1,}}\n</tool_call>", "", 0,
           NULL, NULL);
    expect(TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing", "", 0, NULL, NULL);
    expect(TOOL_FORMAT_HERMES, "<tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>", "", 0, NULL, NULL);
    expect(TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ", "", 0, NULL, NULL);
    expect(TOOL_FORMAT_HERMES, "plain text with < and <tool but no call", "", 0, NULL, NULL);
    /* A stream that went wrong keeps the text from the bad markup on. */
    tool_parse_result r;
    const char *t = "Hi <tool_call>{oops}";
    tool_parse(TOOL_FORMAT_HERMES, t, strlen(t), false, &r);
    assert_int_equal(r.malformed_at, 3);
    assert_int_equal(r.n_calls, 0);
    /* ... with the space before it, which a stream had held back. */
    t = "I use <tool_call> tags";
    assert_string_equal(flatten(TOOL_FORMAT_HERMES, t, 6, false).content, "I use");
    assert_string_equal(flatten(TOOL_FORMAT_HERMES, t, strlen(t), false).content, "I use <tool_call> tags");
}

static void test_hermes_holds_partial_marker(void **state) {
    (void)state;
    const char *t = "Sure <tool_c";
    flat f = flatten(TOOL_FORMAT_HERMES, t, strlen(t), false);
    assert_string_equal(f.content, "Sure"); /* the space too: a call may follow */
    f = flatten(TOOL_FORMAT_HERMES, t, strlen(t), true);
    assert_string_equal(f.content, "Sure <tool_c");
    /* Arguments stream as they come, the outer brace never. */
    t = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2";
    f = flatten(TOOL_FORMAT_HERMES, t, strlen(t), false);
    assert_int_equal(f.n_calls, 1);
    assert_string_equal(f.names[0], "f");
    assert_string_equal(f.args[0], "{\"a\": [1, 2");
    assert_string_equal(f.content, "");
}

static void test_llama3_json(void **state) {
    (void)state;
    const char *n1[] = {"get_weather"}, *a1[] = {"{\"city\": \"Paris\"}"};
    expect(TOOL_FORMAT_LLAMA3_JSON, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", 1, n1,
           a1);
    expect(TOOL_FORMAT_LLAMA3_JSON, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
           "", 1, n1, a1);
    const char *n2[] = {"f", "g"}, *a2[] = {"{}", "{\"x\": 1}"};
    expect(TOOL_FORMAT_LLAMA3_JSON,
           " {\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"arguments\": {\"x\": 1}}", "", 2, n2, a2);
    /* A reply that is text, or JSON that is not a call. */
    expect(TOOL_FORMAT_LLAMA3_JSON, "The weather is {sunny}.", "", 0, NULL, NULL);
    expect(TOOL_FORMAT_LLAMA3_JSON, "{\"city\": \"Paris\"}", "", 0, NULL, NULL);
    flat f = flatten(TOOL_FORMAT_LLAMA3_JSON, "Hello {", 7, true);
    assert_string_equal(f.content, "Hello {");
}

static void test_mistral(void **state) {
    (void)state;
    const char *n1[] = {"get_weather", "get_time"}, *a1[] = {"{\"city\": \"Paris\"}", "{\"tz\": \"CET\"}"};
    expect(TOOL_FORMAT_MISTRAL,
           "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}, "
           "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]",
           "", 2, n1, a1);
    expect(TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] {\"name\": \"f\"}", "", 0, NULL, NULL);
    expect(TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}", "", 0, NULL, NULL);
}

static void test_mistral_args(void **state) {
    (void)state;
    const char *n1[] = {"get_weather", "get_time"}, *a1[] = {"{\"city\": \"Paris\"}", "{}"};
    expect(TOOL_FORMAT_MISTRAL_ARGS,
           "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}", "Checking.", 2,
           n1, a1);
    expect(TOOL_FORMAT_MISTRAL_ARGS, "[TOOL_CALLS]get weather[ARGS]{}", "", 0, NULL, NULL);
}

static void test_functionary(void **state) {
    (void)state;
    const char *n1[] = {"get_weather"}, *a1[] = {"{\"city\": \"Paris\"}"};
    expect(TOOL_FORMAT_FUNCTIONARY, "<function=get_weather>{\"city\": \"Paris\"}</function>", "", 1, n1, a1);
    expect(TOOL_FORMAT_FUNCTIONARY, "<function=get_weather>{\"city\": \"Paris\"}", "", 0, NULL, NULL);
}

static void test_harmony(void **state) {
    (void)state;
    const char *n1[] = {"get_weather"}, *a1[] = {"{\"city\": \"Paris\"}"};
    /* gpt-oss: the analysis message (reasoning.h reads it) is skipped; the call ends at <|call|>, an
     * end-of-generation token the text usually lacks. */
    expect(TOOL_FORMAT_HARMONY,
           "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
           "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
           "", 1, n1, a1);
    expect(TOOL_FORMAT_HARMONY,
           "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
           "", 1, n1, a1);
    const char *n2[] = {"lookup"}, *a2[] = {"{}"}; /* the recipient before the channel */
    expect(TOOL_FORMAT_HARMONY, "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{}", "", 1,
           n2, a2);
    /* An answer on the final channel is content; a call cut off, or not JSON, is plain. */
    const char *answer = "<|channel|>analysis<|message|>easy<|end|><|start|>assistant<|channel|>final<|message|>Sunny.";
    expect(TOOL_FORMAT_HARMONY, answer, "", 0, NULL, NULL);
    assert_string_equal(flatten(TOOL_FORMAT_HARMONY, answer, strlen(answer), true).content, "Sunny.");
    expect(TOOL_FORMAT_HARMONY, "<|channel|>commentary to=functions.f<|message|>{\"a\": ", "", 0, NULL, NULL);
    expect(TOOL_FORMAT_HARMONY, "<|channel|>commentary to=functions.f<|message|>not json", "", 0, NULL, NULL);
    /* Streamed, the answer arrives as content and a marker cut in two waits. */
    const flat whole = flatten(TOOL_FORMAT_HARMONY, answer, strlen(answer), true);
    check_stream(TOOL_FORMAT_HARMONY, answer, &whole);
}

static void test_detect(void **state) {
    (void)state;
    assert_int_equal(tool_format_detect("{{ '<tool_call>\\n' }}{% if tools %}{% endif %}"), TOOL_FORMAT_HERMES);
    assert_int_equal(tool_format_detect("{% for tool in tools %}[TOOL_CALLS] [{% endfor %}"), TOOL_FORMAT_MISTRAL);
    assert_int_equal(tool_format_detect("{{ '[TOOL_CALLS]' + name + '[ARGS]' }}{{ tools }}"),
                     TOOL_FORMAT_MISTRAL_ARGS);
    assert_int_equal(tool_format_detect("tools <function=x> <|python_tag|>"), TOOL_FORMAT_FUNCTIONARY);
    assert_int_equal(
        tool_format_detect("{{ tools }} Respond in the format {\"name\": function name, \"parameters\": dictionary "
                           "of argument name and its value}."),
        TOOL_FORMAT_LLAMA3_JSON);
    /* XML-style arguments (Qwen3-Coder), and templates without tools. */
    assert_int_equal(tool_format_detect("{{ tools }}<tool_call>\n<function=f>\n<parameter=x>"), TOOL_FORMAT_NONE);
    assert_int_equal(tool_format_detect("<start_of_turn>{{ message.content }}"), TOOL_FORMAT_NONE);
    assert_int_equal(tool_format_detect("{{- \"<|start|>assistant to=\" }}{{- \"functions.\" + tool_call.name }}"
                                        "{%- if tools %}<|channel|>{% endif %} to=functions."),
                     TOOL_FORMAT_HARMONY);
    assert_int_equal(tool_format_from_name("hermes"), TOOL_FORMAT_HERMES);
    assert_int_equal(tool_format_from_name("nope"), -1);
}

static void test_call_id(void **state) {
    (void)state;
    unsigned char rnd[16];
    for (int i = 0; i < 16; i++) rnd[i] = (unsigned char)(i * 37 + 11);
    char id[40];
    tool_format_call_id(TOOL_FORMAT_MISTRAL, rnd, id, sizeof id);
    assert_int_equal(strlen(id), 9); /* Mistral's templates refuse other lengths */
    for (int i = 0; i < 9; i++) assert_true(isalnum((unsigned char)id[i]));
    tool_format_call_id(TOOL_FORMAT_HERMES, rnd, id, sizeof id);
    assert_true(!strncmp(id, "call_", 5) && strlen(id) == 29);
}

static void test_call_schema(void **state) {
    (void)state;
    json_error_t err;
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"a\", \"parameters\": {\"type\": "
                               "\"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}}},"
                               " {\"type\": \"function\", \"function\": {\"name\": \"b\"}}]",
                               0, &err);
    assert_non_null(tools);
    tool_call_constraint c;
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_HERMES, tools, NULL, &c), 0);
    assert_string_equal(c.prefix, "<tool_call>\n");
    assert_string_equal(c.suffix, "\n</tool_call>");
    const json_t *alts = json_object_get(c.schema, "anyOf");
    assert_int_equal(json_array_size(alts), 2);
    const json_t *a = json_array_get(alts, 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(a, "properties"), "name"),
                                                          "const")),
                        "a");
    const json_t *args = json_object_get(json_object_get(a, "properties"), "arguments");
    const json_t *x = json_object_get(json_object_get(args, "properties"), "x");
    assert_string_equal(json_string_value(json_object_get(x, "type")), "integer");
    tool_call_constraint_free(&c);
    /* A named choice: that tool only, no anyOf. */
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_LLAMA3_JSON, tools, "b", &c), 0);
    assert_null(json_object_get(c.schema, "anyOf"));
    assert_non_null(json_object_get(json_object_get(c.schema, "properties"), "parameters"));
    tool_call_constraint_free(&c);
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_FUNCTIONARY, tools, "a", &c), 0);
    assert_string_equal(c.prefix, "<function=a>");
    tool_call_constraint_free(&c);
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_FUNCTIONARY, tools, NULL, &c), -1);
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_HARMONY, tools, "a", &c), 0);
    assert_string_equal(c.prefix, "<|channel|>commentary to=functions.a <|constrain|>json<|message|>");
    tool_call_constraint_free(&c);
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_HARMONY, tools, NULL, &c), -1);
    assert_int_equal(tool_format_call_schema(TOOL_FORMAT_NONE, tools, NULL, &c), -1);
    json_decref(tools);
}

static void check_call(const char *text, const tool_parsed_call *c, const char *name, const char *args) {
    char *got = tool_parse_name(text, c);
    assert_string_equal(got, name);
    free(got);
    char raw[256] = "";
    span_cat(raw, sizeof raw, text, c->args);
    assert_string_equal(raw, args);
}

/* Calls written as bare JSON: replies that must become calls (names and
 * argument text exact), replies that must stay text, and every prefix of a
 * call still MAYBE while a prefix of text already decided NO stays NO. */
static void test_bare_calls(void **state) {
    (void)state;
    const char *const tools[] = {"get_weather", "get_time"};
    static const struct {
        const char *text;
        int n_calls; /* 0: not a call */
        const char *name0, *args0;
    } cases[] = {
        {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"F\"}}", 1, "get_weather",
         "{\"city\": \"Paris\", \"unit\": \"F\"}"},
        {"  \n{\"name\":\"get_time\",\"parameters\":{}}\n", 1, "get_time", "{}"},
        {"```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```", 1, "get_weather",
         "{\"city\": \"Oslo\"}"},
        {"```\n[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": "
         "\"Rome\"}}]\n```\n", 2, "get_time", "{}"},
        {"[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]", 1, "get_time", "{\"zone\": \"UTC\"}"},
        /* Must stay text. */
        {"{\"name\": \"Bob\", \"arguments\": {}}", 0, NULL, NULL},                   /* not an offered tool */
        {"{\"name\": \"get_time\"}", 0, NULL, NULL},                                   /* no arguments object */
        {"{\"name\": \"get_time\", \"arguments\": \"{}\"}", 0, NULL, NULL},           /* arguments not an object */
        {"{\"name\": \"get_time\", \"arguments\": {}, \"age\": 3}", 0, NULL, NULL},   /* another key */
        {"Sure: {\"name\": \"get_time\", \"arguments\": {}}", 0, NULL, NULL},          /* text before */
        {"{\"name\": \"get_time\", \"arguments\": {}} and more", 0, NULL, NULL},       /* text after */
        {"Here:\n```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```", 0, NULL, NULL}, /* prose, then fence */
        {"{\"city\": \"Paris\"}", 0, NULL, NULL},                                      /* an ordinary JSON answer */
        {"[1, 2, 3]", 0, NULL, NULL},
        {"{\"name\": \"get_time\", \"arguments\": {}", 0, NULL, NULL}, /* unfinished */
        {"```json\n{\"name\": \"get_time\", \"arguments\": {}}\n", 0, NULL, NULL}, /* no closing fence */
        {"The weather is fine.", 0, NULL, NULL},
        {"", 0, NULL, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *t = cases[k].text;
        const size_t n = strlen(t);
        tool_parse_result r;
        const tool_bare_rc rc = tool_parse_bare(t, n, true, tools, 2, &r);
        if (!cases[k].n_calls) {
            if (rc != TOOL_BARE_NO) fail_msg("case %zu (%s) became a call", k, t);
        } else {
            if (rc != TOOL_BARE_YES) fail_msg("case %zu (%s) is not a call", k, t);
            assert_int_equal(r.n_calls, cases[k].n_calls);
            assert_int_equal(r.n_content, 0);
            check_call(t, &r.calls[0], cases[k].name0, cases[k].args0);
        }
        /* Prefixes: a call is MAYBE all the way; text, once NO, stays NO. */
        bool decided_no = false;
        for (size_t i = 0; i < n; i++) {
            const tool_bare_rc p = tool_parse_bare(t, i, false, tools, 2, &r);
            assert_int_not_equal(p, TOOL_BARE_YES);
            if (cases[k].n_calls) assert_int_equal(p, TOOL_BARE_MAYBE);
            if (decided_no && p != TOOL_BARE_NO) fail_msg("case %zu: prefix %zu undecided after NO", k, i);
            decided_no = p == TOOL_BARE_NO;
        }
    }
    /* No tools offered: nothing is a call. */
    tool_parse_result r;
    const char *call = cases[0].text;
    assert_int_equal(tool_parse_bare(call, strlen(call), true, NULL, 0, &r), TOOL_BARE_NO);
}

/* The generic format: calls, decoded content (escapes, surrogate pairs, a
 * lone surrogate), cut-off replies; every prefix of a reply, as a stream,
 * reports a prefix of the finished content and never more calls. */
static void test_generic(void **state) {
    (void)state;
    static const struct {
        const char *text;
        tool_generic_rc rc;
        const char *content; /* CONTENT */
        int n_calls;         /* CALLS */
        const char *name1, *args1;
    } cases[] = {
        {"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]}",
         TOOL_GENERIC_CALLS, NULL, 2, "g", "{}"},
        {" {\"content\": \"Line one\\nsaid \\\"hi\\\" \\u00e9 \\ud83d\\ude00 \\/ \\\\\"}\n", TOOL_GENERIC_CONTENT,
         "Line one\nsaid \"hi\" \xc3\xa9 \xf0\x9f\x98\x80 / \\", 0, NULL, NULL},
        {"{\"content\": \"lone \\ud83d x \\ude00.\"}", TOOL_GENERIC_CONTENT,
         "lone \xef\xbf\xbd x \xef\xbf\xbd.", 0, NULL, NULL},
        /* Cut off by max_tokens: the content so far; the complete calls. */
        {"{\"content\": \"It is sun", TOOL_GENERIC_CONTENT, "It is sun", 0, NULL, NULL},
        {"{\"content\": \"ab\\u00", TOOL_GENERIC_CONTENT, "ab", 0, NULL, NULL},
        {"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"argu", TOOL_GENERIC_CALLS,
         NULL, 1, NULL, NULL},
        /* Plain text. */
        {"{\"tool_calls\": [{\"name\": \"f\", \"argu", TOOL_GENERIC_BAD, NULL, 0, NULL, NULL},
        {"Sure! Paris is sunny.", TOOL_GENERIC_BAD, NULL, 0, NULL, NULL},
        {"{\"answer\": 1}", TOOL_GENERIC_BAD, NULL, 0, NULL, NULL},
        {"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]} more", TOOL_GENERIC_BAD, NULL, 0, NULL, NULL},
        {"", TOOL_GENERIC_BAD, NULL, 0, NULL, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *t = cases[k].text;
        const size_t n = strlen(t);
        tool_parse_result r;
        buf whole = {0};
        const tool_generic_rc rc = tool_parse_generic(t, n, true, &r, &whole);
        if (rc != cases[k].rc) fail_msg("case %zu (%s): rc %d, want %d", k, t, rc, cases[k].rc);
        if (rc == TOOL_GENERIC_CONTENT) {
            assert_int_equal(whole.len, strlen(cases[k].content));
            assert_memory_equal(whole.data, cases[k].content, whole.len);
        }
        if (rc == TOOL_GENERIC_CALLS) {
            assert_int_equal(r.n_calls, cases[k].n_calls);
            if (cases[k].name1) check_call(t, &r.calls[1], cases[k].name1, cases[k].args1);
        }
        for (size_t i = 0; i < n; i++) {
            buf part = {0};
            const tool_generic_rc p = tool_parse_generic(t, i, false, &r, &part);
            if (p == TOOL_GENERIC_CONTENT) {
                assert_int_equal(rc, TOOL_GENERIC_CONTENT);
                if (part.len > whole.len || (part.len && memcmp(part.data, whole.data, part.len)))
                    fail_msg("case %zu: prefix %zu's content is not a prefix of the whole's", k, i);
            }
            if (p == TOOL_GENERIC_CALLS && rc == TOOL_GENERIC_CALLS) assert_true(r.n_calls <= cases[k].n_calls + 1);
            buf_free(&part);
        }
        buf_free(&whole);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hermes),       cmocka_unit_test(test_hermes_malformed),
        cmocka_unit_test(test_hermes_holds_partial_marker),
        cmocka_unit_test(test_llama3_json),  cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_mistral_args), cmocka_unit_test(test_functionary),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_detect),       cmocka_unit_test(test_call_id),
        cmocka_unit_test(test_call_schema),  cmocka_unit_test(test_bare_calls),
        cmocka_unit_test(test_generic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
