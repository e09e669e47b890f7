/* Chat messages as the chat template sees them (see api_parse_messages in
 * params.h): each message's role checked and mapped (developer is system),
 * its text parts joined with newlines as vLLM does, its tool calls and tool
 * results checked by tools.c, and any other key refused with a 400 naming
 * it. Shared by the chat endpoint and /tokenize. */
#include "server/params.h"

#include "server/api_json.h"
#include "server/tools.h"
#include "util/buf.h"

#include <stdio.h>
#include <string.h>

static int parse_content(const json_t *c, size_t i, const char *role, buf *text, api_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (json_is_string(c)) {
        buf_append(text, json_string_value(c), json_string_length(c));
        return 0;
    }
    if (json_is_null(c) && !strcmp(role, "assistant")) return 0;
    if (!json_is_array(c)) return api_type_error(e, param, "a string or a list of content parts", c);
    size_t k;
    const json_t *part;
    json_array_foreach(c, k, part) {
        snprintf(param, sizeof param, "messages[%zu].content[%zu]", i, k);
        if (!json_is_object(part)) return api_type_error(e, param, "an object", part);
        const json_t *type = json_object_get(part, "type");
        if (!json_is_string(type))
            return api_fail(e, 400, "invalid_value", param, "content part %s needs a string 'type'", param);
        if (strcmp(json_string_value(type), "text"))
            return api_fail(e, 400, "unsupported_content", param,
                            "content parts of type '%s' are not supported (only 'text')", json_string_value(type));
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)part, key, val) {
            if (strcmp(key, "type") && strcmp(key, "text"))
                return api_fail(e, 400, "unknown_field", param, "Unrecognized field '%s' in %s", key, param);
        }
        const json_t *t = json_object_get(part, "text");
        if (!json_is_string(t))
            return api_type_error(e, param, "a text part with a string 'text'", t ? t : json_null());
        if (k > 0) buf_puts(text, "\n"); /* vLLM joins text parts with newlines */
        buf_append(text, json_string_value(t), json_string_length(t));
    }
    return 0;
}

int api_parse_messages(const json_t *v, json_t **out, api_error *e) {
    *out = NULL;
    if (!json_is_array(v)) return api_type_error(e, "messages", "a list of messages", v);
    if (json_array_size(v) == 0)
        return api_fail(e, 400, "invalid_value", "messages", "'messages' must contain at least one message");
    json_t *msgs = json_array();
    size_t i;
    const json_t *m;
    char param[64];
    json_array_foreach(v, i, m) {
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) {
            json_decref(msgs);
            return api_type_error(e, param, "an object", m);
        }
        const json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!json_is_string(role)) {
            json_decref(msgs);
            return role ? api_type_error(e, param, "a string", role)
                        : api_fail(e, 400, "missing_field", param, "'%s' is required", param);
        }
        const char *rs = json_string_value(role);
        const char *mapped = NULL;
        if (!strcmp(rs, "system") || !strcmp(rs, "developer")) mapped = "system";
        else if (!strcmp(rs, "user")) mapped = "user";
        else if (!strcmp(rs, "assistant")) mapped = "assistant";
        else if (!strcmp(rs, "tool")) mapped = "tool";
        if (!mapped) {
            json_decref(msgs);
            if (!strcmp(rs, "function"))
                return api_fail(e, 400, "unsupported_role", param,
                                "messages with role 'function' are not supported (use 'tool')");
            return api_fail(e, 400, "invalid_value", param,
                            "'%s' must be one of 'system', 'developer', 'user', 'assistant', 'tool'; got '%.64s'",
                            param, rs);
        }
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)m, key, val) {
            if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "name")) continue;
            if (api_message_tool_key(mapped, key)) continue;
            if (json_is_null(val) || (!strcmp(key, "tool_calls") && json_array_size(val) == 0)) continue;
            snprintf(param, sizeof param, "messages[%zu].%.32s", i, key);
            json_decref(msgs);
            if (!strcmp(key, "tool_calls") || !strcmp(key, "function_call") || !strcmp(key, "audio"))
                return api_fail(e, 400, "unsupported_field", param, "'%s' is not supported by this server", param);
            return api_fail(e, 400, "unknown_field", param, "Unrecognized field '%s'", param);
        }
        const json_t *name = json_object_get(m, "name");
        if (name && !json_is_null(name) && !json_is_string(name)) {
            snprintf(param, sizeof param, "messages[%zu].name", i);
            json_decref(msgs);
            return api_type_error(e, param, "a string", name);
        }
        const json_t *content = json_object_get(m, "content");
        if (!content) {
            if (strcmp(mapped, "assistant")) {
                snprintf(param, sizeof param, "messages[%zu].content", i);
                json_decref(msgs);
                return api_fail(e, 400, "missing_field", param, "'%s' is required", param);
            }
            content = json_null();
        }
        buf text = {0};
        if (parse_content(content, i, mapped, &text, e)) {
            buf_free(&text);
            json_decref(msgs);
            return -1;
        }
        json_t *c = text.oom ? NULL : json_stringn(text.data ? text.data : "", text.len);
        buf_free(&text);
        if (!c) {
            json_decref(c);
            json_decref(msgs);
            return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        }
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string(mapped));
        json_object_set_new(o, "content", c);
        if (json_is_string(name)) json_object_set(o, "name", (json_t *)name);
        json_array_append_new(msgs, o);
        if (api_message_tool_fields(m, i, mapped, o, e)) {
            json_decref(msgs);
            return -1;
        }
        /* A call without text has content None, as the client sent it. */
        if (json_is_null(content) && json_object_get(o, "tool_calls")) json_object_set_new(o, "content", json_null());
    }
    *out = msgs;
    return 0;
}
