/* The request side of tool calling (src/server/tools.c through
 * api_request_parse): malformed tools, tool_choice and tool history each get
 * a 400 naming the field; good ones become what the chat template gets
 * (tools as given, call arguments as mappings, tool results with their
 * tool_call_id); tool_choice against the template's format; and replies
 * (src/server/tool_output.c) in OpenAI's message and stream shapes. Bodies
 * are written with single quotes, turned into JSON's double ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_refused.h"
#include "grammar/constraint.h"
#include "server/params.h"
#include "server/tool_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NV 1000

static json_t *load_q(const char *text) {
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (!j) fail_msg("test JSON does not parse: %s: %s", s, je.text);
    free(s);
    return j;
}

#define USER "{'role': 'user', 'content': 'x'}"
#define TOOL_F "{'type': 'function', 'function': {'name': 'f', 'parameters': {'type': 'object'}}}"

static const struct {
    api_kind kind;
    const char *body, *param, *code;
} BAD[] = {
    {API_CHAT, "{'messages': [" USER "], 'tools': {}}", "tools", "invalid_type"},
    {API_CHAT, "{'messages': [" USER "], 'tools': []}", "tools", "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [5]}", "tools[0]", "invalid_type"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [{'type': 'retrieval', 'function': {'name': 'f'}}]}", "tools[0]",
     "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [{'type': 'function'}]}", "tools[0].function", "invalid_type"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [{'type': 'function', 'function': {}}]}", "tools[0].function.name",
     "invalid_type"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [{'type': 'function', 'function': {'name': 'a b'}}]}",
     "tools[0].function.name", "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [" TOOL_F ", " TOOL_F "]}", "tools[1].function.name",
     "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [{'type': 'function', 'function': {'name': 'f', 'parameters': 3}}]}",
     "tools[0].function.parameters", "invalid_type"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [{'type': 'function', 'function': {'name': 'f', 'params': {}}}]}",
     "tools[0].function", "unknown_field"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [" TOOL_F "], 'tool_choice': 'sometimes'}", "tool_choice",
     "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tool_choice': 'auto'}", "tool_choice", "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [" TOOL_F "], 'tool_choice': {'type': 'function', 'function': "
               "{'name': 'g'}}}",
     "tool_choice", "invalid_value"},
    {API_CHAT, "{'messages': [" USER "], 'tools': [" TOOL_F "], 'tool_choice': {'type': 'function'}}",
     "tool_choice.function", "invalid_type"},
    {API_CHAT, "{'messages': [" USER "], 'parallel_tool_calls': 'yes'}", "parallel_tool_calls", "invalid_type"},
    {API_COMPLETIONS, "{'prompt': 'x', 'tools': [" TOOL_F "]}", "tools", "unsupported_field"},
    /* history */
    {API_CHAT, "{'messages': [{'role': 'tool', 'content': 'sunny'}]}", "messages[0].tool_call_id", "missing_field"},
    {API_CHAT, "{'messages': [{'role': 'tool', 'content': 'sunny', 'tool_call_id': 7}]}", "messages[0].tool_call_id",
     "invalid_type"},
    {API_CHAT, "{'messages': [{'role': 'tool', 'tool_call_id': 'c1'}]}", "messages[0].content", "missing_field"},
    {API_CHAT, "{'messages': [{'role': 'assistant', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', "
               "'arguments': '{}'}}]}]}",
     "messages[0].tool_calls[0].id", "invalid_type"},
    {API_CHAT, "{'messages': [{'role': 'assistant', 'tool_calls': [{'id': 'c', 'type': 'function', 'function': "
               "{'name': 'f', 'arguments': 'not json'}}]}]}",
     "messages[0].tool_calls[0].function.arguments", "invalid_value"},
    {API_CHAT, "{'messages': [{'role': 'assistant', 'tool_calls': [{'id': 'c', 'type': 'function', 'function': "
               "{'name': 'f', 'arguments': '[1]'}}]}]}",
     "messages[0].tool_calls[0].function.arguments", "invalid_value"},
    {API_CHAT, "{'messages': [{'role': 'assistant', 'tool_calls': 'f()'}]}", "messages[0].tool_calls",
     "invalid_type"},
    {API_CHAT, "{'messages': [{'role': 'user', 'content': 'x', 'tool_call_id': 'c'}]}", "messages[0].tool_call_id",
     "unknown_field"},
    {API_CHAT, "{'messages': [{'role': 'function', 'content': 'x', 'name': 'f'}]}", "messages[0].role",
     "unsupported_role"},
};

