/* See tool_format.h. Detection looks for the literal markers a template
 * writes when it renders a past call or tells the model how to call; the
 * order matters where templates spell several (functionary v3.1 also
 * mentions <|python_tag|>, Qwen3-Coder also <tool_call>). */
#include "chat/tool_format.h"

#include <stdio.h>
#include <string.h>

static bool has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

tool_format tool_format_detect(const char *src) {
    if (!src || !has(src, "tool")) return TOOL_FORMAT_NONE;
    /* Arguments written as XML elements, not as a JSON object. */
    if (has(src, "<parameter=") || has(src, "<arg_key>")) return TOOL_FORMAT_NONE;
    if (has(src, "<|channel|>") && (has(src, "to=functions.") || has(src, "assistant to=")))
        return TOOL_FORMAT_HARMONY;
    if (has(src, "<tool_call>")) return TOOL_FORMAT_HERMES;
    if (has(src, "[TOOL_CALLS]")) return has(src, "[ARGS]") ? TOOL_FORMAT_MISTRAL_ARGS : TOOL_FORMAT_MISTRAL;
    if (has(src, "<function=")) return TOOL_FORMAT_FUNCTIONARY;
    if (has(src, "\"parameters\": dictionary of argument name")) return TOOL_FORMAT_LLAMA3_JSON;
    return TOOL_FORMAT_NONE;
}

static const char *const k_names[] = {
    [TOOL_FORMAT_NONE] = "none",
    [TOOL_FORMAT_HERMES] = "hermes",
    [TOOL_FORMAT_LLAMA3_JSON] = "llama3_json",
    [TOOL_FORMAT_MISTRAL] = "mistral",
    [TOOL_FORMAT_MISTRAL_ARGS] = "mistral_args",
    [TOOL_FORMAT_FUNCTIONARY] = "functionary",
    [TOOL_FORMAT_GENERIC] = "generic",
    [TOOL_FORMAT_HARMONY] = "harmony",
};

const char *tool_format_name(tool_format f) {
    return (size_t)f < sizeof k_names / sizeof *k_names ? k_names[f] : "none";
}

int tool_format_from_name(const char *name) {
    for (size_t i = 0; i < sizeof k_names / sizeof *k_names; i++)
        if (!strcmp(k_names[i], name)) return (int)i;
    return -1;
}

bool tool_format_needs_special_text(tool_format f) {
    return f == TOOL_FORMAT_MISTRAL || f == TOOL_FORMAT_MISTRAL_ARGS || f == TOOL_FORMAT_LLAMA3_JSON ||
           f == TOOL_FORMAT_HARMONY;
}

void tool_format_call_id(tool_format f, const unsigned char random[16], char *out, size_t cap) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const bool mistral = f == TOOL_FORMAT_MISTRAL || f == TOOL_FORMAT_MISTRAL_ARGS;
    const size_t n = mistral ? 9 : 24, skip = mistral ? 0 : 5;
    if (cap < skip + n + 1) {
        if (cap) out[0] = '\0';
        return;
    }
    if (!mistral) memcpy(out, "call_", 5);
    for (size_t i = 0; i < n; i++) out[skip + i] = alnum[(random[i % 16] + 131u * (unsigned)(i / 16)) % 62];
    out[skip + n] = '\0';
}

/* ---- constraints for tool_choice required / named ---- */

/* A tool's parameters schema; any object when it has none, as OpenAI
 * treats such a tool. */
static json_t *params_schema(const json_t *function) {
    const json_t *params = json_object_get(function, "parameters");
    return params && json_is_object(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
}

/* For one tool: {"type": "object", "properties": {"name": {"const": name},
 * ARGS_KEY: parameters}, "required": [...]}; with args_key NULL (formats
 * that write the name outside the JSON) the parameters alone. */
static json_t *call_schema(const json_t *function, const char *args_key) {
    if (!args_key) return params_schema(function);
    return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s,s], s:b}", "type", "object", "properties", "name", "const",
                     json_object_get(function, "name"), args_key, params_schema(function), "required", "name",
                     args_key, "additionalProperties", 0);
}

