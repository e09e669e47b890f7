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

/* The reply's calls in r: written in the format's markup, or (tools
 * offered) as bare JSON (tool_parse_bare). Llama 3's own format is bare JSON
 * already. Returns true, with r unset, while an unfinished reply may still
 * become a bare call: a stream sends nothing of it until it knows. */
static bool parse_reply(tool_format f, const json_t *tools, const char *text, size_t len, bool final,
                        tool_parse_result *r) {
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

bool tool_output_message(tool_format f, bool parallel, const json_t *tools, const char *text, size_t len,
                         json_t *msg) {
    tool_parse_result r;
    parse_reply(f, tools, text, len, true, &r);
    if (tool_parse_is_plain(&r)) {
        json_object_set_new(msg, "content", resp_string(text, len));
        return false;
    }
    buf content = {0};
    for (int i = 0; i < r.n_content; i++) buf_append(&content, text + r.content[i].off, r.content[i].len);
    json_object_set_new(msg, "content", content.len ? resp_string(content.data, content.len) : json_null());
    buf_free(&content);
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
    if (parse_reply(f, tools, text, len, final, &r)) return;
    /* Content: the joined spans past what was sent. */
    buf content = {0};
    size_t at = 0;
    for (int i = 0; i < r.n_content; i++) {
        const tool_span s = r.content[i];
        if (at + s.len > ts->content_sent) {
            const size_t skip = ts->content_sent > at ? ts->content_sent - at : 0;
            buf_append(&content, text + s.off + skip, s.len - skip);
        }
        at += s.len;
    }
    if (content.len) {
        json_object_set_new(delta, "content", resp_string(content.data, content.len));
        ts->content_sent += content.len;
    }
    buf_free(&content);
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
