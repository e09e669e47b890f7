/* See reasoning.h. */
#include "chat/reasoning.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

reasoning_format reasoning_format_detect(const char *template_source) {
    if (!template_source) return REASONING_NONE;
    if (strstr(template_source, "<|channel|>")) return REASONING_HARMONY;
    return strstr(template_source, OPEN) ? REASONING_THINK : REASONING_NONE;
}

bool reasoning_format_parse(const char *name, reasoning_format *out) {
    if (!strcmp(name, "none"))
        *out = REASONING_NONE;
    else if (!strcmp(name, "think") || !strcmp(name, "deepseek_r1") || !strcmp(name, "qwen3"))
        *out = REASONING_THINK;
    else if (!strcmp(name, "harmony") || !strcmp(name, "gpt_oss") || !strcmp(name, "openai_gptoss"))
        *out = REASONING_HARMONY;
    else
        return false;
    return true;
}

const char *reasoning_format_name(reasoning_format f) {
    return f == REASONING_THINK ? "think" : f == REASONING_HARMONY ? "harmony" : "none";
}

static bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static size_t skip_space(const char *t, size_t at, size_t len) {
    while (at < len && is_space(t[at]))
        at++;
    return at;
}

static size_t trim_end(const char *t, size_t from, size_t end) {
    while (end > from && is_space(t[end - 1]))
        end--;
    return end;
}

bool reasoning_prompt_opens(const char *tail, size_t len) {
    const size_t end = trim_end(tail, 0, len);
    return end >= OPEN_LEN && !memcmp(tail + end - OPEN_LEN, OPEN, OPEN_LEN);
}

size_t reasoning_partial_tag(const char *t, size_t from, size_t len, const char *tag) {
    for (size_t n = strlen(tag) - 1; n > 0; n--)
        if (len - from >= n && !memcmp(t + len - n, tag, n)) return n;
    return 0;
}

void reasoning_split_text(reasoning_format f, const char *text, size_t len, bool opened, bool final,
                          reasoning_split *out) {
    if (f == REASONING_HARMONY) {
        harmony_split_text(text, len, final, out);
        return;
    }
    *out = (reasoning_split){.reasoning_from = len,
                             .reasoning_to = len,
                             .content_from = len,
                             .content_to = len,
                             .rest_from = len};
    if (f == REASONING_NONE) {
        out->content_from = out->rest_from = 0, out->rest_known = true;
        return;
    }
    size_t at = 0;
    if (!opened) {
        const size_t s = skip_space(text, 0, len), rest = len - s;
        const bool starts =
            rest >= OPEN_LEN ? !memcmp(text + s, OPEN, OPEN_LEN) : !memcmp(text + s, OPEN, rest);
        if (starts && rest < OPEN_LEN && !final)
            return; /* it may still be "<think>": nothing yet */
        if (!starts || rest < OPEN_LEN) {
            out->content_from = out->rest_from = 0,
            out->rest_known = true; /* no reasoning: as written */
            return;
        }
        at = s + OPEN_LEN;
    }
    out->reasoned = true;
    const size_t from = skip_space(text, at, len);
    const char *close = memmem(text + at, len - at, CLOSE, CLOSE_LEN);
    if (!close) { /* still reasoning: hold back a partial "</think>" and trailing whitespace */
        const size_t end = final ? len : len - reasoning_partial_tag(text, at, len, CLOSE);
        out->reasoning_to = trim_end(text, from, end);
        out->reasoning_from = from < out->reasoning_to ? from : out->reasoning_to;
        out->rest_known = final; /* rest_from: len */
        return;
    }
    const size_t c = (size_t)(close - text);
    out->reasoning_to = trim_end(text, from, c);
    out->reasoning_from = from < out->reasoning_to ? from : out->reasoning_to;
    out->content_from = out->rest_from = skip_space(text, c + CLOSE_LEN, len);
    out->rest_known = out->content_from < len || final; /* past the whitespace after </think> */
}

void reasoning_stream_next(reasoning_stream *rs, reasoning_format f, const char *text, size_t len,
                           bool opened, bool final, reasoning_split *out) {
    reasoning_split all;
    reasoning_split_text(f, text, len, opened, final, &all);
    *out = all;
    out->reasoning_from =
        all.reasoning_from > rs->reasoning_sent ? all.reasoning_from : rs->reasoning_sent;
    if (out->reasoning_from > all.reasoning_to) out->reasoning_from = all.reasoning_to;
    out->content_from = all.content_from > rs->content_sent ? all.content_from : rs->content_sent;
    if (out->content_from > all.content_to) out->content_from = all.content_to;
    /* Only what was sent moves the marks: an empty part's place may still change. */
    if (all.reasoning_to > all.reasoning_from && all.reasoning_to > rs->reasoning_sent)
        rs->reasoning_sent = all.reasoning_to;
    if (all.rest_known && !rs->rest_started)
        rs->rest_start = all.rest_from, rs->rest_started = true;
    if (all.content_to > all.content_from && all.content_to > rs->content_sent)
        rs->content_sent = all.content_to;
}
