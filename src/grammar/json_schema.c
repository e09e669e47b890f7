/* JSON Schema to grammar. Covered:
 * The grammar is XGrammar's for the same schema where XGrammar covers it
 * (same language, so the same token masks: tests/integration/
 * test_grammar_masks.py checks it):
 *   type (one or a list), enum, const, anyOf, oneOf (as anyOf: the grammar
 *   cannot exclude a value that two branches both match), $ref within the
 *   schema ("#", "#/$defs/NAME", any "#/json/pointer", "#anchor";
 *   recursion allowed), $recursiveRef and $dynamicRef, booleans as schemas;
 *   allOf, a $ref with assertions beside it, if/then/else and not are first
 *   rewritten into one schema by schema_merge.c;
 *   objects: properties (generated in their listed order), required (a
 *   required name "properties" lacks takes any value, after the others),
 *   additionalProperties (false, true or a schema; absent means false, as
 *   XGrammar's strict mode and OpenAI's strict schemas; unevaluatedProperties
 *   in its place), patternProperties and propertyNames (the keys of the
 *   additional ones), minProperties and maxProperties (counted);
 *   arrays: items, prefixItems, draft 4 tuples (items as a list,
 *   additionalItems), minItems, maxItems;
 *   strings: minLength, maxLength, pattern (a regex, regex.c; searched as
 *   JSON Schema says unless anchored with ^...$), the formats format_regex
 *   lists (practical shapes, not the RFCs; any other format is an
 *   annotation, as 2020-12 reads formats);
 *   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum exactly
 *   (a digit-range grammar; draft 4's boolean exclusive* too); numbers: the
 *   same bounds when they are whole values, exactly, in plain decimals
 *   (fractional bounds are refused).
 * Annotations (title, description, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly, ...) and keywords of no JSON
 * Schema vocabulary (a vendor's own, "x-...") are ignored, as the spec says.
 * Assertions a grammar cannot hold (uniqueItems, contains, dependentRequired,
 * dependentSchemas, dependencies, multipleOf, lengths beside a pattern or a
 * format) compile and are not enforced, as in XGrammar; docs/tools-and-
 * structured-output.md lists them for users. */
#include "grammar/json_schema.h"

#include "grammar/regex.h"
#include "grammar/schema_merge.h"
#include "grammar/schema_values.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SCHEMA_DEPTH 64

/* A rule whose body is compiled after the rule exists (finish_refs): a
 * reference, or a schema rewritten by schema_flatten (both may recur). */
typedef struct {
    char *ref;      /* the reference, or NULL for a rewritten schema */
    json_t *source; /* the schema object rewritten (held, so its address stays unique) */
    json_t *flat;   /* what it was rewritten into */
    char *shape;    /* the rewritten schema's text without its annotations (schema_shape) */
    uint64_t shape_hash;
    char *where;    /* the rewritten schema's place, for messages */
    int rule;
} ref_rule;

typedef struct {
    grammar_builder *b;
    json_t *root;
    bool any_ws;
    int r_ws, r_string, r_char, r_number, r_integer, r_value, r_object, r_array;
    ref_rule *refs;
    int n_refs, cap_refs;
    char path[512];
    int depth;
    int never_budget; /* schemas matches_nothing may still flatten */
} js_ctx;

static int js_fail(js_ctx *c, const char *fmt, const char *what) {
    return err_set(fmt, what, c->path[0] ? c->path : "#");
}

static int push_path(js_ctx *c, const char *seg, size_t *saved) {
    *saved = strlen(c->path);
    if (!*saved) strcpy(c->path, "#");
    const size_t at = strlen(c->path);
    snprintf(c->path + at, sizeof c->path - at, "/%s", seg);
    if (++c->depth > MAX_SCHEMA_DEPTH) return err_set("JSON schema nested too deeply at %s", c->path);
    return 0;
}

static void pop_path(js_ctx *c, size_t saved) {
    c->path[saved] = 0;
    c->depth--;
}

static int lit(js_ctx *c, const char *s) { return gb_push_literal(c->b, s, strlen(s)); }

/* ---- shared rules ---- */

static int ws(js_ctx *c) {
    if (!c->any_ws) return 0;
    if (c->r_ws < 0) {
        const int r = gb_fresh_rule(c->b);
        if (r < 0) return -1;
        byte_set s = {{0}};
        byte_set_add_range(&s, ' ', ' '), byte_set_add_range(&s, '\t', '\n'), byte_set_add_range(&s, '\r', '\r');
        if (gb_alt_begin(c->b, r) || gb_push_set(c->b, &s) || gb_repeat_since(c->b, 0, 0, -1) || gb_alt_end(c->b))
            return -1;
        c->r_ws = r;
    }
    return gb_push_rule(c->b, c->r_ws);
}

static int item_sep(js_ctx *c) { return c->any_ws ? ws(c) || lit(c, ",") || ws(c) : lit(c, ", "); }
static int key_sep(js_ctx *c) { return c->any_ws ? ws(c) || lit(c, ":") || ws(c) : lit(c, ": "); }

/* A rule from GBNF-like text is overkill here; rules are built by hand. */
static int regex_rule(js_ctx *c, const char *re) {
    const int r = regex_to_rule(c->b, re);
    if (r < 0) return err_prefix("JSON schema at %s: ", c->path[0] ? c->path : "#");
    return r;
}

/* One character of a JSON string (unescaped or an escape). */
static int string_char_rule(js_ctx *c) {
    if (c->r_char < 0) {
        const int r = regex_rule(c, "[^\"\\\\\\x00-\\x1f]|\\\\([\"\\\\/bfnrt]|u[0-9a-fA-F]{4})");
        if (r < 0) return -1;
        c->r_char = r;
    }
    return c->r_char;
}

static int string_rule(js_ctx *c) {
    if (c->r_string < 0) {
        const int ch = string_char_rule(c), r = gb_fresh_rule(c->b);
        if (ch < 0 || r < 0) return -1;
        if (gb_alt_begin(c->b, r) || lit(c, "\"") || gb_push_rule(c->b, ch) || gb_repeat_since(c->b, 1, 0, -1) ||
            lit(c, "\"") || gb_alt_end(c->b))
            return -1;
        c->r_string = r;
    }
    return c->r_string;
}

static int number_rule(js_ctx *c) {
    if (c->r_number < 0 && (c->r_number = regex_rule(c, "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")) < 0)
        return -1;
    return c->r_number;
}

static int integer_rule(js_ctx *c) {
    if (c->r_integer < 0 && (c->r_integer = regex_rule(c, "0|-?[1-9][0-9]*")) < 0) return -1;
    return c->r_integer;
}

static int value_rule(js_ctx *c);

/* "{" (key: value (, key: value)*)? "}" with any keys, or "[" values "]". */
static int any_container_rule(js_ctx *c, bool object) {
    int *slot = object ? &c->r_object : &c->r_array;
    if (*slot >= 0) return *slot;
    const int r = gb_fresh_rule(c->b), v = value_rule(c), k = string_rule(c);
    if (r < 0 || v < 0 || k < 0) return -1;
    *slot = r;
    if (gb_alt_begin(c->b, r) || lit(c, object ? "{" : "[") || ws(c)) return -1;
    const size_t mark_opt = gb_mark(c->b);
    if (object && (gb_push_rule(c->b, k) || key_sep(c))) return -1;
    if (gb_push_rule(c->b, v)) return -1;
    const size_t mark_rep = gb_mark(c->b);
    if (item_sep(c)) return -1;
    if (object && (gb_push_rule(c->b, k) || key_sep(c))) return -1;
    if (gb_push_rule(c->b, v) || gb_repeat_since(c->b, mark_rep, 0, -1) || gb_repeat_since(c->b, mark_opt, 0, 1) ||
        ws(c) || lit(c, object ? "}" : "]") || gb_alt_end(c->b))
        return -1;
    return r;
}