static void test_bad_tool_requests_name_the_field(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++)
        expect_refused(i, BAD[i].body, load_q(BAD[i].body), BAD[i].kind, BAD[i].param, BAD[i].code);
}

/* A round trip's history as the template gets it. */
static void test_history_is_normalized(void **state) {
    (void)state;
    json_t *j = load_q("{'messages': [" USER ", {'role': 'assistant', 'content': null, 'tool_calls': [{'id': 'call_1', "
                       "'type': 'function', 'function': {'name': 'f', 'arguments': '{\\'city\\': \\'Paris\\'}'}}]}, "
                       "{'role': 'tool', 'content': 'sunny', 'tool_call_id': 'call_1', 'name': 'f'}], "
                       "'tools': [" TOOL_F "], 'parallel_tool_calls': false}");
    api_request r;
    api_error e;
    if (api_request_parse(j, API_CHAT, NV, &r, &e)) fail_msg("refused: %s", e.message);
    json_t *want = load_q("[" USER ", {'role': 'assistant', 'content': null, 'tool_calls': [{'id': 'call_1', 'type': "
                          "'function', 'function': {'name': 'f', 'arguments': {'city': 'Paris'}}}]}, "
                          "{'role': 'tool', 'content': 'sunny', 'tool_call_id': 'call_1', 'name': 'f'}]");
    if (!json_equal(r.messages, want)) {
        char *got = json_dumps(r.messages, 0);
        fail_msg("messages: %s", got);
    }
    assert_true(json_equal(r.tools.tools, json_object_get(j, "tools")));
    assert_false(r.tools.parallel);
    assert_int_equal(r.tools.choice, TOOL_CHOICE_AUTO);
    assert_true(api_tools_offered(&r.tools));
    json_decref(want);
    api_request_free(&r);
    json_decref(j);
}

/* Whether g takes exactly `text` (all of it, and may end there). */
static bool grammar_takes(const grammar *g, const char *text) {
    gstate st = {0};
    gscratch w = {0};
    bool ok = gstate_init(&st, g, &w) == 0 &&
              gstate_advance_bytes(g, &st, (const unsigned char *)text, strlen(text), &w) == 1 && st.accept;
    gstate_free(&st);
    gscratch_free(&w);
    return ok;
}

/* The forced constraint's grammar takes each text of `takes` and none of `refuses`. */
static void check_forced(const constraint *forced, const char *const *takes, const char *const *refuses) {
    assert_non_null(forced);
    const grammar *g = constraint_grammar(forced);
    for (; *takes; takes++)
        if (!grammar_takes(g, *takes)) fail_msg("the constraint refuses %s", *takes);
    for (; *refuses; refuses++)
        if (grammar_takes(g, *refuses)) fail_msg("the constraint takes %s", *refuses);
}

