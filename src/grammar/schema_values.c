/* See schema_values.h. Each assertion applies only to values of its own
 * kind (a pattern to strings, a minimum to numbers), as JSON Schema reads
 * them. A pattern that is plain text (Azure's "^PowerShell@2$") is compared
 * as text; any other is compiled by regex.c and run over the string. */
#include "grammar/schema_values.h"

#include "grammar/grammar_match.h"
#include "grammar/regex.h"
#include "util/error.h"
#include "util/utf8.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Whether a pattern starts with ^ and ends with an unescaped $. */
static void anchors_of(const char *p, size_t n, bool *start, bool *end) {
    *start = p[0] == '^';
    *end = n > (size_t)*start && p[n - 1] == '$' && (n < 2 || p[n - 2] != '\\');
}

char *schema_pattern_anchored(const char *p) {
    const size_t n = strlen(p);
    bool start, end;
    anchors_of(p, n, &start, &end);
    const size_t len = n - start - end;
    char *out = malloc(len + 8);
    if (!out) {
        err_oom("JSON schema: out of memory");
        return NULL;
    }
    size_t at = 0;
    if (!start) out[at++] = '.', out[at++] = '*';
    out[at++] = '(';
    memcpy(out + at, p + start, len);
    at += len;
    out[at++] = ')';
    if (!end) out[at++] = '.', out[at++] = '*';
    out[at] = '\0';
    return out;
}

/* A pattern without regex syntax between its anchors. */
static bool plain_text(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strchr("\\.[](){}*+?|^$", p[i])) return false;
    return true;
}

/* A pattern's regex, compiled at its first use over a list of values. */
typedef struct {
    grammar *g;
    bool unusable; /* outside regex.c's subset (lookaround, ...): not applied */
} pattern_cache;

static int pattern_matches(const char *pattern, const char *s, size_t len, pattern_cache *pc) {
    const size_t n = strlen(pattern);
    bool start, end;
    anchors_of(pattern, n, &start, &end);
    const char *text = pattern + start;
    const size_t tn = n - start - end;
    if (plain_text(text, tn)) {
        if (tn > len) return 0;
        if (start && end) return tn == len && !memcmp(text, s, len);
        if (start) return !memcmp(text, s, tn);
        if (end) return !memcmp(text, s + len - tn, tn);
        for (size_t i = 0; i + tn <= len; i++)
            if (!memcmp(text, s + i, tn)) return 1;
        return 0;
    }
    /* A pattern the regex subset cannot hold filters nothing: the values
     * stand, as they did before the filter existed (it is not enforced). */
    if (!pc->g && !pc->unusable) {
        char *anchored = schema_pattern_anchored(pattern);
        pc->g = anchored ? grammar_from_regex(anchored) : NULL;
        free(anchored);
        if (!pc->g && err_is_oom()) return -1;
        if (!pc->g) err_clear(), pc->unusable = true;
    }
    if (pc->unusable) return 1;
    gstate st = {0};
    gscratch w = {0};
    int rc = gstate_init(&st, pc->g, &w);
    if (rc == 0) rc = gstate_advance_bytes(pc->g, &st, (const unsigned char *)s, len, &w);
    const int matched = rc == 1 ? st.accept : rc < 0 ? (err_is_oom() ? -1 : (err_clear(), 1)) : 0;
    gstate_free(&st), gscratch_free(&w);
    return matched;
}

static bool is_whole(json_t *v) {
    if (json_is_integer(v)) return true;
    const double d = json_real_value(v);
    return json_is_real(v) && isfinite(d) && floor(d) == d;
}

static bool type_admits(const char *type, json_t *v) {
    if (!strcmp(type, "integer")) return is_whole(v);
    if (!strcmp(type, "number")) return json_is_number(v);
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "null")) return json_is_null(v);
    if (!strcmp(type, "object")) return json_is_object(v);
    if (!strcmp(type, "array")) return json_is_array(v);
    return !strcmp(type, "any");
}