static int value_rule(js_ctx *c) {
    if (c->r_value >= 0) return c->r_value;
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    c->r_value = r;
    const int s = string_rule(c), n = number_rule(c), o = any_container_rule(c, true), a = any_container_rule(c, false);
    if (s < 0 || n < 0 || o < 0 || a < 0) return -1;
    const int parts[] = {o, a, s, n};
    for (int i = 0; i < 4; i++)
        if (gb_alt_begin(c->b, r) || gb_push_rule(c->b, parts[i]) || gb_alt_end(c->b)) return -1;
    const char *words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++)
        if (gb_alt_begin(c->b, r) || lit(c, words[i]) || gb_alt_end(c->b)) return -1;
    return r;
}

/* ---- keyword checks ---- */

static bool is_annotation(const char *k) {
    static const char *const ann[] = {"title", "description", "default", "examples", "$schema", "$id", "id",
                                      "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                      "markdownDescription", "deprecationMessage", "errorMessage",
                                      "contentMediaType", "contentEncoding", "example", "enumDescriptions",
                                      "markdownEnumDescriptions", "$anchor", "strict", "name", "$vocabulary",
                                      "$dynamicAnchor", "$recursiveAnchor", "contentSchema", NULL};
    if (!strncmp(k, "x-", 2)) return true;
    for (int i = 0; ann[i]; i++)
        if (!strcmp(k, ann[i])) return true;
    return false;
}

static bool in_list(const char *k, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

static const char *const GENERIC_KEYS[] = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable",
                                           "not", "if", "then", "else", "$recursiveRef", "$dynamicRef", NULL};
static const char *const OBJECT_KEYS[] = {"properties", "required", "additionalProperties", "patternProperties",
                                          "propertyNames", "minProperties", "maxProperties", "unevaluatedProperties",
                                          "dependentRequired", "dependentSchemas", "dependencies", NULL};
static const char *const ARRAY_KEYS[] = {"items", "prefixItems", "minItems", "maxItems", "additionalItems",
                                         "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
                                         NULL};
static const char *const STRING_KEYS[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const NUMBER_KEYS[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                                          NULL};

/* A keyword of JSON Schema's own (assertion or annotation). */
static bool is_schema_keyword(const char *k) {
    return (is_annotation(k) && strncmp(k, "x-", 2)) || in_list(k, GENERIC_KEYS) || in_list(k, OBJECT_KEYS) ||
           in_list(k, ARRAY_KEYS) || in_list(k, STRING_KEYS) || in_list(k, NUMBER_KEYS);
}

/* Whether schema_flatten must rewrite a schema before it compiles: allOf,
 * if/then/else, not, or a reference or anyOf/oneOf with assertions beside
 * it (a "type" and "properties" beside a oneOf apply to every choice). */
static bool needs_flatten(json_t *schema) {
    if (json_object_get(schema, "allOf") || json_object_get(schema, "if") || json_object_get(schema, "not"))
        return true;
    const bool ref = schema_ref_of(schema) != NULL,
               choice = json_object_get(schema, "anyOf") || json_object_get(schema, "oneOf");
    if (!ref && !choice) return false;
    const char *k;
    json_t *v;
    json_object_foreach(schema, k, v) {
        if (!strcmp(k, "$ref") || !strcmp(k, "$recursiveRef") || !strcmp(k, "$dynamicRef") || !strcmp(k, "anyOf") ||
            !strcmp(k, "oneOf") || is_annotation(k) || !is_schema_keyword(k))
            continue;
        return true;
    }
    return false;
}

/* Whether a schema matches no value: false, or one that schema_flatten
 * reduces to false ("not": {}, allOf branches with no type in common), or
 * an object with a required property of such a schema (an if/then choice
 * whose discriminator contradicts the one around it), or an anyOf of such
 * choices only; -1 on error. An anyOf leaves such a choice out, an object
 * such a property. */
static int never_at(js_ctx *c, json_t *v, int prop_depth, int choice_depth) {
    if (json_is_false(v)) return 1;
    if (!json_is_object(v) || c->never_budget <= 0) return 0; /* past the budget: assume it can match */
    c->never_budget--;
    /* A bare reference: whether its target can match (bounded by the budget, so cycles end). */
    const char *ref = schema_ref_of(v);
    if (ref && !needs_flatten(v)) {
        json_t *target = schema_resolve_ref(c->root, ref);
        return target ? never_at(c, target, prop_depth, choice_depth) : 0;
    }
    json_t *flat = needs_flatten(v) ? schema_flatten(c->root, v) : json_incref(v);
    if (!flat) return err_prefix("JSON schema at %s: ", c->path[0] ? c->path : "#");
    int never = json_is_false(flat);
    if (!never && json_is_object(flat) && (json_object_get(flat, "const") || json_is_array(json_object_get(flat, "enum")))) {
        json_t *values = schema_admitted_values(flat); /* a value list the other keywords empty */
        never = !values ? -1 : !json_array_size(values);
        json_decref(values);
        if (never < 0) {
            json_decref(flat);
            return err_prefix("JSON schema at %s: ", c->path[0] ? c->path : "#");
        }
    }
    json_t *req = json_object_get(flat, "required"), *props = json_object_get(flat, "properties"),
           *choices = json_object_get(flat, "anyOf");
    size_t i;
    json_t *x;
    if (!never && json_is_array(choices) && choice_depth < 8) { /* every choice empty (if/then groups, distributed) */
        never = 1;
        json_array_foreach(choices, i, x) if ((never = never_at(c, x, prop_depth, choice_depth + 1)) != 1) break;
    } else if (!never && prop_depth < 2 && json_is_object(props)) {
        /* a required property that can hold no value empties its object */
        json_array_foreach(req, i, x) {
            json_t *p = json_is_string(x) ? json_object_get(props, json_string_value(x)) : NULL;
            if (p && (never = never_at(c, p, prop_depth + 1, choice_depth)) != 0) break;
        }
    }
    json_decref(flat);
    return never;
}

/* Bounded: a schema of k if/then groups has 2^k combinations to look at. */
static int matches_nothing(js_ctx *c, json_t *v) {
    c->never_budget = 512;
    return never_at(c, v, 0, 0);
}

/* ---- the schema kinds ---- */

static int schema_rule(js_ctx *c, json_t *schema);

static int sub_rule(js_ctx *c, json_t *schema, const char *seg) {
    size_t saved;
    if (push_path(c, seg, &saved)) return -1;
    const int r = schema_rule(c, schema);
    pop_path(c, saved);
    return r;
}

/* A rule with one alternative per literal JSON text. */
static int literals_rule(js_ctx *c, json_t *values) {
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    size_t i;
    json_t *v;
    json_array_foreach(values, i, v) {
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) return err_oom("JSON schema: out of memory");
        /* Container literals keep the grammar's separators: re-dump with them. */
        if (!c->any_ws && (json_is_object(v) || json_is_array(v))) {
            free(text);
            text = json_dumps(v, JSON_INDENT(0) | JSON_ENCODE_ANY);
            if (!text) return err_oom("JSON schema: out of memory");
            /* JSON_INDENT(0) puts newlines; rewrite ",\n" as ", " and ":" as ": " (jansson writes
             * ": "). */
            char *w = text;
            for (const char *p = text; *p; p++) {
                if (*p == '\n') {
                    if (w > text && w[-1] == ',') *w++ = ' ';
                    continue;
                }
                *w++ = *p;
            }
            *w = 0;
        }
        const int rc = gb_alt_begin(c->b, r) || lit(c, text) || gb_alt_end(c->b);
        free(text);
        if (rc) return -1;
    }
    return r;
}