static void test_choice_against_the_template(void **state) {
    (void)state;
    static const struct {
        const char *extra;
        tool_format tmpl, want;
        int rc;
        const char *param;
    } CASES[] = {
        {"", TOOL_FORMAT_HERMES, TOOL_FORMAT_HERMES, 0, NULL},
        {", 'tool_choice': 'auto'", TOOL_FORMAT_MISTRAL, TOOL_FORMAT_MISTRAL, 0, NULL},
        /* none: the tools are not offered, replies are text */
        {", 'tool_choice': 'none'", TOOL_FORMAT_HERMES, TOOL_FORMAT_NONE, 0, NULL},
        {", 'tool_choice': 'none'", TOOL_FORMAT_NONE, TOOL_FORMAT_NONE, 0, NULL},
        /* a template without a tool format: the generic one, its reply held to it */
        {"", TOOL_FORMAT_NONE, TOOL_FORMAT_GENERIC, 0, NULL},
        /* required and named: read as the template's format, and forced by a constraint */
        {", 'tool_choice': 'required'", TOOL_FORMAT_HERMES, TOOL_FORMAT_HERMES, 0, NULL},
        {", 'tool_choice': {'type': 'function', 'function': {'name': 'f'}}", TOOL_FORMAT_HERMES, TOOL_FORMAT_HERMES, 0,
         NULL},
        /* any tool, in a format that spells the name in the markup: no one schema */
        {", 'tool_choice': 'required'", TOOL_FORMAT_FUNCTIONARY, TOOL_FORMAT_NONE, -1, "tool_choice"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char body[512];
        snprintf(body, sizeof body, "{'messages': [" USER "], 'tools': [" TOOL_F "]%s}", CASES[i].extra);
        json_t *j = load_q(body);
        api_request r;
        api_error e = {0};
        assert_int_equal(api_request_parse(j, API_CHAT, NV, &r, &e), 0);
        tool_format got;
        constraint *forced = NULL;
        const int rc = api_tools_resolve(&r.tools, CASES[i].tmpl, &got, &forced, &e);
        if (rc != CASES[i].rc) fail_msg("case %zu: rc %d (%s)", i, rc, e.message);
        if (rc) {
            assert_int_equal(e.status, 400);
            assert_string_equal(e.param, CASES[i].param);
        } else {
            assert_int_equal(got, CASES[i].want);
        }
        if (i == 4) {
            static const char *const takes[] = {"{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}",
                                                "{\"content\": \"It is \\\"sunny\\\".\"}", NULL};
            static const char *const refuses[] = {"{\"tool_calls\": [{\"name\": \"g\", \"arguments\": {}}]}",
                                                  "{\"tool_calls\": []}", "{\"content\": \"a\", \"tool_calls\": []}",
                                                  "Sure, calling f.", NULL};
            check_forced(forced, takes, refuses);
        } else if (i == 5 || i == 6) {
            static const char *const takes[] = {"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", NULL};
            static const char *const refuses[] = {"<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
                                                  "Sure, calling f.", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
                                                  NULL};
            check_forced(forced, takes, refuses);
        } else {
            assert_null(forced);
        }
        constraint_release(forced);
        if (i == 7) assert_non_null(strstr(e.message, "cannot be enforced in the 'functionary' format"));
        api_request_free(&r);
        json_decref(j);
    }
}

static void test_reply_message(void **state) {
    (void)state;
    const char *text = "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                       "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
    json_t *msg = json_object();
    assert_true(tool_output_message(TOOL_FORMAT_HERMES, true, NULL, text, strlen(text), msg));
    assert_string_equal(json_string_value(json_object_get(msg, "content")), "Checking.");
    const json_t *calls = json_object_get(msg, "tool_calls");
    assert_int_equal(json_array_size(calls), 2);
    const json_t *c0 = json_array_get(calls, 0);
    assert_int_equal(strncmp(json_string_value(json_object_get(c0, "id")), "call_", 5), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "type")), "function");
    const json_t *fn = json_object_get(c0, "function");
    assert_string_equal(json_string_value(json_object_get(fn, "name")), "f");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"city\": \"Paris\"}");
    assert_false(json_equal(json_object_get(c0, "id"), json_object_get(json_array_get(calls, 1), "id")));
    json_decref(msg);
    /* parallel_tool_calls false: the first call only. */
    msg = json_object();
    assert_true(tool_output_message(TOOL_FORMAT_HERMES, false, NULL, text, strlen(text), msg));
    assert_int_equal(json_array_size(json_object_get(msg, "tool_calls")), 1);
    json_decref(msg);
    /* Malformed: plain content, no tool_calls. */
    msg = json_object();
    const char *bad = "<tool_call>{\"name\": \"f\", \"arguments\": {oops}}</tool_call>";
    assert_false(tool_output_message(TOOL_FORMAT_HERMES, true, NULL, bad, strlen(bad), msg));
    assert_string_equal(json_string_value(json_object_get(msg, "content")), bad);
    assert_null(json_object_get(msg, "tool_calls"));
    json_decref(msg);
}

/* Streaming a reply byte by byte gives deltas that join into the whole
 * reply's content and calls, with the id, type and name first. */
