/* See tool_generic.h. */
#include "chat/tool_generic.h"

#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

static const char *role_of(const json_t *m) { return json_string_value(json_object_get(m, "role")); }

static bool is_role(const json_t *m, const char *role) {
    const char *r = role_of(m);
    return r && !strcmp(r, role);
}

bool tool_generic_history_has_tools(const json_t *messages) {
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (is_role(m, "tool") || json_array_size(json_object_get(m, "tool_calls"))) return true;
    }
    return false;
}

static void append_json(buf *b, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s) buf_puts(b, s);
    free(s);
}

/* The system text that offers the tools. */
static void tools_text(buf *b, const json_t *tools, tool_generic_choice choice, const char *named) {
    buf_puts(b, "You can call these tools (each a JSON object: its name, what it does, and the JSON schema of its "
                "arguments):\n");
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        append_json(b, json_object_get(t, "function"));
        buf_puts(b, "\n");
    }
    buf_puts(b, "\nReply with one JSON object and nothing else. ");
    switch (choice) {
    case TOOL_GENERIC_CHOICE_AUTO:
        buf_puts(b, "To call tools:\n{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<its arguments>}}]}\n"
                    "To answer without calling a tool:\n{\"content\": \"<your answer>\"}");
        break;
    case TOOL_GENERIC_CHOICE_REQUIRED:
        buf_puts(b, "Call one or more of the tools:\n"
                    "{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<its arguments>}}]}");
        break;
    case TOOL_GENERIC_CHOICE_NAMED:
        buf_printf(b, "Call the tool %s:\n{\"tool_calls\": [{\"name\": \"%s\", \"arguments\": {<its arguments>}}]}",
                   named, named);
        break;
    }
}

/* An assistant message with tool_calls: its content becomes the JSON the
 * model writes for them. */
static json_t *assistant_calls(const json_t *m) {
    json_t *calls = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(m, "tool_calls"), i, c) {
        const json_t *fn = json_object_get(c, "function");
        json_array_append_new(calls, json_pack("{s:O,s:O}", "name", json_object_get(fn, "name"), "arguments",
                                               json_object_get(fn, "arguments")));
    }
    json_t *reply = json_pack("{s:o}", "tool_calls", calls);
    char *text = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    json_t *out = text ? json_pack("{s:s,s:s}", "role", "assistant", "content", text) : NULL;
    free(text);
    return out;
}

static json_t *tool_result(const json_t *m) {
    json_t *r = json_pack("{s:{s:O,s:O}}", "tool_response", "tool_call_id", json_object_get(m, "tool_call_id"),
                          "content", json_object_get(m, "content"));
    char *text = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    json_t *out = text ? json_string(text) : NULL;
    free(text);
    return out;
}

json_t *tool_generic_messages(const json_t *messages, const json_t *tools, tool_generic_choice choice,
                              const char *named) {
    json_t *out = json_array();
    buf sys = {0};
    if (json_array_size(tools)) tools_text(&sys, tools, choice, named);
    size_t i = 0;
    const json_t *first = json_array_get(messages, 0);
    if (sys.len) {
        if (first && is_role(first, "system") && json_is_string(json_object_get(first, "content"))) {
            buf merged = {0};
            buf_puts(&merged, json_string_value(json_object_get(first, "content")));
            buf_puts(&merged, "\n\n");
            buf_append(&merged, sys.data, sys.len);
            json_t *m = json_deep_copy(first);
            json_object_set_new(m, "content", json_stringn(merged.data, merged.len));
            json_array_append_new(out, m);
            buf_free(&merged);
            i = 1;
        } else {
            json_array_append_new(out, json_pack("{s:s,s:s%}", "role", "system", "content", sys.data, sys.len));
        }
    }
    buf_free(&sys);
    bool ok = true;
    for (; ok && i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        json_t *r;
        if (is_role(m, "assistant") && json_array_size(json_object_get(m, "tool_calls"))) {
            r = assistant_calls(m);
        } else if (is_role(m, "tool")) {
            json_t *text = tool_result(m);
            /* A result right after another joins its user message. */
            json_t *prev = i > 0 && is_role(json_array_get(messages, i - 1), "tool")
                               ? json_array_get(out, json_array_size(out) - 1)
                               : NULL;
            if (text && prev) {
                buf joined = {0};
                buf_puts(&joined, json_string_value(json_object_get(prev, "content")));
                buf_puts(&joined, "\n");
                buf_puts(&joined, json_string_value(text));
                json_object_set_new(prev, "content", json_stringn(joined.data, joined.len));
                buf_free(&joined);
                json_decref(text);
                continue;
            }
            r = text ? json_pack("{s:s,s:o}", "role", "user", "content", text) : NULL;
        } else {
            r = json_deep_copy(m);
        }
        ok = r && !json_array_append_new(out, r);
    }
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}