/* A oneOf of closed objects (additionalProperties false) whose property
 * names are pairwise disjoint: a non-empty object matches one choice at
 * most, but {} matches every choice that allows it, so where two or more
 * do, {} is invalid and those choices get minProperties 1 (Woodpecker's
 * secret target: {"env": ...} or {"file": ...}, never {}). The list
 * rewritten, a new reference; the list itself (one more reference) when
 * the rule does not apply; NULL out of memory. */
static json_t *one_of_disjoint_objects(js_ctx *c, json_t *list) {
    json_t *seen = json_object(), *out = NULL;
    size_t i, n_empty = 0;
    json_t *v;
    bool applies = seen != NULL;
    json_array_foreach(list, i, v) {
        const char *ref = schema_ref_of(v);
        json_t *o = ref && !needs_flatten(v) ? schema_resolve_ref(c->root, ref) : v;
        json_t *type = json_object_get(o, "type"), *props = json_object_get(o, "properties");
        if (!applies || !json_is_object(o) ||
            !json_is_false(json_object_get(o, "additionalProperties")) || !json_is_string(type) ||
            strcmp(json_string_value(type), "object") || needs_flatten(o) ||
            json_object_get(o, "patternProperties") || (props && !json_is_object(props))) {
            applies = false;
            break;
        }
        const char *k;
        json_t *x;
        json_object_foreach(props, k, x) {
            if (json_object_get(seen, k))
                applies = false;
            else if (json_object_set(seen, k, json_true()))
                applies = false;
        }
        json_t *minp = json_object_get(o, "minProperties");
        n_empty += json_array_size(json_object_get(o, "required")) == 0 &&
                   !(json_is_integer(minp) && json_integer_value(minp) > 0);
    }
    json_decref(seen);
    if (!applies || n_empty < 2) return json_incref(list);
    if (!(out = json_array())) return NULL;
    json_array_foreach(list, i, v) {
        const char *ref = schema_ref_of(v);
        json_t *o = ref && !needs_flatten(v) ? schema_resolve_ref(c->root, ref) : v;
        json_t *copy = json_copy(o), /* shallow: the properties stay shared */
            *minp = json_object_get(o, "minProperties");
        const bool takes_empty = json_array_size(json_object_get(o, "required")) == 0 &&
                                 !(json_is_integer(minp) && json_integer_value(minp) > 0);
        if (!copy || (takes_empty && json_object_set_new(copy, "minProperties", json_integer(1))) ||
            json_array_append_new(out, copy)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static int alternatives_rule(js_ctx *c, json_t *list, const char *key) {
    if (!json_is_array(list) || json_array_size(list) == 0) return js_fail(c, "'%s' must be a non-empty array at %s", key);
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    size_t i;
    json_t *v;
    size_t kept = 0;
    json_array_foreach(list, i, v) {
        char seg[96];
        snprintf(seg, sizeof seg, "%s/%zu", key, i);
        const int never = matches_nothing(c, v);
        if (never < 0) return -1;
        if (never) continue;
        const int s = sub_rule(c, v, seg);
        if (s < 0 || gb_alt_begin(c->b, r) || gb_push_rule(c->b, s) || gb_alt_end(c->b)) return -1;
        kept++;
    }
    return kept ? r : js_fail(c, "no choice of '%s' at %s can match a value", key);
}

static int push_pending(js_ctx *c, ref_rule e) {
    if (c->n_refs == c->cap_refs) {
        c->cap_refs = c->cap_refs ? 2 * c->cap_refs : 8;
        ref_rule *n = realloc(c->refs, (size_t)c->cap_refs * sizeof *n);
        if (!n) return err_oom("JSON schema: out of memory");
        c->refs = n;
    }
    c->refs[c->n_refs++] = e;
    return 0;
}

static int ref_rule_of(js_ctx *c, const char *ref) {
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i].ref && !strcmp(c->refs[i].ref, ref)) return c->refs[i].rule;
    /* A reference to another document (a URI, not "#..."): never fetched, so
     * its value is not enforced (any JSON value, as XGrammar and llguidance
     * do); one within the schema must resolve. */
    if (ref[0] == '#' && !schema_resolve_ref(c->root, ref))
        return err_set(
            "JSON schema: cannot resolve $ref '%s' at %s (only references within the schema: #, "
            "#/JSON/pointer and #anchor)",
            ref, c->path[0] ? c->path : "#");
    /* The rule exists now and gets its body in finish_refs, so recursive references find it. */
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    char *copy = strdup(ref);
    if (!copy) return err_oom("JSON schema: out of memory");
    if (push_pending(c, (ref_rule){.ref = copy, .rule = r})) {
        free(copy);
        return -1;
    }
    return r;
}

/* A schema's text without the annotations beside its keywords (sorted
 * keys): schemas that differ only in descriptions and defaults (Renovate's
 * 132 manager definitions, each the root schema merged with the same
 * options) compile to one rule. References inside resolve against the same
 * root, so equal text means the same schema. NULL out of memory. */
static char *schema_shape(json_t *schema) {
    json_t *bare = json_object();
    if (!bare) return NULL;
    const char *k;
    json_t *v;
    json_object_foreach(schema, k, v) if (!is_annotation(k) && json_object_set(bare, k, v)) {
        json_decref(bare);
        return NULL;
    }
    char *text = json_dumps(bare, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(bare);
    return text;
}

/* A schema schema_flatten rewrites, as one rule per schema object (and
 * per shape, below): the
 * rewrite of a recursive schema names the same object again (a property of
 * a schema merged with the root holds the root's own properties), and that
 * use finds this rule rather than expanding forever. */
static int flat_rule_of(js_ctx *c, json_t *schema) {
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i].source == schema) return c->refs[i].rule;
    char *shape = schema_shape(schema);
    if (!shape) return err_oom("JSON schema: out of memory");
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const char *p = shape; *p; p++) hash = (hash ^ (unsigned char)*p) * 0x100000001b3ull;
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i].shape && c->refs[i].shape_hash == hash && !strcmp(c->refs[i].shape, shape)) {
            free(shape);
            return c->refs[i].rule;
        }
    json_t *flat = schema_flatten(c->root, schema);
    if (!flat) {
        free(shape);
        return err_prefix("JSON schema at %s: ", c->path[0] ? c->path : "#");
    }
    if (json_is_false(flat)) {
        json_decref(flat), free(shape);
        return js_fail(c,
                       "%s: no value matches the schema at %s (its allOf, not or if leave nothing)",
                       "unsatisfiable");
    }
    char *where = strdup(c->path[0] ? c->path : "#");
    const int r = where ? gb_fresh_rule(c->b) : err_oom("JSON schema: out of memory");
    if (r < 0 || push_pending(c, (ref_rule){.source = json_incref(schema),
                                            .flat = flat,
                                            .shape = shape,
                                            .shape_hash = hash,
                                            .where = where,
                                            .rule = r})) {
        if (r >= 0) json_decref(schema);
        json_decref(flat), free(where), free(shape);
        return -1;
    }
    return r;
}

/* The bodies of the pending rules, compiled one after another rather than
 * nested inside their first use: a schema whose definitions refer to each
 * other in long chains (SchemaStore's renovate.json: 140 managers, each
 * naming the others) needs no deeper recursion than its deepest inline
 * nesting. */
