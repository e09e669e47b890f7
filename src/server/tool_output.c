/* See tool_output.h. */
#include "server/tool_output.h"

#include "server/api_json.h"
#include "server/tools.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void new_call_id(tool_format f, char *out, size_t cap) {
    unsigned char r[16];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        static _Atomic unsigned long counter;
        const unsigned long x = (unsigned long)time(NULL) ^ (++counter * 0x9e3779b97f4a7c15ul);
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(x >> (i % 8 * 8)) ^ (unsigned char)i;
    }
    tool_format_call_id(f, r, out, cap);
}

static int calls_kept(const tool_parse_result *r, bool parallel) {
    return !parallel && r->n_calls > 1 ? 1 : r->n_calls;
}

static json_t *args_string(const char *text, const tool_parsed_call *c, size_t from) {
    if (c->args_missing) return json_string(from ? "" : "{}");
    return resp_string(text + c->args.off + from, c->args.len - from);
}

/* {"name": ...} (an empty string when undecodable). */
static json_t *name_string(const char *text, const tool_parsed_call *c) {
    char *name = tool_parse_name(text, c);
    json_t *j = resp_string(name ? name : "", name ? strlen(name) : 0);
    free(name);
    return j;
}

/* The reply's calls in r and, where the content is not spans of the text
 * (the generic format's decoded {"content": ...}), the content in *decoded
 * with *is_decoded set. Calls are written in the format's markup, or (tools
 * offered) as bare JSON (tool_parse_bare); Llama 3's own format is bare JSON
 * already. Returns true, with r unset, while an unfinished reply may still
 * become a bare call or is too short to tell the generic reply's kind: a
 * stream sends nothing of it until it knows. */
static bool parse_reply(tool_format f, const json_t *tools, const char *text, size_t len, bool final,
                        tool_parse_result *r, buf *decoded, bool *is_decoded) {
    *is_decoded = false;
    if (f == TOOL_FORMAT_GENERIC) {
        switch (tool_parse_generic(text, len, final, r, decoded)) {
        case TOOL_GENERIC_UNKNOWN: return true;
        case TOOL_GENERIC_CONTENT: *is_decoded = true; return false;
        case TOOL_GENERIC_CALLS: return false;
        case TOOL_GENERIC_BAD: break;
        }
        tool_parse(f, text, len, final, r); /* plain text */
        return false;
    }
    if (f != TOOL_FORMAT_LLAMA3_JSON && json_array_size(tools)) {
        const char *names[API_MAX_TOOLS];
        int n = 0;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const char *name = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
            if (name && n < API_MAX_TOOLS) names[n++] = name;
        }
        const tool_bare_rc rc = tool_parse_bare(text, len, final, names, n, r);
        if (rc == TOOL_BARE_YES) return false;
        if (rc == TOOL_BARE_MAYBE) return true;
    }
    tool_parse(f, text, len, final, r);
    return false;
}

/* The reply's content so far: the decoded text, or the spans joined. */
static void content_of(const tool_parse_result *r, const char *text, const buf *decoded, bool is_decoded, buf *out) {
    if (is_decoded) {
        buf_append(out, decoded->data, decoded->len);
        return;
    }
    for (int i = 0; i < r->n_content; i++) buf_append(out, text + r->content[i].off, r->content[i].len);
}

bool tool_output_message(tool_format f, bool parallel, const json_t *tools, const char *text, size_t len,
                         json_t *msg) {
    tool_parse_result r;
    buf decoded = {0}, content = {0};
    bool is_decoded;
    parse_reply(f, tools, text, len, true, &r, &decoded, &is_decoded);
    if (!is_decoded && tool_parse_is_plain(&r)) {
        json_object_set_new(msg, "content", resp_string(text, len));
        buf_free(&decoded);
        return false;
    }
    content_of(&r, text, &decoded, is_decoded, &content);
    buf_free(&decoded);
    json_object_set_new(msg, "content",
                        content.len || is_decoded ? resp_string(content.data ? content.data : "", content.len)
                                                  : json_null());
    buf_free(&content);
    if (is_decoded) return false;
    json_t *calls = json_array();
    for (int i = 0; i < calls_kept(&r, parallel); i++) {
        char id[40];
        new_call_id(f, id, sizeof id);
        json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:o,s:o}}", "id", id, "type", "function", "function",
                                               "name", name_string(text, &r.calls[i]), "arguments",
                                               args_string(text, &r.calls[i], 0)));
    }
    json_object_set_new(msg, "tool_calls", calls);
    return true;
}

void tool_stream_delta(tool_stream *ts, tool_format f, bool parallel, const json_t *tools, const char *text,
                       size_t len, bool final, json_t *delta) {
    tool_parse_result r;
    buf decoded = {0}, content = {0};
    bool is_decoded;
    if (parse_reply(f, tools, text, len, final, &r, &decoded, &is_decoded)) {
        buf_free(&decoded);
        return;
    }
    /* Content: what is past what was sent. */
    content_of(&r, text, &decoded, is_decoded, &content);
    buf_free(&decoded);
    if (content.len > ts->content_sent) {
        json_object_set_new(delta, "content",
                            resp_string(content.data + ts->content_sent, content.len - ts->content_sent));
        ts->content_sent = content.len;
    }
    buf_free(&content);
    if (is_decoded) r.n_calls = 0;
    /* Calls: announced once the name is complete, then argument fragments. */
    json_t *calls = json_array();
    for (int i = 0; i < calls_kept(&r, parallel); i++) {
        const tool_parsed_call *c = &r.calls[i];
        if (i >= ts->n_announced) {
            if (!c->name_done || i > ts->n_announced) break;
            char id[40];
            new_call_id(f, id, sizeof id);
            json_array_append_new(calls, json_pack("{s:i,s:s,s:s,s:{s:o,s:s}}", "index", i, "id", id, "type",
                                                   "function", "function", "name", name_string(text, c), "arguments",
                                                   ""));
            ts->n_announced = i + 1;
            ts->args_sent[i] = 0;
        }
        const size_t have = c->args_missing ? (c->args_done ? 2 : 0) : c->args.len;
        if (have > ts->args_sent[i]) {
            json_array_append_new(calls, json_pack("{s:i,s:{s:o}}", "index", i, "function", "arguments",
                                                   args_string(text, c, ts->args_sent[i])));
            ts->args_sent[i] = have;
        }
    }
    if (json_array_size(calls)) json_object_set_new(delta, "tool_calls", calls);
    else json_decref(calls);
}
