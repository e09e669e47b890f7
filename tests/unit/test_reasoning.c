/* Reasoning apart from the answer (src/chat/reasoning.c): whole replies
 * split as vLLM's deepseek_r1/qwen3 parsers and llama-server do, with the
 * reasoning opened by the reply or by the prompt; and streamed, every
 * prefix's deltas joined give exactly the whole reply's parts, whatever
 * the pieces the text arrives in (a tag cut anywhere); gpt-oss's harmony
 * channels the same way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chat/reasoning.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    reasoning_format f;
    const char *text;
    bool opened;
    const char *reasoning; /* NULL: the reply has no reasoning part */
    const char *content;
} split_case;

static const split_case CASES[] = {
    {REASONING_THINK, "<think>\nWeigh it.\n</think>\n\nParis.", false, "Weigh it.", "Paris."},
    {REASONING_THINK, "  <think>a</think>b", false, "a", "b"},
    {REASONING_THINK, "<think></think>Just this.", false, "", "Just this."},
    {REASONING_THINK, "Weigh it.\n</think>\n\nParis.", true, "Weigh it.",
     "Paris."}, /* the prompt opened it */
    {REASONING_THINK, "\n</think>\n\nParis.", true, "", "Paris."},
    {REASONING_THINK, "Still thinking", true, "Still thinking", ""},
    {REASONING_THINK, "<think>never closed ", false, "never closed", ""},
    {REASONING_THINK, "Paris. <think> is a tag.", false, NULL, "Paris. <think> is a tag."},
    {REASONING_THINK, "<thin", false, NULL, "<thin"},
    {REASONING_THINK, "  plain", false, NULL, "  plain"},
    {REASONING_THINK, "<think>a</think>b</think>c", false, "a", "b</think>c"},
    {REASONING_THINK, "<think>x < y, y </ z</think>\n<ok>", false, "x < y, y </ z", "<ok>"},
    {REASONING_THINK, "", false, NULL, ""},
    {REASONING_THINK, "", true, "", ""},
    /* gpt-oss's harmony channels */
    {REASONING_HARMONY,
     "<|channel|>analysis<|message|>Weigh "
     "it.<|end|><|start|>assistant<|channel|>final<|message|>Paris.",
     false, "Weigh it.", "Paris."},
    {REASONING_HARMONY, "<|channel|>final<|message|>Paris.", false, NULL, "Paris."},
    {REASONING_HARMONY,
     "<|channel|>analysis<|message|>a <| b <|en<|end|><|start|>assistant<|channel|>final "
     "<|constrain|>json<|message|>{\"a\": 1}<|return|>",
     false, "a <| b <|en", "{\"a\": 1}"},
    {REASONING_HARMONY, "<|channel|>analysis<|message|>cut while thinking", false,
     "cut while thinking", ""},
    {REASONING_HARMONY,
     "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.f<|message|>{}<|call|>",
     false, "x", "{}"},
    {REASONING_HARMONY, "Plain words", false, NULL, "Plain words"},
    {REASONING_HARMONY, "<|chan", false, NULL, "<|chan"},
    {REASONING_NONE, "<think>a</think>b", false, NULL, "<think>a</think>b"},
};

static void part_equals(const char *text, size_t from, size_t to, const char *want,
                        const char *what) {
    const size_t n = to - from;
    if (n != strlen(want) || memcmp(text + from, want, n))
        fail_msg("%s: got '%.*s', want '%s' (reply '%s')", what, (int)n, text + from, want, text);
}

