/* gpt-oss's replies in OpenAI's harmony format, split into reasoning and
 * content (reasoning.h). The prompt ends with "<|start|>assistant", so a
 * reply is messages, the first without its start:
 *   <|channel|>analysis<|message|>BODY<|end|>
 *   <|start|>assistant<|channel|>final<|message|>BODY   (<|return|> ends it, unseen)
 * A message's header is everything up to <|message|>: its channel follows
 * <|channel|>, and a recipient (" to=functions.NAME") or a <|constrain|>
 * may sit there too. A body ends at <|end|>, <|call|>, <|return|> or the
 * next <|start|>. The first analysis body is the reasoning; the first body
 * on any other channel (final, or commentary) is the content. A reply that
 * does not begin with <|channel|> or <|start|> is all content. Streamed, a
 * partial marker at the end of a body waits for the next text. */
#include "chat/reasoning.h"

#include <string.h>

static const char START[] = "<|start|>", CHANNEL[] = "<|channel|>", MESSAGE[] = "<|message|>";
static const char *const BODY_ENDS[] = {"<|end|>", "<|call|>", "<|return|>", START};

static size_t find(const char *t, size_t from, size_t len, const char *what) {
    const char *at = memmem(t + from, len - from, what, strlen(what));
    return at ? (size_t)(at - t) : len;
}

/* Whether t[from, len) begins `what`, or is all of its beginning (complete: whether it holds all of
 * it). */
static bool begins(const char *t, size_t from, size_t len, const char *what, bool *complete) {
    const size_t n = strlen(what), have = len - from;
    *complete = have >= n;
    return !memcmp(t + from, what, have < n ? have : n);
}

/* Where the body starting at `from` ends, and *next. */
static size_t body_end(const char *t, size_t from, size_t len, bool final, size_t *next) {
    size_t end = len, marker = 0;
    for (size_t m = 0; m < sizeof BODY_ENDS / sizeof *BODY_ENDS; m++) {
        const size_t at = find(t, from, len, BODY_ENDS[m]);
        if (at < end) end = at, marker = m;
    }
    if (end < len) {
        /* a following <|start|> begins the next message: not consumed */
        *next = BODY_ENDS[marker] == START ? end : end + strlen(BODY_ENDS[marker]);
        return end;
    }
    *next = len;
    if (final) return len;
    size_t hold = 0; /* the longest end that begins a marker */
    for (size_t m = 0; m < sizeof BODY_ENDS / sizeof *BODY_ENDS; m++) {
        const size_t k = reasoning_partial_tag(t, from, len, BODY_ENDS[m]);
        if (k > hold) hold = k;
    }
    return len - hold;
}

bool harmony_message_at(const char *text, size_t at, size_t len, bool final, harmony_message *m) {
    const size_t msg = find(text, at, len, MESSAGE);
    if (msg == len) return false;
    const size_t ch = find(text, at, msg, CHANNEL), name = ch + strlen(CHANNEL);
    m->header_end = msg;
    m->analysis = ch < msg && msg - name >= 8 && !memcmp(text + name, "analysis", 8) &&
                  (name + 8 == msg || text[name + 8] == ' ' || text[name + 8] == '<');
    m->body = msg + strlen(MESSAGE);
    m->end = body_end(text, m->body, len, final, &m->next);
    return true;
}

void harmony_split_text(const char *text, size_t len, bool final, reasoning_split *out) {
    *out = (reasoning_split){.reasoning_from = len,
                             .reasoning_to = len,
                             .content_from = len,
                             .content_to = len,
                             .rest_from = len};
    bool complete_start, complete_channel;
    const bool by_start = begins(text, 0, len, START, &complete_start),
               by_channel = begins(text, 0, len, CHANNEL, &complete_channel);
    if ((by_start && !complete_start) || (by_channel && !complete_channel)) {
        if (!final) return; /* it may still be a header: nothing yet */
        out->content_from = out->rest_from = 0, out->rest_known = true;
        return;
    }
    if (!by_start && !by_channel) {
        out->content_from = out->rest_from = 0,
        out->rest_known = true; /* not in the format: as written */
        return;
    }
    bool have_content = false;
    harmony_message m;
    for (size_t at = 0; at < len && harmony_message_at(text, at, len, final, &m);) {
        if (!out->rest_known &&
            (!m.analysis || out->reasoned)) /* the first message past the reasoning */
            out->rest_from = at, out->rest_known = true;
        if (m.analysis && !out->reasoned) {
            out->reasoned = true;
            out->reasoning_from = m.body, out->reasoning_to = m.end;
        } else if (!m.analysis && !have_content) {
            have_content = true;
            out->content_from = m.body, out->content_to = m.end;
        }
        if (m.next == len || have_content) break;
        at = m.next;
        if (out->reasoned && !out->rest_known) out->rest_from = at, out->rest_known = true;
    }
    if (final && !out->rest_known) out->rest_from = len, out->rest_known = true;
}