static bool types_admit(json_t *schema, json_t *v) {
    json_t *type = json_object_get(schema, "type");
    if (!type || (json_is_null(v) && json_is_true(json_object_get(schema, "nullable"))))
        return true;
    if (json_is_string(type)) return type_admits(json_string_value(type), v);
    if (!json_is_array(type)) return true; /* malformed: json_schema.c says so */
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t) if (!json_is_string(t) ||
                                       type_admits(json_string_value(t), v)) return true;
    return false; /* a draft 3 schema inside the list admits the value above: not checked */
}

static int string_admits(json_t *schema, json_t *v, pattern_cache *pc) {
    const char *s = json_string_value(v);
    const size_t len = json_string_length(v), chars = utf8_count(s, len);
    json_t *min = json_object_get(schema, "minLength"), *max = json_object_get(schema, "maxLength");
    if (json_is_number(min) && (double)chars < json_number_value(min)) return 0;
    if (json_is_number(max) && (double)chars > json_number_value(max)) return 0;
    const char *pattern = json_string_value(json_object_get(schema, "pattern"));
    return pattern ? pattern_matches(pattern, s, len, pc) : 1;
}

static bool bound_admits(json_t *schema, const char *key, const char *exclusive_key, double x,
                         int sign) {
    json_t *b = json_object_get(schema, key), *ex = json_object_get(schema, exclusive_key);
    /* sign 1: a lower bound (x >= b), -1: an upper one */
    if (json_is_number(b)) {
        const double d = sign * (x - json_number_value(b));
        if (d < 0 || (json_is_true(ex) && d == 0)) return false; /* draft 4's boolean exclusive* */
    }
    if (json_is_number(ex) && sign * (x - json_number_value(ex)) <= 0) return false;
    return true;
}

static bool number_admits(json_t *schema, json_t *v) {
    const double x = json_number_value(v);
    if (!bound_admits(schema, "minimum", "exclusiveMinimum", x, 1) ||
        !bound_admits(schema, "maximum", "exclusiveMaximum", x, -1))
        return false;
    json_t *m = json_object_get(schema, "multipleOf");
    if (json_is_integer(m) && json_integer_value(m) > 0 && json_is_integer(v))
        return json_integer_value(v) % json_integer_value(m) == 0;
    if (json_is_number(m) && json_number_value(m) > 0) { /* as jsonschema: the quotient is whole */
        const double q = x / json_number_value(m);
        return !isfinite(q) || floor(q) == q;
    }
    return true;
}

static int admits(json_t *schema, json_t *value, pattern_cache *pc) {
    if (json_is_boolean(schema)) return json_is_true(schema);
    if (!json_is_object(schema)) return 1;
    if (!types_admit(schema, value)) return 0;
    if (json_is_string(value)) return string_admits(schema, value, pc);
    if (json_is_number(value)) return number_admits(schema, value);
    return 1;
}

int schema_admits_value(json_t *schema, json_t *value) {
    pattern_cache pc = {0};
    const int ok = admits(schema, value, &pc);
    grammar_free(pc.g);
    return ok;
}

json_t *schema_admitted_values(json_t *schema) {
    json_t *list = json_object_get(schema, "enum"), *one = json_object_get(schema, "const");
    if (!list && !one) return NULL;
    json_t *values = list ? json_incref(list) : json_pack("[O]", one);
    json_t *out = json_array();
    pattern_cache pc = {0};
    int ok = values && out ? 1 : err_oom("JSON schema: out of memory");
    size_t i;
    json_t *v;
    /* A malformed enum (not a list) keeps nothing: json_schema.c says so. */
    json_array_foreach(values, i, v) {
        if (ok < 0) break;
        ok = admits(schema, v, &pc);
        if (ok > 0 && json_array_append(out, v)) ok = err_oom("JSON schema: out of memory");
    }
    grammar_free(pc.g);
    json_decref(values);
    if (ok < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}
