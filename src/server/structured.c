/* See structured.h. */
#include "server/structured.h"

#include "util/error.h"

#include <stdio.h>
#include <string.h>

static const char *const FIELDS[] = {"response_format", "structured_outputs", "guided_json", "guided_regex",
                                     "guided_choice", "guided_grammar", "guided_decoding_backend", "grammar",
                                     "json_schema", NULL};

bool structured_is_field(const char *name) {
    for (int i = 0; FIELDS[i]; i++)
        if (!strcmp(FIELDS[i], name)) return true;
    return false;
}

/* What one field asks for, before compiling. */
typedef struct {
    const char *field; /* for errors */
    constraint_kind kind;
    json_t *spec;      /* owned */
    bool any_whitespace;
} wanted;

static int type_fail(api_error *e, const char *field, const char *want) {
    return api_fail(e, 400, "invalid_type", field, "'%s' must be %s", field, want);
}

static int want(wanted *w, const char *field, constraint_kind kind, json_t *spec, api_error *e) {
    if (w->field) {
        json_decref(spec);
        return api_fail(e, 400, "invalid_value", field,
                        "'%s' and '%s' both constrain the output; give only one", w->field, field);
    }
    w->field = field, w->kind = kind, w->spec = spec;
    return 0;
}

/* A schema given as an object or as JSON text (vLLM accepts both). */
static int schema_value(const json_t *v, const char *field, json_t **out, api_error *e) {
    if (json_is_object(v) || json_is_boolean(v)) {
        *out = json_incref((json_t *)v);
        return 0;
    }
    if (!json_is_string(v)) return type_fail(e, field, "a JSON schema (an object or its JSON text)");
    json_error_t je;
    *out = json_loads(json_string_value(v), JSON_DECODE_ANY, &je);
    if (!*out) return api_fail(e, 400, "invalid_value", field, "'%s': malformed JSON at position %d: %s", field,
                               je.position, je.text);
    return 0;
}

static int response_format(const json_t *v, wanted *w, api_error *e) {
    if (!json_is_object(v)) return type_fail(e, "response_format", "an object");
    const char *type = json_string_value(json_object_get(v, "type"));
    if (!type) return api_fail(e, 400, "invalid_value", "response_format", "'response_format' needs a string 'type'");
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) return want(w, "response_format", CONSTRAINT_JSON_OBJECT, NULL, e);
    if (strcmp(type, "json_schema"))
        return api_fail(e, 400, "invalid_value", "response_format",
                        "'response_format' type '%.32s' is not one of 'text', 'json_object', 'json_schema'", type);
    const json_t *js = json_object_get(v, "json_schema");
    if (!json_is_object(js))
        return api_fail(e, 400, "invalid_value", "response_format.json_schema",
                        "'response_format' of type 'json_schema' needs a 'json_schema' object with a 'schema'");
    const json_t *schema = json_object_get(js, "schema");
    if (!schema) return api_fail(e, 400, "missing_field", "response_format.json_schema.schema",
                                 "'response_format.json_schema' needs a 'schema'");
    json_t *s;
    if (schema_value(schema, "response_format.json_schema.schema", &s, e)) return -1;
    return want(w, "response_format", CONSTRAINT_JSON_SCHEMA, s, e);
}

static int string_spec(const json_t *v, const char *field, constraint_kind kind, wanted *w, api_error *e) {
    if (!json_is_string(v)) return type_fail(e, field, "a string");
    return want(w, field, kind, json_incref((json_t *)v), e);
}

static int choice_spec(const json_t *v, const char *field, wanted *w, api_error *e) {
    if (!json_is_array(v) || json_array_size(v) == 0) return type_fail(e, field, "a non-empty array of strings");
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) if (!json_is_string(x)) return type_fail(e, field, "a non-empty array of strings");
    return want(w, field, CONSTRAINT_CHOICE, json_incref((json_t *)v), e);
}

static int structured_outputs(const json_t *v, wanted *w, api_error *e) {
    if (!json_is_object(v)) return type_fail(e, "structured_outputs", "an object");
    const char *k;
    const json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        char field[96];
        snprintf(field, sizeof field, "structured_outputs.%.64s", k);
        if (json_is_null(x)) continue;
        int rc = 0;
        if (!strcmp(k, "json")) {
            json_t *s;
            rc = schema_value(x, field, &s, e) || want(w, "structured_outputs.json", CONSTRAINT_JSON_SCHEMA, s, e);
        } else if (!strcmp(k, "regex")) {
            rc = string_spec(x, "structured_outputs.regex", CONSTRAINT_REGEX, w, e);
        } else if (!strcmp(k, "grammar")) {
            rc = string_spec(x, "structured_outputs.grammar", CONSTRAINT_GBNF, w, e);
        } else if (!strcmp(k, "choice")) {
            rc = choice_spec(x, "structured_outputs.choice", w, e);
        } else if (!strcmp(k, "json_object")) {
            if (!json_is_boolean(x)) return type_fail(e, field, "a boolean");
            if (json_is_true(x)) rc = want(w, "structured_outputs.json_object", CONSTRAINT_JSON_OBJECT, NULL, e);
        } else if (!strcmp(k, "disable_any_whitespace")) {
            if (!json_is_boolean(x)) return type_fail(e, field, "a boolean");
            w->any_whitespace = json_is_false(x);
        } else {
            return api_fail(e, 400, "unknown_field", field,
                            "'%s' is not supported (known: json, regex, choice, grammar, json_object, "
                            "disable_any_whitespace)", field);
        }
        if (rc) return -1;
    }
    return 0;
}

static int read_field(const char *k, const json_t *v, wanted *w, api_error *e) {
    if (!strcmp(k, "response_format")) return response_format(v, w, e);
    if (!strcmp(k, "structured_outputs")) return structured_outputs(v, w, e);
    if (!strcmp(k, "guided_json") || !strcmp(k, "json_schema")) {
        json_t *s;
        return schema_value(v, k, &s, e) || want(w, k, CONSTRAINT_JSON_SCHEMA, s, e) ? -1 : 0;
    }
    if (!strcmp(k, "guided_regex")) return string_spec(v, k, CONSTRAINT_REGEX, w, e);
    if (!strcmp(k, "guided_grammar") || !strcmp(k, "grammar")) return string_spec(v, k, CONSTRAINT_GBNF, w, e);
    if (!strcmp(k, "guided_choice")) return choice_spec(v, k, w, e);
    if (!strcmp(k, "guided_decoding_backend")) /* which library vLLM uses: there is one here */
        return json_is_string(v) ? 0 : type_fail(e, k, "a string");
    return 0;
}

int structured_parse(const json_t *body, constraint **out, api_error *e) {
    *out = NULL;
    wanted w = {0};
    for (int i = 0; FIELDS[i]; i++) { /* a fixed order: the same error whatever the key order */
        const json_t *v = json_object_get(body, FIELDS[i]);
        if (!v || json_is_null(v)) continue;
        if (read_field(FIELDS[i], v, &w, e)) {
            json_decref(w.spec);
            return -1;
        }
    }
    if (!w.field) return 0;
    const json_schema_options opt = {.any_whitespace = w.any_whitespace};
    *out = constraint_compile(w.kind, w.spec, &opt);
    json_decref(w.spec);
    if (*out) return 0;
    if (err_is_oom()) return api_fail(e, 500, "server_error", w.field, "'%s': %s", w.field, err_get());
    return api_fail(e, 400, "invalid_value", w.field, "'%s': %s", w.field, err_get());
}