static int finish_refs(js_ctx *c) {
    for (int i = 0; i < c->n_refs; i++) { /* n_refs grows as bodies name new ones */
        const ref_rule e = c->refs[i];
        json_t *body_schema = e.ref ? schema_resolve_ref(c->root, e.ref) : e.flat;
        snprintf(c->path, sizeof c->path, "%s", e.ref ? e.ref : e.where);
        c->depth = 1;
        const int body =
            body_schema ? schema_rule(c, body_schema) : value_rule(c); /* another document's */
        if (body < 0 || gb_alt_begin(c->b, e.rule) || gb_push_rule(c->b, body) || gb_alt_end(c->b))
            return -1;
    }
    return 0;
}

static int get_count(js_ctx *c, json_t *schema, const char *key, long *out, long dflt) {
    json_t *v = json_object_get(schema, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 10000)
        return js_fail(c, "'%s' must be an integer in 0..10000 at %s", key);
    *out = (long)json_integer_value(v);
    return 0;
}

/* RFC 3986's URI and relative reference (IP literals in brackets left
 * out) and IPv6 address (with an IPv4 tail), and RFC 3339's duration
 * (Appendix A), as regexes. */
#define URI_PCT "%[0-9A-Fa-f]{2}"
#define URI_UNRESERVED_SUB "[A-Za-z0-9._~!$&'()*+,;=-]"
#define URI_PCHAR "(" URI_UNRESERVED_SUB "|" URI_PCT "|[:@])"
#define URI_QUERY_CHARS "(" URI_PCHAR "|[/?])*"
#define URI_AUTHORITY                                                                              \
    "((" URI_UNRESERVED_SUB "|" URI_PCT "|:)*@)?(" URI_UNRESERVED_SUB "|" URI_PCT ")*(:[0-9]*)?"
#define URI_PATH_ABEMPTY "(/" URI_PCHAR "*)*"
#define URI_PATH_ABSOLUTE "/(" URI_PCHAR "+(/" URI_PCHAR "*)*)?"
#define URI_TAIL "(\\?" URI_QUERY_CHARS ")?(#" URI_QUERY_CHARS ")?"
#define IPV4_OCTET "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define IPV6_H "[0-9a-fA-F]{1,4}"
#define IPV6_LS32 "(" IPV6_H ":" IPV6_H "|(" IPV4_OCTET "\\.){3}" IPV4_OCTET ")"
#define DURATION_TIME "T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)"

static const char *format_regex(const char *f) {
    static const struct {
        const char *name, *re;
    } formats[] = {
        {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"},
        {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-"
                 "5][0-9])"},
        {"date-time", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5]["
                      "0-9]:[0-5][0-9]"
                      "(\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
        {"email", "[a-zA-Z0-9_+-]+(\\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?"
                  "(\\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+"},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]["
                 "0-9]|[1-9]?[0-9])"},
        {"uri", "[A-Za-z][A-Za-z0-9+.-]*:(//" URI_AUTHORITY URI_PATH_ABEMPTY "|" URI_PATH_ABSOLUTE
                "|" URI_PCHAR "+(/" URI_PCHAR "*)*)?" URI_TAIL},
        {"iri", "[a-zA-Z][a-zA-Z0-9+.-]*:[^ \"\\\\\\x00-\\x1f]+"},
        {"uri-reference", "(//" URI_AUTHORITY URI_PATH_ABEMPTY "|" URI_PATH_ABSOLUTE "|(" URI_UNRESERVED_SUB "|" URI_PCT
                          "|@)+(/" URI_PCHAR "*)*)?" URI_TAIL},
        {"iri-reference", "[^ \"\\\\\\x00-\\x1f]*"},
        {"hostname", "[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*"},
        {"ipv6", "(" IPV6_H ":){6}" IPV6_LS32 "|::(" IPV6_H ":){5}" IPV6_LS32 "|(" IPV6_H ")?::(" IPV6_H ":){4}"
                 IPV6_LS32 "|((" IPV6_H ":)?" IPV6_H ")?::(" IPV6_H ":){3}" IPV6_LS32 "|((" IPV6_H ":){0,2}" IPV6_H
                 ")?::(" IPV6_H ":){2}" IPV6_LS32 "|((" IPV6_H ":){0,3}" IPV6_H ")?::" IPV6_H ":" IPV6_LS32 "|(("
                 IPV6_H ":){0,4}" IPV6_H ")?::" IPV6_LS32 "|((" IPV6_H ":){0,5}" IPV6_H ")?::" IPV6_H "|((" IPV6_H
                 ":){0,6}" IPV6_H ")?::"},
        {"duration", "P(([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)(" DURATION_TIME ")?|" DURATION_TIME
                     "|[0-9]+W)"},
    };
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].name, f)) return formats[i].re;
    return NULL;
}

static int string_schema(js_ctx *c, json_t *schema) {
    json_t *pattern = json_object_get(schema, "pattern"), *format = json_object_get(schema, "format");
    long min_len, max_len;
    if (get_count(c, schema, "minLength", &min_len, 0) || get_count(c, schema, "maxLength", &max_len, -1)) return -1;
    if (max_len >= 0 && max_len < min_len) return js_fail(c, "'%s' is below minLength at %s", "maxLength");
    /* A format without a grammar here is an annotation (as JSON Schema 2020-12 reads every format). */
    if (format && json_is_string(format) && !format_regex(json_string_value(format))) format = NULL;
    if (!pattern && !format && min_len == 0 && max_len < 0) return string_rule(c);
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    int body;
    if (pattern || format) {
        /* A pattern or a format decides the string; lengths beside them are
         * not enforced (a regex intersection is not built). */
        if (pattern && !json_is_string(pattern)) return js_fail(c, "'%s' must be a string at %s", "pattern");
        if (format && !json_is_string(format)) return js_fail(c, "'%s' must be a string at %s", "format");
        const char *re;
        char *owned = NULL;
        if (!pattern) {
            re = format_regex(json_string_value(format));
        } else {
            owned = schema_pattern_anchored(json_string_value(pattern)); /* JSON Schema patterns search */
            if (!owned) return -1;
            re = owned;
        }
        gb_set_json_string_mode(c->b, true);
        body = regex_rule(c, re);
        gb_set_json_string_mode(c->b, false);
        free(owned);
        if (body < 0) return -1;
        return gb_alt_begin(c->b, r) || lit(c, "\"") || gb_push_rule(c->b, body) || lit(c, "\"") || gb_alt_end(c->b)
                   ? -1 : r;
    }
    const int ch = string_char_rule(c);
    if (ch < 0 || gb_alt_begin(c->b, r) || lit(c, "\"")) return -1;
    const size_t mark = gb_mark(c->b);
    if (gb_push_rule(c->b, ch) || gb_repeat_since(c->b, mark, (int)min_len, (int)max_len) || lit(c, "\"") ||
        gb_alt_end(c->b))
        return -1;
    return r;
}

/* ---- integer ranges as digit patterns ---- */

static void range_digits(char *buf, size_t cap, long long lo, long long hi);

/* Appends "|"-separated patterns for lo..hi (0 <= lo <= hi), the classic
 * split into runs that share a prefix and end in [x-y] and free digits. */
