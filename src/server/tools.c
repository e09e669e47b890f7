/* See tools.h. */
#include "server/tools.h"

#include "server/api_json.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

void api_tools_init(api_tools *t) { *t = (api_tools){.parallel = true}; }

void api_tools_free(api_tools *t) {
    json_decref(t->tools);
    api_tools_init(t);
}

static bool valid_name(const char *s, size_t len) {
    if (len == 0 || len > API_TOOL_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Refuses keys of object v outside `allowed` (NULL-terminated). */
static int only_keys(const json_t *v, const char *const *allowed, const char *where, api_error *e) {
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, key);
        if (!ok) return api_fail(e, 400, "unknown_field", where, "Unrecognized field '%.64s' in %s", key, where);
    }
    return 0;
}

static int parse_tool(const json_t *tool, size_t i, const json_t *tools, api_error *e) {
    char where[64];
    snprintf(where, sizeof where, "tools[%zu]", i);
    if (!json_is_object(tool)) return api_type_error(e, where, "an object", tool);
    static const char *const keys[] = {"type", "function", NULL};
    if (only_keys(tool, keys, where, e)) return -1;
    const json_t *type = json_object_get(tool, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
        return api_fail(e, 400, "invalid_value", where, "'%s.type' must be \"function\" (the only tool type)", where);
    const json_t *fn = json_object_get(tool, "function");
    snprintf(where, sizeof where, "tools[%zu].function", i);
    if (!json_is_object(fn)) return api_type_error(e, where, "an object", fn);
    static const char *const fn_keys[] = {"name", "description", "parameters", "strict", NULL};
    if (only_keys(fn, fn_keys, where, e)) return -1;
    const json_t *name = json_object_get(fn, "name");
    snprintf(where, sizeof where, "tools[%zu].function.name", i);
    if (!json_is_string(name)) return api_type_error(e, where, "a string", name);
    if (!valid_name(json_string_value(name), json_string_length(name)))
        return api_fail(e, 400, "invalid_value", where,
                        "'%s' must be 1 to %d letters, digits, '_' or '-'; got '%.80s'", where, API_TOOL_NAME_MAX,
                        json_string_value(name));
    for (size_t k = 0; k < i; k++) {
        const json_t *other = json_object_get(json_object_get(json_array_get(tools, k), "function"), "name");
        if (json_equal(other, name))
            return api_fail(e, 400, "invalid_value", where, "tools[%zu] and tools[%zu] are both named '%s'", k, i,
                            json_string_value(name));
    }
    const json_t *desc = json_object_get(fn, "description");
    snprintf(where, sizeof where, "tools[%zu].function.description", i);
    if (desc && !json_is_null(desc) && !json_is_string(desc)) return api_type_error(e, where, "a string", desc);
    const json_t *params = json_object_get(fn, "parameters");
    snprintf(where, sizeof where, "tools[%zu].function.parameters", i);
    if (params && !json_is_null(params) && !json_is_object(params))
        return api_type_error(e, where, "a JSON schema object", params);
    const json_t *strict = json_object_get(fn, "strict");
    snprintf(where, sizeof where, "tools[%zu].function.strict", i);
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return api_type_error(e, where, "a boolean", strict);
    return 0;
}

int api_parse_tools(const json_t *v, api_tools *t, api_error *e) {
    if (!json_is_array(v)) return api_type_error(e, "tools", "a list of tools", v);
    const size_t n = json_array_size(v);
    if (n == 0) return api_fail(e, 400, "invalid_value", "tools", "'tools' must not be empty (leave it out instead)");
    if (n > API_MAX_TOOLS)
        return api_fail(e, 400, "invalid_value", "tools", "'tools' holds %zu tools; at most %d are allowed", n,
                        API_MAX_TOOLS);
    for (size_t i = 0; i < n; i++)
        if (parse_tool(json_array_get(v, i), i, v, e)) return -1;
    t->tools = json_incref((json_t *)v);
    return 0;
}

int api_parse_tool_choice(const json_t *v, api_tools *t, api_error *e) {
    t->choice_given = true;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "none")) t->choice = TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto")) t->choice = TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required")) t->choice = TOOL_CHOICE_REQUIRED;
        else
            return api_fail(e, 400, "invalid_value", "tool_choice",
                            "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                            "\"function\": {\"name\": ...}}; got \"%.64s\"",
                            s);
        return 0;
    }
    if (!json_is_object(v)) return api_type_error(e, "tool_choice", "a string or an object", v);
    static const char *const keys[] = {"type", "function", NULL};
    if (only_keys(v, keys, "tool_choice", e)) return -1;
    const json_t *type = json_object_get(v, "type"), *fn = json_object_get(v, "function");
    if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
        return api_fail(e, 400, "invalid_value", "tool_choice", "'tool_choice.type' must be \"function\"");
    if (!json_is_object(fn)) return api_type_error(e, "tool_choice.function", "an object", fn);
    static const char *const fn_keys[] = {"name", NULL};
    if (only_keys(fn, fn_keys, "tool_choice.function", e)) return -1;
    const json_t *name = json_object_get(fn, "name");
    if (!json_is_string(name)) return api_type_error(e, "tool_choice.function.name", "a string", name);
    if (!valid_name(json_string_value(name), json_string_length(name)))
        return api_fail(e, 400, "invalid_value", "tool_choice.function.name", "'%.80s' is not a valid function name",
                        json_string_value(name));
    t->choice = TOOL_CHOICE_NAMED;
    snprintf(t->named, sizeof t->named, "%s", json_string_value(name));
    return 0;
}