static void test_stream_deltas_reassemble(void **state) {
    (void)state;
    const char *text = "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                       "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
    const size_t n = strlen(text);
    tool_stream ts = {0};
    char content[256] = "", args[2][128] = {"", ""}, names[2][16] = {"", ""};
    int n_ids = 0;
    for (size_t k = 0; k <= n; k++) {
        json_t *delta = json_object();
        tool_stream_delta(&ts, TOOL_FORMAT_HERMES, true, NULL, text, k, k == n, delta);
        const json_t *c = json_object_get(delta, "content");
        if (c) strncat(content, json_string_value(c), sizeof content - strlen(content) - 1);
        assert_null(strstr(content, "<tool"));
        size_t i;
        const json_t *tc;
        json_array_foreach(json_object_get(delta, "tool_calls"), i, tc) {
            const int idx = (int)json_integer_value(json_object_get(tc, "index"));
            assert_true(idx >= 0 && idx < 2);
            const json_t *fn = json_object_get(tc, "function");
            if (json_object_get(tc, "id")) {
                n_ids++;
                assert_string_equal(json_string_value(json_object_get(tc, "type")), "function");
                snprintf(names[idx], sizeof names[idx], "%s", json_string_value(json_object_get(fn, "name")));
            } else {
                assert_non_null(names[idx][0] ? names[idx] : NULL); /* the name came first */
            }
            const char *a = json_string_value(json_object_get(fn, "arguments"));
            strncat(args[idx], a, sizeof args[idx] - strlen(args[idx]) - 1);
        }
        json_decref(delta);
    }
    assert_string_equal(content, "Checking.");
    assert_int_equal(n_ids, 2);
    assert_string_equal(names[0], "f");
    assert_string_equal(names[1], "g");
    assert_string_equal(args[0], "{\"city\": \"Paris\"}");
    assert_string_equal(args[1], "{}");
}

/* A reply written as a bare JSON call naming an offered tool is a call, whole
 * and streamed (held back until the end, then sent as the call); a JSON
 * answer that names no offered tool stays content in both. */
static void test_bare_json_calls(void **state) {
    (void)state;
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                               "\"parameters\": {\"type\": \"object\"}}}]", 0, NULL);
    assert_non_null(tools);
    const char *call = "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```";
    const char *answer = "{\"name\": \"Paris\", \"arguments\": {\"population\": 2100000}}";
    json_t *msg = json_object();
    assert_true(tool_output_message(TOOL_FORMAT_HERMES, true, tools, call, strlen(call), msg));
    assert_true(json_is_null(json_object_get(msg, "content")));
    const json_t *fn = json_object_get(json_array_get(json_object_get(msg, "tool_calls"), 0), "function");
    assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_weather");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"city\": \"Paris\"}");
    json_decref(msg);
    /* Without the tools list (none offered to the parser) it is text. */
    msg = json_object();
    assert_false(tool_output_message(TOOL_FORMAT_HERMES, true, NULL, call, strlen(call), msg));
    json_decref(msg);
    msg = json_object();
    assert_false(tool_output_message(TOOL_FORMAT_HERMES, true, tools, answer, strlen(answer), msg));
    assert_string_equal(json_string_value(json_object_get(msg, "content")), answer);
    json_decref(msg);

    const char *texts[] = {call, answer};
    for (int t = 0; t < 2; t++) {
        const size_t n = strlen(texts[t]);
        tool_stream ts = {0};
        char content[256] = "", args[128] = "";
        for (size_t k = 0; k <= n; k++) {
            json_t *delta = json_object();
            tool_stream_delta(&ts, TOOL_FORMAT_HERMES, true, tools, texts[t], k, k == n, delta);
            if (k < n) assert_int_equal(json_object_size(delta), 0); /* held back until it is known */
            const json_t *c = json_object_get(delta, "content");
            if (c) strncat(content, json_string_value(c), sizeof content - strlen(content) - 1);
            size_t i;
            const json_t *tc;
            json_array_foreach(json_object_get(delta, "tool_calls"), i, tc) {
                const char *a = json_string_value(json_object_get(json_object_get(tc, "function"), "arguments"));
                strncat(args, a, sizeof args - strlen(args) - 1);
            }
            json_decref(delta);
        }
        if (t == 0) {
            assert_int_equal(ts.n_announced, 1);
            assert_string_equal(content, "");
            assert_string_equal(args, "{\"city\": \"Paris\"}");
        } else {
            assert_int_equal(ts.n_announced, 0);
            assert_string_equal(content, answer);
        }
    }
    json_decref(tools);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_tool_requests_name_the_field),
        cmocka_unit_test(test_history_is_normalized),
        cmocka_unit_test(test_choice_against_the_template),
        cmocka_unit_test(test_reply_message),
        cmocka_unit_test(test_stream_deltas_reassemble),
        cmocka_unit_test(test_bare_json_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