static void range_pos(char *out, size_t cap, long long lo, long long hi) {
    if (lo > hi) return;
    char a[24], b[24];
    snprintf(a, sizeof a, "%lld", lo);
    snprintf(b, sizeof b, "%lld", hi);
    const size_t la = strlen(a), lb = strlen(b);
    if (la < lb) { /* split at the digit count boundary */
        long long p = 1;
        for (size_t i = 0; i < la; i++) p *= 10;
        range_pos(out, cap, lo, p - 1);
        range_pos(out, cap, p, hi);
        return;
    }
    /* Same length: find the first digit where they differ. */
    size_t i = 0;
    while (i < la && a[i] == b[i]) i++;
    if (i == la) {
        range_digits(out, cap, lo, hi);
        return;
    }
    long long tail = 1;
    for (size_t k = i + 1; k < la; k++) tail *= 10;
    const long long lo_rest = lo % tail, hi_rest = hi % tail;
    if (lo_rest != 0) { /* lo .. end of lo's block */
        const long long end = lo - lo_rest + tail - 1;
        range_pos(out, cap, lo, end);
        range_pos(out, cap, end + 1, hi);
        return;
    }
    if (hi_rest != tail - 1) {
        const long long start = hi - hi_rest;
        range_pos(out, cap, lo, start - 1);
        range_pos(out, cap, start, hi);
        return;
    }
    range_digits(out, cap, lo, hi);
}

/* lo..hi of equal length where the differing digits run to the end with lo's
 * rest all 0 and hi's all 9: prefix [x-y] [0-9]{k}. */
static void range_digits(char *out, size_t cap, long long lo, long long hi) {
    char a[24], b[24], piece[96];
    snprintf(a, sizeof a, "%lld", lo);
    snprintf(b, sizeof b, "%lld", hi);
    const size_t n = strlen(a);
    size_t i = 0, w = 0;
    while (i < n && a[i] == b[i]) piece[w++] = a[i++];
    if (i < n) {
        w += (size_t)snprintf(piece + w, sizeof piece - w, "[%c-%c]", a[i], b[i]);
        if (n - i - 1 > 0) w += (size_t)snprintf(piece + w, sizeof piece - w, "[0-9]{%zu}", n - i - 1);
    }
    piece[w] = 0;
    const size_t at = strlen(out);
    snprintf(out + at, cap - at, "%s%s", at ? "|" : "", piece);
}

static int integer_schema(js_ctx *c, json_t *schema) {
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    const char *keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        json_t *v = json_object_get(schema, keys[k]);
        if (!v || json_is_boolean(v)) continue; /* draft 4's boolean exclusive* modify minimum/maximum */
        if (!json_is_number(v)) return js_fail(c, "'%s' must be a number at %s", keys[k]);
        const double d = json_number_value(v);
        if (fabs(d) > 1e15) {
            /* A bound out past the range that bounds nothing of it (a maximum of 2^63): not
             * enforced. */
            if (k < 2 ? d < 0 : d > 0) continue;
            return js_fail(c, "'%s' is out of the supported range (|x| <= 1e15) at %s", keys[k]);
        }
        const bool excl = k % 2 == 1 || json_is_true(json_object_get(schema, keys[k + 1]));
        long long b = k < 2 ? (long long)ceil(d) : (long long)floor(d);
        if (excl && k < 2 && (double)b == d) b++;
        if (excl && k >= 2 && (double)b == d) b--;
        if (k < 2) lo = has_lo && lo > b ? lo : b, has_lo = true;
        else hi = has_hi && hi < b ? hi : b, has_hi = true;
    }
    if (!has_lo && !has_hi) return integer_rule(c);
    if (has_lo && has_hi && lo > hi) return js_fail(c, "'%s' above maximum: no integer fits at %s", "minimum");
    /* Build "-(neg)|(pos)" over the parts of the range. */
    char *re = calloc(1, 65536), *part = calloc(1, 32768);
    if (!re || !part) {
        free(re), free(part);
        return err_oom("JSON schema: out of memory");
    }
    const long long big = 999999999999999999LL;
    /* Negative side: -a for a in max(1,-hi)..(-lo). */
    if (!has_lo || lo < 0) {
        const long long a_lo = has_hi && hi < 0 ? -hi : 1;
        if (!has_lo) snprintf(part, 32768, "[1-9][0-9]*");
        else range_pos(part, 32768, a_lo, -lo);
        if (!has_lo && a_lo > 1) { /* any number >= a_lo: its digits and every longer number */
            part[0] = 0;
            char s[24];
            snprintf(s, sizeof s, "%lld", a_lo);
            long long p = 1;
            for (size_t k = 0; k < strlen(s); k++) p *= 10;
            range_pos(part, 32768, a_lo, p - 1);
            const size_t at = strlen(part);
            snprintf(part + at, 32768 - at, "|[1-9][0-9]{%zu,}", strlen(s));
        }
        snprintf(re + strlen(re), 65536 - strlen(re), "-(%s)", part);
    }
    if (!has_hi || hi >= 0) {
        const long long p_lo = has_lo && lo > 0 ? lo : 0;
        part[0] = 0;
        if (!has_hi) {
            char s[24];
            snprintf(s, sizeof s, "%lld", p_lo);
            long long p = 1;
            for (size_t k = 0; k < strlen(s); k++) p *= 10;
            range_pos(part, 32768, p_lo, p - 1 < big ? p - 1 : big);
            const size_t at = strlen(part);
            snprintf(part + at, 32768 - at, "|[1-9][0-9]{%zu,}", strlen(s));
        } else {
            range_pos(part, 32768, p_lo, hi);
        }
        snprintf(re + strlen(re), 65536 - strlen(re), "%s(%s)", re[0] ? "|" : "", part);
    }
    const int r = regex_rule(c, re);
    free(re), free(part);
    return r;
}

/* Whole numbers lo..hi (hi < 0: no upper end) as regex alternatives, each in
 * parentheses: the canonical digits, as range_pos writes them, and past the
 * digits of lo every longer number. */
static void append_whole_range(char *out, size_t cap, long long lo, long long hi) {
    const size_t at = strlen(out);
    snprintf(out + at, cap - at, "%s(", out[0] ? "|" : "");
    if (hi >= 0) {
        range_pos(out, cap, lo, hi);
    } else {
        char d[24];
        snprintf(d, sizeof d, "%lld", lo);
        long long p = 1;
        for (size_t k = 0; k < strlen(d); k++) p *= 10;
        range_pos(out, cap, lo, p - 1);
        const size_t n = strlen(out);
        snprintf(out + n, cap - n, "|[1-9][0-9]{%zu,}", strlen(d));
    }
    const size_t n = strlen(out);
    snprintf(out + n, cap - n, ")");
}

/* Numbers without a sign (a whole part a and a fraction f) from lo to hi,
 * whole-valued bounds, lo >= 0, either bound inclusive or exclusive, hi
 * optional: a in (lo or lo + 1) .. hi - 1 with any fraction; a = lo with a
 * fraction that is not zero when lo is exclusive; a = hi with a zero
 * fraction when hi is inclusive. */
static void append_magnitudes(char *out, size_t cap, long long lo, bool lo_ex, bool has_hi, long long hi, bool hi_ex) {
    const long long from = lo_ex ? lo + 1 : lo;
    char *part = out + strlen(out);
    const size_t part_cap = cap - strlen(out);
    if (!has_hi || from <= hi - 1) {
        append_whole_range(part, part_cap, from, has_hi ? hi - 1 : -1);
        const size_t n = strlen(part);
        snprintf(part + n, part_cap - n, "(\\.[0-9]+)?");
    }
    if (lo_ex && (!has_hi || hi > lo)) {
        const size_t n = strlen(part);
        snprintf(part + n, part_cap - n, "%s%lld\\.[0-9]*[1-9][0-9]*", part[0] ? "|" : "", lo);
    }
    if (has_hi && !hi_ex && (hi > lo || (hi == lo && !lo_ex))) {
        const size_t n = strlen(part);
        snprintf(part + n, part_cap - n, "%s%lld(\\.0+)?", part[0] ? "|" : "", hi);
    }
}

/* A number's bounds, each a whole value within +-1e15 (inclusive or
 * exclusive; draft 4's boolean exclusiveMinimum/exclusiveMaximum make the
 * plain bound exclusive): the tighter of two on one side. Bounded numbers
 * are written in plain decimals (no exponent), exactly the values in range. */