int api_tools_check(const api_tools *t, api_error *e) {
    if (!t->tools) {
        if (t->choice_given && t->choice != TOOL_CHOICE_NONE)
            return api_fail(e, 400, "invalid_value", "tool_choice",
                            "'tool_choice' is only allowed when 'tools' are specified");
        return 0;
    }
    if (t->choice == TOOL_CHOICE_NAMED) {
        size_t i;
        const json_t *tool;
        json_array_foreach(t->tools, i, tool) {
            const char *name = json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
            if (!strcmp(name, t->named)) return 0;
        }
        return api_fail(e, 400, "invalid_value", "tool_choice",
                        "'tool_choice' names the function '%s', which is not among 'tools'", t->named);
    }
    return 0;
}

bool api_tools_offered(const api_tools *t) { return t->tools && t->choice != TOOL_CHOICE_NONE; }

static int compile_forced(json_t *spec, const char *what, constraint **forced, api_error *e) {
    if (!spec) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    *forced = constraint_compile(CONSTRAINT_TOOL_CALL, spec, NULL);
    json_decref(spec);
    if (!*forced)
        return err_is_oom() ? api_fail(e, 500, "out_of_memory", NULL, "out of memory")
                            : api_fail(e, 400, "invalid_value", "tools",
                                       "the parameters of the tools cannot force a call (tool_choice '%s'): %s", what,
                                       err_get());
    return 0;
}

/* A template without a tool-call format: the generic format, its reply held
 * to {"tool_calls": [...]} (or {"content": ...} with auto) whatever the
 * choice. */
static int resolve_generic(const api_tools *t, tool_format *out, constraint **forced, api_error *e) {
    const bool named = t->choice == TOOL_CHOICE_NAMED;
    const char *what = named ? t->named : t->choice == TOOL_CHOICE_REQUIRED ? "required" : "auto";
    json_t *schema = tool_format_generic_schema(t->tools, named ? t->named : NULL, t->choice == TOOL_CHOICE_AUTO,
                                                t->parallel);
    json_t *spec = schema ? json_pack("{s:s,s:o,s:s}", "prefix", "", "schema", schema, "suffix", "") : NULL;
    if (compile_forced(spec, what, forced, e)) return -1;
    *out = TOOL_FORMAT_GENERIC;
    return 0;
}

int api_tools_resolve(const api_tools *t, tool_format template_format, tool_format *out, constraint **forced,
                      api_error *e) {
    *out = TOOL_FORMAT_NONE;
    *forced = NULL;
    if (!api_tools_offered(t)) return 0;
    if (template_format == TOOL_FORMAT_NONE) return resolve_generic(t, out, forced, e);
    if (t->choice == TOOL_CHOICE_REQUIRED || t->choice == TOOL_CHOICE_NAMED) {
        const char *what = t->choice == TOOL_CHOICE_REQUIRED ? "required" : t->named;
        tool_call_constraint c;
        if (tool_format_call_schema(template_format, t->tools, t->choice == TOOL_CHOICE_NAMED ? t->named : NULL, &c))
            return api_fail(e, 400, "unsupported_field", "tool_choice",
                            "tool_choice '%s' cannot be enforced in the '%s' format, whose calls name the function "
                            "in the markup; name one function instead",
                            what, tool_format_name(template_format));
        json_t *spec = json_pack("{s:s, s:O, s:s}", "prefix", c.prefix, "schema", c.schema, "suffix", c.suffix);
        tool_call_constraint_free(&c);
        if (compile_forced(spec, what, forced, e)) return -1;
    }
    *out = template_format;
    return 0;
}