/* anyOf over the allowed tools (one schema when only one is allowed). */
static json_t *calls_any_of(const json_t *tools, const char *only, const char *args_key) {
    json_t *alts = json_array();
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || (only && strcmp(name, only))) continue;
        json_array_append_new(alts, call_schema(fn, args_key));
    }
    if (json_array_size(alts) == 1) {
        json_t *one = json_incref(json_array_get(alts, 0));
        json_decref(alts);
        return one;
    }
    return json_pack("{s:o}", "anyOf", alts);
}

/* {"tool_calls": [one or more calls]} (at most one when !parallel). */
static json_t *generic_calls_schema(const json_t *tools, const char *only, bool parallel) {
    json_t *list = json_pack("{s:s,s:o,s:i}", "type", "array", "items", calls_any_of(tools, only, "arguments"),
                             "minItems", 1);
    if (!parallel) json_object_set_new(list, "maxItems", json_integer(1));
    return json_pack("{s:s,s:{s:o},s:[s],s:b}", "type", "object", "properties", "tool_calls", list, "required",
                     "tool_calls", "additionalProperties", 0);
}

int tool_format_call_schema(tool_format f, const json_t *tools, const char *only, tool_call_constraint *out) {
    *out = (tool_call_constraint){0};
    switch (f) {
    case TOOL_FORMAT_HERMES:
        snprintf(out->prefix, sizeof out->prefix, "<tool_call>\n");
        snprintf(out->suffix, sizeof out->suffix, "\n</tool_call>");
        out->schema = calls_any_of(tools, only, "arguments");
        return 0;
    case TOOL_FORMAT_LLAMA3_JSON:
        out->schema = calls_any_of(tools, only, "parameters");
        return 0;
    case TOOL_FORMAT_MISTRAL:
        snprintf(out->prefix, sizeof out->prefix, "[TOOL_CALLS]");
        out->schema = json_pack("{s:s,s:o,s:i}", "type", "array", "items", calls_any_of(tools, only, "arguments"),
                                "minItems", 1);
        return 0;
    case TOOL_FORMAT_MISTRAL_ARGS:
    case TOOL_FORMAT_FUNCTIONARY:
    case TOOL_FORMAT_HARMONY:
        /* The name sits in the markup: with a named choice it is a fixed
         * prefix; with any tool the prefix is an alternation, which only a
         * grammar (not one JSON schema) can say, so the schema covers the
         * arguments and the caller adds the names. */
        if (only) {
            const char *form = f == TOOL_FORMAT_FUNCTIONARY ? "<function=%.64s>"
                               : f == TOOL_FORMAT_HARMONY   ? "<|channel|>commentary to=functions.%.40s "
                                                              "<|constrain|>json<|message|>"
                                                            : "[TOOL_CALLS]%.64s[ARGS]";
            snprintf(out->prefix, sizeof out->prefix, form, only);
            snprintf(out->suffix, sizeof out->suffix, "%s", f == TOOL_FORMAT_FUNCTIONARY ? "</function>" : "");
            out->schema = calls_any_of(tools, only, NULL);
            return 0;
        }
        return -1;
    case TOOL_FORMAT_GENERIC:
        out->schema = generic_calls_schema(tools, only, true);
        return 0;
    case TOOL_FORMAT_NONE: break;
    }
    return -1;
}

json_t *tool_format_generic_schema(const json_t *tools, const char *only, bool allow_content, bool parallel) {
    json_t *calls = generic_calls_schema(tools, only, parallel);
    if (!allow_content) return calls;
    return json_pack("{s:[o,{s:s,s:{s:{s:s}},s:[s],s:b}]}", "anyOf", calls, "type", "object", "properties", "content",
                     "type", "string", "required", "content", "additionalProperties", 0);
}

void tool_call_constraint_free(tool_call_constraint *c) {
    json_decref(c->schema);
    *c = (tool_call_constraint){0};
}