static int number_schema(js_ctx *c, json_t *schema) {
    bool has[2] = {false, false}, ex[2] = {false, false};
    long long b[2] = {0, 0};
    const char *keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int k = 0; k < 4; k++) {
        json_t *v = json_object_get(schema, keys[k]);
        const int side = k / 2;
        if (!v || json_is_boolean(v)) continue;
        if (!json_is_number(v)) return js_fail(c, "'%s' must be a number at %s", keys[k]);
        const double d = json_number_value(v);
        if (fabs(d) > 1e15) {
            /* A bound out past the range that bounds nothing of it (a maximum of 2^63): not
             * enforced. */
            if (k < 2 ? d < 0 : d > 0) continue;
            return js_fail(c, "'%s' is out of the supported range (|x| <= 1e15) at %s", keys[k]);
        }
        if (d != floor(d))
            return js_fail(c, "'%s' on a non-integer number must be a whole value (a fractional bound is not "
                              "supported) at %s", keys[k]);
        bool excl = k % 2 == 1 || json_is_true(json_object_get(schema, keys[k + 1]));
        const long long val = (long long)d;
        const bool tighter = !has[side] || (side == 0 ? val > b[side] || (val == b[side] && excl)
                                                      : val < b[side] || (val == b[side] && excl));
        if (tighter) b[side] = val, ex[side] = excl, has[side] = true;
    }
    if (!has[0] && !has[1]) return number_rule(c);
    if (has[0] && b[0] == 0 && !ex[0] && !has[1]) /* minimum 0 alone: exponents stay non-negative */
        return regex_rule(c, "(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
    char *re = calloc(1, 65536);
    if (!re) return err_oom("JSON schema: out of memory");
    const long long lo = b[0], hi = b[1];
    /* x >= 0, unsigned */
    if (!has[1] || hi > 0 || (hi == 0 && !ex[1])) {
        const bool lo_here = has[0] && lo >= 0;
        append_magnitudes(re, 65536, lo_here ? lo : 0, lo_here && ex[0], has[1], hi, ex[1]);
    }
    /* x < 0: "-" and a magnitude above 0 (or above -hi) up to -lo */
    if (!has[0] || lo < 0) {
        const bool hi_here = has[1] && hi < 0;
        char *neg = calloc(1, 32768);
        if (!neg) {
            free(re);
            return err_oom("JSON schema: out of memory");
        }
        append_magnitudes(neg, 32768, hi_here ? -hi : 0, hi_here ? ex[1] : true, has[0], -lo, ex[0]);
        if (neg[0]) snprintf(re + strlen(re), 65536 - strlen(re), "%s-(%s)", re[0] ? "|" : "", neg);
        free(neg);
    }
    if (!re[0]) {
        free(re);
        return js_fail(c, "'%s' and maximum leave no number at %s", "minimum");
    }
    const int r = regex_rule(c, re);
    free(re);
    return r;
}

static int array_schema(js_ctx *c, json_t *schema) {
    json_t *items = json_object_get(schema, "items"), *prefix = json_object_get(schema, "prefixItems");
    long min_items, max_items;
    if (get_count(c, schema, "minItems", &min_items, 0) || get_count(c, schema, "maxItems", &max_items, -1)) return -1;
    if (max_items >= 0 && max_items < min_items) return js_fail(c, "'%s' is below minItems at %s", "maxItems");
    if (prefix && !json_is_array(prefix)) return js_fail(c, "'%s' must be an array at %s", "prefixItems");
    if (json_is_array(items)) { /* drafts 4-2019: items as a tuple, additionalItems after it */
        if (prefix) return js_fail(c, "'%s' as an array beside prefixItems at %s", "items");
        prefix = items;
        items = json_object_get(schema, "additionalItems");
    }
    if (!items) items = json_object_get(schema, "unevaluatedItems");
    if (!prefix && json_is_false(items)) max_items = 0;
    const long n_prefix = prefix ? (long)json_array_size(prefix) : 0;
    if (n_prefix && min_items != 0 && min_items != n_prefix)
        return js_fail(c, "'%s' with prefixItems must equal their count at %s", "minItems");
    int item = -1;
    if ((!prefix && max_items != 0) || (prefix && items && !json_is_false(items))) {
        item = items ? sub_rule(c, items, "items") : value_rule(c);
        if (item < 0) return -1;
    }
    const int r = gb_fresh_rule(c->b);
    if (r < 0 || gb_alt_begin(c->b, r) || lit(c, "[") || ws(c)) return -1;
    if (n_prefix) {
        for (long i = 0; i < n_prefix; i++) {
            char seg[48];
            snprintf(seg, sizeof seg, "prefixItems/%ld", i);
            const int p = sub_rule(c, json_array_get(prefix, (size_t)i), seg);
            if (p < 0 || (i && item_sep(c)) || gb_push_rule(c->b, p)) return -1;
        }
        if (item >= 0) {
            const size_t mark = gb_mark(c->b);
            const long more = max_items < 0 ? -1 : max_items - n_prefix;
            if (more < 0 && max_items >= 0) return js_fail(c, "'%s' is below the prefixItems count at %s", "maxItems");
            if (item_sep(c) || gb_push_rule(c->b, item) || gb_repeat_since(c->b, mark, 0, (int)more)) return -1;
        }
    } else if (max_items != 0) {
        const size_t mark_opt = gb_mark(c->b);
        if (gb_push_rule(c->b, item)) return -1;
        const size_t mark = gb_mark(c->b);
        const int min_more = min_items > 1 ? (int)min_items - 1 : 0;
        const int max_more = max_items < 0 ? -1 : (int)max_items - 1;
        if (item_sep(c) || gb_push_rule(c->b, item) || gb_repeat_since(c->b, mark, min_more, max_more)) return -1;
        if (min_items == 0 && gb_repeat_since(c->b, mark_opt, 0, 1)) return -1;
    }
    if (ws(c) || lit(c, "]") || gb_alt_end(c->b)) return -1;
    return r;
}

/* A key of an additional property: any string, or one that propertyNames
 * or a patternProperties regex allows (a schema for strings). */
static int key_rule(js_ctx *c, json_t *names, const char *seg) {
    if (!names || json_is_true(names)) return string_rule(c);
    if (!json_is_object(names)) return js_fail(c, "'%s' must be a schema object at %s", seg);
    json_t *as_string = json_copy(names);
    if (!as_string || json_object_set_new(as_string, "type", json_string("string"))) {
        json_decref(as_string);
        return err_oom("JSON schema: out of memory");
    }
    const int r = json_object_get(names, "enum") || json_object_get(names, "const") || schema_ref_of(names)
                      ? sub_rule(c, names, seg) : sub_rule(c, as_string, seg);
    json_decref(as_string);
    return r;
}

/* One additional "key": value pair: a key matching a patternProperties
 * regex with that pattern's schema or, without patternProperties, where
 * additionalProperties (or unevaluatedProperties in its place) allows them,
 * a key propertyNames allows with that schema. Beside patternProperties
 * the other keys are not written: a key must match no pattern to take the
 * additionalProperties schema, and a regex's complement is not built (the
 * grammar stays sound, as XGrammar's does). -2 when no additional property
 * is allowed. */