/* ---- chat history ---- */

bool api_message_tool_key(const char *role, const char *key) {
    return (!strcmp(role, "assistant") && !strcmp(key, "tool_calls")) ||
           (!strcmp(role, "tool") && !strcmp(key, "tool_call_id"));
}

/* One call of an assistant message, checked: {id, type, function: {name,
 * arguments}}, the arguments made a mapping. */
static json_t *parse_history_call(const json_t *call, const char *where, api_error *e) {
    char field[96];
    if (!json_is_object(call)) {
        api_type_error(e, where, "an object", call);
        return NULL;
    }
    static const char *const keys[] = {"id", "type", "function", NULL};
    if (only_keys(call, keys, where, e)) return NULL;
    const json_t *id = json_object_get(call, "id"), *type = json_object_get(call, "type"),
                 *fn = json_object_get(call, "function");
    snprintf(field, sizeof field, "%s.id", where);
    if (!json_is_string(id)) {
        api_type_error(e, field, "a string", id);
        return NULL;
    }
    if (type && !json_is_null(type) && (!json_is_string(type) || strcmp(json_string_value(type), "function"))) {
        api_fail(e, 400, "invalid_value", where, "'%s.type' must be \"function\"", where);
        return NULL;
    }
    snprintf(field, sizeof field, "%s.function", where);
    if (!json_is_object(fn)) {
        api_type_error(e, field, "an object", fn);
        return NULL;
    }
    static const char *const fn_keys[] = {"name", "arguments", NULL};
    if (only_keys(fn, fn_keys, field, e)) return NULL;
    const json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
    snprintf(field, sizeof field, "%s.function.name", where);
    if (!json_is_string(name)) {
        api_type_error(e, field, "a string", name);
        return NULL;
    }
    snprintf(field, sizeof field, "%s.function.arguments", where);
    json_t *mapping;
    if (json_is_string(args)) {
        json_error_t err;
        mapping = json_loadb(json_string_value(args), json_string_length(args), 0, &err);
        if (!json_is_object(mapping)) {
            json_decref(mapping);
            api_fail(e, 400, "invalid_value", field, "'%s' must be a JSON object in a string: %s", field,
                     err.text[0] ? err.text : "not an object");
            return NULL;
        }
    } else if (json_is_object(args)) {
        mapping = json_incref((json_t *)args);
    } else {
        api_type_error(e, field, "a string holding a JSON object", args);
        return NULL;
    }
    /* The client's objects, in the client's key order (templates that write
     * `tool_call.function | tojson` show it), with the arguments replaced. */
    json_t *out_fn = json_deep_copy(fn), *out = json_deep_copy(call);
    json_object_set_new(out_fn, "arguments", mapping);
    json_object_set_new(out, "function", out_fn);
    return out;
}

int api_message_tool_fields(const json_t *m, size_t i, const char *role, json_t *out, api_error *e) {
    char where[64];
    if (!strcmp(role, "tool")) {
        const json_t *id = json_object_get(m, "tool_call_id");
        snprintf(where, sizeof where, "messages[%zu].tool_call_id", i);
        if (!id || json_is_null(id))
            return api_fail(e, 400, "missing_field", where, "'%s' is required in a message with role 'tool'", where);
        if (!json_is_string(id)) return api_type_error(e, where, "a string", id);
        json_object_set(out, "tool_call_id", (json_t *)id);
        return 0;
    }
    const json_t *calls = json_object_get(m, "tool_calls");
    if (strcmp(role, "assistant") || !calls || json_is_null(calls)) return 0;
    snprintf(where, sizeof where, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls)) return api_type_error(e, where, "a list of tool calls", calls);
    if (json_array_size(calls) == 0) return 0;
    json_t *list = json_array();
    size_t k;
    const json_t *call;
    json_array_foreach(calls, k, call) {
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu]", i, k);
        json_t *c = parse_history_call(call, where, e);
        if (!c) {
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, c);
    }
    json_object_set_new(out, "tool_calls", list);
    return 0;
}