static void test_whole_replies(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const split_case *c = &CASES[i];
        reasoning_split s;
        reasoning_split_text(c->f, c->text, strlen(c->text), c->opened, true, &s);
        assert_int_equal(s.reasoned, c->reasoning != NULL);
        part_equals(c->text, s.reasoning_from, s.reasoning_to, c->reasoning ? c->reasoning : "",
                    "reasoning");
        part_equals(c->text, s.content_from, s.content_to, c->content, "content");
        assert_true(s.rest_known);
        if (c->f == REASONING_THINK) assert_int_equal(s.rest_from, s.content_from);
    }
    /* harmony: a tool parser reads from the message after the analysis, header and all */
    const char *h = "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.f<|message|>{}";
    reasoning_split s;
    reasoning_split_text(REASONING_HARMONY, h, strlen(h), false, true, &s);
    assert_int_equal(s.rest_from, strstr(h, "<|start|>") - h);
    h = "<|channel|>final<|message|>hi";
    reasoning_split_text(REASONING_HARMONY, h, strlen(h), false, true, &s);
    assert_int_equal(s.rest_from, 0);
}

/* The text in pieces of `step` bytes (and the remainder), then final. */
static void stream_in_pieces(const split_case *c, size_t step) {
    const size_t len = strlen(c->text);
    reasoning_stream rs = {0};
    char reasoning[256] = "", content[256] = "";
    size_t rn = 0, cn = 0;
    bool reasoned = false;
    for (size_t at = step < len ? step : len;; at = at + step < len ? at + step : len) {
        const bool final = at == len;
        reasoning_split d;
        reasoning_stream_next(&rs, c->f, c->text, at, c->opened, final, &d);
        memcpy(reasoning + rn, c->text + d.reasoning_from, d.reasoning_to - d.reasoning_from);
        rn += d.reasoning_to - d.reasoning_from;
        memcpy(content + cn, c->text + d.content_from, d.content_to - d.content_from);
        cn += d.content_to - d.content_from;
        reasoned = d.reasoned;
        if (final) break;
    }
    reasoning[rn] = content[cn] = '\0';
    if (strcmp(reasoning, c->reasoning ? c->reasoning : "") || strcmp(content, c->content) ||
        reasoned != (c->reasoning != NULL))
        fail_msg("'%s' in pieces of %zu: reasoning '%s', content '%s'", c->text, step, reasoning,
                 content);
    /* Where a tool parser starts reading (past the reasoning) is found once and kept. */
    reasoning_split whole;
    reasoning_split_text(c->f, c->text, len, c->opened, true, &whole);
    assert_true(rs.rest_started);
    assert_int_equal(rs.rest_start, whole.rest_from);
}

static void test_streamed_replies_join_to_the_whole(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        for (size_t step = 1; step <= strlen(CASES[i].text) + 1; step++)
            stream_in_pieces(&CASES[i], step);
}

static void test_detection_and_names(void **state) {
    (void)state;
    /* Qwen3's template: "<think>\n\n</think>\n\n" for enable_thinking=false. */
    assert_int_equal(
        reasoning_format_detect("{%- if enable_thinking is defined and enable_thinking is false %}"
                                "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"),
        REASONING_THINK);
    assert_int_equal(reasoning_format_detect(
                         "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"),
                     REASONING_NONE);
    reasoning_format f;
    assert_true(reasoning_format_parse("deepseek_r1", &f) && f == REASONING_THINK);
    assert_true(reasoning_format_parse("qwen3", &f) && f == REASONING_THINK);
    assert_true(reasoning_format_parse("none", &f) && f == REASONING_NONE);
    assert_true(reasoning_format_parse("openai_gptoss", &f) && f == REASONING_HARMONY);
    assert_false(reasoning_format_parse("granite", &f));
    assert_int_equal(
        reasoning_format_detect("{{- \"<|start|>assistant<|channel|>final<|message|>\" }}"),
        REASONING_HARMONY);
    const char *const opens = "<|Assistant|><think>\n", *closed = "<think>\n\n</think>\n\n",
                      *plain = "model\n";
    assert_true(reasoning_prompt_opens(opens, strlen(opens)));
    assert_false(reasoning_prompt_opens(closed, strlen(closed)));
    assert_false(reasoning_prompt_opens(plain, strlen(plain)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_replies),
        cmocka_unit_test(test_streamed_replies_join_to_the_whole),
        cmocka_unit_test(test_detection_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