static int extra_pair_rule(js_ctx *c, json_t *schema) {
    json_t *pattern_props = json_object_get(schema, "patternProperties"),
           *names = json_object_get(schema, "propertyNames"), *addl = json_object_get(schema, "additionalProperties");
    if (!addl) addl = json_object_get(schema, "unevaluatedProperties");
    if (pattern_props && !json_is_object(pattern_props))
        return js_fail(c, "'%s' must be an object at %s", "patternProperties");
    const bool any_addl = addl && !json_is_false(addl) && !json_object_size(pattern_props);
    if (!any_addl && !json_object_size(pattern_props)) return -2;
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    const char *re;
    json_t *v;
    json_object_foreach(pattern_props, re, v) {
        char seg[300];
        snprintf(seg, sizeof seg, "patternProperties/%.250s", re);
        json_t *key_schema = json_pack("{s:s}", "pattern", re);
        const int k = key_schema ? key_rule(c, key_schema, seg) : err_oom("JSON schema: out of memory");
        json_decref(key_schema);
        const int vr = k < 0 ? -1 : sub_rule(c, v, seg);
        if (vr < 0 || gb_alt_begin(c->b, r) || gb_push_rule(c->b, k) || key_sep(c) || gb_push_rule(c->b, vr) ||
            gb_alt_end(c->b))
            return -1;
    }
    if (any_addl) {
        const int vr = json_is_true(addl) ? value_rule(c) : sub_rule(c, addl, "additionalProperties");
        const int k = vr < 0 ? -1 : key_rule(c, names, "propertyNames");
        if (k < 0 || gb_alt_begin(c->b, r) || gb_push_rule(c->b, k) || key_sep(c) || gb_push_rule(c->b, vr) ||
            gb_alt_end(c->b))
            return -1;
    }
    return r;
}

/* A rule that matches nothing: the dead ends of object_schema's counts. */
static int push_nothing(js_ctx *c) {
    const byte_set none = {{0}};
    return gb_push_set(c->b, &none);
}

/* Properties in order, optional ones skippable, commas only between those
 * present, and minProperties/maxProperties counted: state (k, m) has
 * written m members (capped at M) before property k. (k, m) ::= [sep]
 * P_k (k+1, m+1) | (k+1, m) (when k is optional); past the last property,
 * (n, m) ::= [sep] extra (n, m+1) | (empty, when m >= minProperties). The
 * separator is written when m > 0. Only states from which an object can
 * still be finished are entered, so the model never writes itself into a
 * dead end. */
static int object_schema(js_ctx *c, json_t *schema) {
    json_t *props = json_object_get(schema, "properties"), *req = json_object_get(schema, "required");
    if (props && !json_is_object(props)) return js_fail(c, "'%s' must be an object at %s", "properties");
    if (req && !json_is_array(req)) return js_fail(c, "'%s' must be an array at %s", "required");
    long min_p, max_p;
    if (get_count(c, schema, "minProperties", &min_p, 0) || get_count(c, schema, "maxProperties", &max_p, -1))
        return -1;
    if (max_p >= 0 && max_p < min_p) return js_fail(c, "'%s' is below minProperties at %s", "maxProperties");
    size_t i;
    json_t *v;
    /* A required property that "properties" does not describe may hold any
     * value: it is written after the described ones. */
    json_t *all_props = props ? json_copy(props) : json_object();
    if (!all_props) return err_oom("JSON schema: out of memory");
    json_array_foreach(req, i, v) {
        if (!json_is_string(v)) {
            json_decref(all_props);
            return js_fail(c, "'%s' must list strings at %s", "required");
        }
        if (!json_object_get(all_props, json_string_value(v))) json_object_set_new(all_props, json_string_value(v), json_true());
    }
    props = all_props;
    /* A property no value may take (false, or "not": {}) is left out, as if absent. */
    const char *key;
    void *tmp;
    json_object_foreach_safe(all_props, tmp, key, v) {
        const int never = matches_nothing(c, v);
        if (never < 0) {
            json_decref(all_props);
            return -1;
        }
        if (!never) continue;
        size_t j;
        json_t *rv;
        json_array_foreach(req, j, rv) if (!strcmp(json_string_value(rv), key)) {
            const int rc = js_fail(c, "required property '%s' may hold no value at %s", key); /* key dies with all_props */
            json_decref(all_props);
            return rc;
        }
        json_object_del(all_props, key);
    }
    const size_t n = json_object_size(props);
    const int extra = extra_pair_rule(c, schema); /* one additional "key": value pair */
    if (extra == -1) {
        json_decref(all_props);
        return -1;
    }
    /* Counts past 64 are not enforced (the states grow with the count). */
    if (max_p > 64) max_p = -1;
    if (min_p > 64) min_p = 64;
    const long M = max_p >= 0 ? max_p : (min_p > 1 ? min_p : 1);
    const size_t W = (size_t)M + 1;
    int *St = calloc((n + 1) * W, sizeof *St), *P = calloc(n + 1, sizeof *P);
    bool *opt = calloc(n + 1, sizeof *opt), *live = calloc((n + 1) * W, sizeof *live);
    int rc = !St || !P || !opt || !live ? err_oom("JSON schema: out of memory") : 0;
    i = 0;
    if (!rc) json_object_foreach(props, key, v) {
        char seg[300];
        snprintf(seg, sizeof seg, "properties/%.250s", key);
        const int vr = sub_rule(c, v, seg);
        P[i] = gb_fresh_rule(c->b);
        if (vr < 0 || P[i] < 0) {
            rc = -1;
            break;
            }
            json_t *name = json_string(key);
            char *quoted = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
            json_decref(name);
            if (!quoted || gb_alt_begin(c->b, P[i]) || lit(c, quoted) || key_sep(c) ||
                gb_push_rule(c->b, vr) || gb_alt_end(c->b))
                rc = -1;
            free(quoted);
            if (rc) break;
            opt[i] = true;
            size_t j;
            json_t *rv;
            json_array_foreach(req, j, rv) if (!strcmp(json_string_value(rv), key)) opt[i] = false;
            i++;
        }
#define AT(k, m) ((size_t)(k)*W + (size_t)(m))
    /* Which states can still finish an object: from the end backwards. */
    const bool open_end = extra >= 0 && max_p < 0;
    for (long m = M; m >= 0 && !rc; m--)
        live[AT(n, m)] = m >= min_p || open_end || (extra >= 0 && m < M && live[AT(n, m + 1)]);
    for (size_t k = n; k-- > 0 && !rc;)
        for (long m = 0; m <= M; m++) {
            const long up = m < M ? m + 1 : (max_p < 0 ? M : -1);
            live[AT(k, m)] = (up >= 0 && live[AT(k + 1, up)]) || (opt[k] && live[AT(k + 1, m)]);
        }
    if (!rc && !live[AT(0, 0)])
        rc = js_fail(c, "no object fits '%s' and the properties allowed at %s", "minProperties/maxProperties/required");
    for (size_t k = 0; k <= n && !rc; k++)
        for (long m = 0; m <= M && !rc; m++)
            if ((St[AT(k, m)] = gb_fresh_rule(c->b)) < 0) rc = -1;
    for (size_t k = 0; k <= n && !rc; k++)
        for (long m = 0; m <= M && !rc; m++) {
            const int s = St[AT(k, m)];
            const long up = m < M ? m + 1 : (max_p < 0 ? M : -1);
            const int member = k < n ? P[k] : extra;
            bool any = false;
            if (member >= 0 && up >= 0 && live[AT(k < n ? k + 1 : n, up)]) {
                rc = gb_alt_begin(c->b, s) || (m > 0 && item_sep(c)) || gb_push_rule(c->b, member) ||
                     gb_push_rule(c->b, St[AT(k < n ? k + 1 : n, up)]) || gb_alt_end(c->b);
                any = true;
            }
            if (!rc && k < n && opt[k] && live[AT(k + 1, m)]) {
                rc = gb_alt_begin(c->b, s) || gb_push_rule(c->b, St[AT(k + 1, m)]) || gb_alt_end(c->b);
                any = true;
            }
            if (!rc && k == n && m >= min_p) {
                rc = gb_alt_begin(c->b, s) || gb_alt_end(c->b);
                any = true;
            }
            if (!rc && !any) rc = gb_alt_begin(c->b, s) || push_nothing(c) || gb_alt_end(c->b);
        }
    int r = -1;
    if (!rc && (r = gb_fresh_rule(c->b)) >= 0)
        rc = gb_alt_begin(c->b, r) || lit(c, "{") || ws(c) || gb_push_rule(c->b, St[AT(0, 0)]) || ws(c) ||
             lit(c, "}") || gb_alt_end(c->b);
#undef AT
    free(St), free(P), free(opt), free(live);
    json_decref(all_props);
    return rc || r < 0 ? -1 : r;
}

static int typed_rule(js_ctx *c, json_t *schema, const char *type) {
    if (!strcmp(type, "string")) return string_schema(c, schema);
    if (!strcmp(type, "integer")) return integer_schema(c, schema);
    if (!strcmp(type, "number")) return number_schema(c, schema);
    if (!strcmp(type, "object")) return object_schema(c, schema);
    if (!strcmp(type, "array")) return array_schema(c, schema);
    if (!strcmp(type, "any")) return value_rule(c); /* draft 3 */
    const char *word = !strcmp(type, "boolean") ? NULL : !strcmp(type, "null") ? "null" : "";
    if (word && !*word) return js_fail(c, "unknown type '%s' at %s", type);
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    if (word) return gb_alt_begin(c->b, r) || lit(c, "null") || gb_alt_end(c->b) ? -1 : r;
    return gb_alt_begin(c->b, r) || lit(c, "true") || gb_alt_end(c->b) || gb_alt_begin(c->b, r) || lit(c, "false") ||
                   gb_alt_end(c->b)
               ? -1 : r;
}

/* The keywords that imply a type when "type" is absent. */
static const char *implied_type(json_t *schema) {
    const char *k;
    json_t *v;
    json_object_foreach(schema, k, v) {
        if (in_list(k, OBJECT_KEYS)) return "object";
        if (in_list(k, ARRAY_KEYS)) return "array";
        if (in_list(k, STRING_KEYS)) return "string";
        if (in_list(k, NUMBER_KEYS)) return "number";
    }
    return NULL;
}

static int schema_rule(js_ctx *c, json_t *schema) {
    if (json_is_true(schema)) return value_rule(c);
    if (json_is_false(schema)) return js_fail(c, "schema '%s' at %s matches nothing", "false");
    if (!json_is_object(schema)) return js_fail(c, "a schema must be an object or a boolean, %s at %s", "not this");
    json_t *v;
    if (needs_flatten(schema)) return flat_rule_of(c, schema);
    if ((v = json_object_get(schema, "$ref")) && !json_is_string(v))
        return js_fail(c, "'%s' must be a string at %s", "$ref");
    const char *ref = schema_ref_of(schema);
    if (ref) return ref_rule_of(c, ref);
    if (json_object_get(schema, "const") || (v = json_object_get(schema, "enum"))) {
        if (!json_object_get(schema, "const") && (!json_is_array(v) || !json_array_size(v)))
            return js_fail(c, "'%s' must be a non-empty array at %s", "enum");
        /* The values the assertions beside them admit (schema_values.h). */
        json_t *values = schema_admitted_values(schema);
        if (!values) return err_prefix("JSON schema at %s: ", c->path[0] ? c->path : "#");
        const int r = json_array_size(values) ? literals_rule(c, values)
                                              : js_fail(c, "no value of '%s' meets the schema's other keywords at %s",
                                                        json_object_get(schema, "const") ? "const" : "enum");
        json_decref(values);
        return r;
    }
    if ((v = json_object_get(schema, "anyOf"))) return alternatives_rule(c, v, "anyOf");
    if ((v = json_object_get(schema, "oneOf"))) {
        json_t *list = json_is_array(v) ? one_of_disjoint_objects(c, v) : json_incref(v);
        if (!list) return err_oom("JSON schema: out of memory");
        const int r = alternatives_rule(c, list, "oneOf");
        json_decref(list);
        return r;
    }
    json_t *type = json_object_get(schema, "type");
    const bool nullable = json_is_true(json_object_get(schema, "nullable"));
    if (!type && !nullable) {
        const char *t = implied_type(schema);
        return t ? typed_rule(c, schema, t) : value_rule(c);
    }
    if (type && !json_is_string(type) && !json_is_array(type))
        return js_fail(c, "'%s' must be a string or a list at %s", "type");
    const int r = gb_fresh_rule(c->b);
    if (r < 0) return -1;
    json_t *types = json_is_array(type) ? json_incref(type) : type ? json_pack("[O]", type) : json_array();
    if (nullable) json_array_append_new(types, json_string("null"));
    size_t i;
    int rc = 0;
    json_array_foreach(types, i, v) {
        char seg[32];
        snprintf(seg, sizeof seg, "type/%zu", i);
        /* Draft 3 lets a type list hold schemas too: each is one more choice. */
        if (!json_is_string(v) && !json_is_object(v)) {
            rc = js_fail(c, "'%s' must list type names or schemas at %s", "type");
            break;
        }
        const int t =
            json_is_object(v) ? sub_rule(c, v, seg) : typed_rule(c, schema, json_string_value(v));
        if (t < 0 || gb_alt_begin(c->b, r) || gb_push_rule(c->b, t) || gb_alt_end(c->b)) {
            rc = -1;
            break;
        }
    }
    json_decref(types);
    return rc ? -1 : r;
}

static js_ctx ctx_new(grammar_builder *b, json_t *schema, const json_schema_options *opt) {
    return (js_ctx){.b = b, .root = schema, .any_ws = opt && opt->any_whitespace, .r_ws = -1, .r_string = -1,
                    .r_char = -1, .r_number = -1, .r_integer = -1, .r_value = -1, .r_object = -1, .r_array = -1};
}

static void ctx_free(js_ctx *c) {
    for (int i = 0; i < c->n_refs; i++) {
        free(c->refs[i].ref), free(c->refs[i].where), free(c->refs[i].shape);
        json_decref(c->refs[i].source), json_decref(c->refs[i].flat);
    }
    free(c->refs);
}

int json_schema_to_rule(grammar_builder *b, json_t *schema, const json_schema_options *opt) {
    js_ctx c = ctx_new(b, schema, opt);
    int r = schema_rule(&c, schema);
    if (r >= 0 && finish_refs(&c)) r = -1;
    ctx_free(&c);
    return r;
}

/* The value alone: no whitespace before or after it, as XGrammar. */
static grammar *finish_top(js_ctx *c, int body) {
    ctx_free(c);
    if (body < 0) {
        gb_free(c->b);
        return NULL;
    }
    return gb_finish(c->b, body);
}

grammar *grammar_from_json_schema(json_t *schema, const json_schema_options *opt) {
    grammar_builder *b = gb_create();
    if (!b) {
        err_oom("JSON schema: out of memory");
        return NULL;
    }
    js_ctx c = ctx_new(b, schema, opt);
    int r = schema_rule(&c, schema);
    if (r >= 0 && finish_refs(&c)) r = -1;
    return finish_top(&c, r);
}

grammar *grammar_json_object(const json_schema_options *opt) {
    grammar_builder *b = gb_create();
    if (!b) {
        err_oom("JSON schema: out of memory");
        return NULL;
    }
    js_ctx c = ctx_new(b, NULL, opt);
    return finish_top(&c, any_container_rule(&c, true));
}
