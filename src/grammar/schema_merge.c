/* The intersection of schemas as one schema (see schema_merge.h).
 *
 * Keyword by keyword, the merged schema keeps what every branch asserts:
 *   type: the common types ("integer" within "number"); enum/const: the
 *   common values; properties, patternProperties: the union, a name in two
 *   branches gets allOf of both schemas; required: the union; items,
 *   additionalProperties, propertyNames, ...: allOf of both (false wins);
 *   minimum-like bounds: the larger, maximum-like: the smaller; uniqueItems:
 *   either; not: not of either (anyOf); integer multipleOf: the lcm.
 * An anyOf/oneOf in a branch, or beside other keywords, is expanded: the
 * result is anyOf over the consistent combinations of every such choice
 * list, each merged whole (depth first; a combination is dropped as soon as
 * it matches nothing or leaves a required property no value; over 1,024
 * combinations is refused). if/then/else becomes the choice list
 * [allOf(if, then), else] (exact where "if" and
 * "else" exclude each other, as they do in practice); without "else", an
 * "if" that tests one property against a const or enum (a discriminator)
 * is negated exactly (the property absent or holding another value), and
 * any other "if" is not enforced. additionalProperties absent in one
 * branch defers to the others (cllm reads an absent one as false, so a
 * branch that names properties does not forbid another branch's).
 * not: of {} or true, the schema false; of a type or types, the types
 * left; of {"required": [one name]}, that property removed; of a const or
 * an enum, those values out of the schema's own enum; any other not is not
 * enforced (dropped).
 * Two different patterns or formats in one intersection are refused: the
 * grammar of a regex intersection is not built. */
#include "grammar/schema_merge.h"

#include "grammar/schema_values.h"
#include "util/error.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MERGE_DEPTH 64
/* What the merge functions return when the intersection is empty (no error
 * set): the result is the schema false, which an anyOf drops as a choice and
 * an object as a property. */
#define MATCHES_NOTHING 1

/* ---- references ---- */

static json_t *find_anchor(json_t *s, const char *name, int depth) {
    if (depth > MAX_MERGE_DEPTH) return NULL;
    if (json_is_object(s)) {
        const char *a = json_string_value(json_object_get(s, "$anchor"));
        const char *d = json_string_value(json_object_get(s, "$dynamicAnchor"));
        if ((a && !strcmp(a, name)) || (d && !strcmp(d, name))) return s;
        const char *k;
        json_t *v;
        json_object_foreach(s, k, v) {
            if (!strcmp(k, "enum") || !strcmp(k, "const") || !strcmp(k, "examples") ||
                !strcmp(k, "default"))
                continue;
            json_t *hit = find_anchor(v, name, depth + 1);
            if (hit) return hit;
        }
    } else if (json_is_array(s)) {
        size_t i;
        json_t *v;
        json_array_foreach(s, i, v) {
            json_t *hit = find_anchor(v, name, depth + 1);
            if (hit) return hit;
        }
    }
    return NULL;
}

json_t *schema_resolve_ref(json_t *root, const char *ref) {
    if (!root || ref[0] != '#') return NULL;
    if (ref[1] && ref[1] != '/') {
        /* "#name": the root when it is the dynamic anchor ($dynamicRef's
         * usual target: the outermost schema), else the first one so named. */
        const char *d = json_string_value(json_object_get(root, "$dynamicAnchor"));
        if (d && !strcmp(d, ref + 1)) return root;
        return find_anchor(root, ref + 1, 0);
    }
    json_t *at = root;
    const char *p = ref + 1;
    while (*p == '/' && at) {
        p++;
        char seg[256];
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = p[1] == '0' ? '~' : '/', p++;
            else if (ch == '%')
                return NULL; /* URI-escaped pointers are not supported */
            if (n + 1 >= sizeof seg) return NULL;
            seg[n++] = ch;
        }
        seg[n] = 0;
        if (json_is_object(at)) {
            at = json_object_get(at, seg);
        } else if (json_is_array(at)) {
            char *end;
            const long i = strtol(seg, &end, 10);
            at = *seg && !*end && i >= 0 ? json_array_get(at, (size_t)i) : NULL;
        } else {
            at = NULL;
        }
    }
    return *p ? NULL : at;
}

const char *schema_ref_of(json_t *schema) {
    const char *r = json_string_value(json_object_get(schema, "$ref"));
    if (r) return r;
    if (json_object_get(schema, "$recursiveRef")) return "#";
    return json_string_value(json_object_get(schema, "$dynamicRef"));
}

/* ---- types as sets ---- */

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_OBJECT = 4,
    T_ARRAY = 8,
    T_STRING = 16,
    T_INT = 32,
    T_FRAC = 64,
    T_ALL = 127
};
static const char *const TYPE_NAMES[] = {"null", "boolean", "object", "array", "string", "integer"};

static int type_bits_of(json_t *t) {
    if (!t) return T_ALL;
    json_t *one = t;
    size_t i = 0;
    int bits = 0;
    for (;;) {
        if (json_is_array(t)) {
            if (i >= json_array_size(t)) break;
            one = json_array_get(t, i++);
        }
        const char *s = json_string_value(one);
        if (!s) return -1;
        if (!strcmp(s, "number")) bits |= T_INT | T_FRAC;
        for (int k = 0; k < 6; k++)
            if (!strcmp(s, TYPE_NAMES[k])) bits |= 1 << k;
        if (!json_is_array(t)) break;
    }
    return bits;
}

static json_t *type_of_bits(int bits) {
    json_t *list = json_array();
    if (!list) return NULL;
    for (int k = 0; k < 5; k++)
        if (bits & (1 << k)) json_array_append_new(list, json_string(TYPE_NAMES[k]));
    if (bits & T_FRAC)
        json_array_append_new(list, json_string("number"));
    else if (bits & T_INT)
        json_array_append_new(list, json_string("integer"));
    if (json_array_size(list) == 1) {
        json_t *one = json_incref(json_array_get(list, 0));
        json_decref(list);
        return one;
    }
    return list;
}

/* ---- the merge ---- */

typedef struct {
    json_t *root;
    json_t *acc;  /* the merged keywords */
    json_t *alts; /* arrays of choices still to distribute */
    json_t *seen; /* the references merged so far: X and X is X, so each is merged once */
    int depth;
} merge_ctx;

static const char *const MIN_KEYS[] = {"minimum",       "exclusiveMinimum", "minLength", "minItems",
                                       "minProperties", "minContains",      NULL};
static const char *const MAX_KEYS[] = {"maximum",       "exclusiveMaximum", "maxLength", "maxItems",
                                       "maxProperties", "maxContains",      NULL};
/* Keywords holding one schema: both branches' apply (allOf of the two). */
static const char *const SUBSCHEMA_KEYS[] = {"items",
                                             "additionalProperties",
                                             "unevaluatedProperties",
                                             "unevaluatedItems",
                                             "propertyNames",
                                             "contains",
                                             "additionalItems",
                                             NULL};
/* Keywords holding name -> schema maps. */
static const char *const MAP_KEYS[] = {"properties", "patternProperties", "dependentSchemas", NULL};

static bool listed(const char *k, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

static json_t *all_of2(json_t *a, json_t *b) {
    if (json_is_true(a) || json_is_false(b)) return json_incref(b);
    if (json_is_true(b) || json_is_false(a)) return json_incref(a);
    return json_pack("{s:[O,O]}", "allOf", a, b);
}

static long long gcd_ll(long long a, long long b) {
    while (b) {
        const long long t = a % b;
        a = b, b = t;
    }
    return a;
}

static bool list_has(json_t *list, json_t *v) {
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) if (json_equal(x, v)) return true;
    return false;
}

/* The values of an enum or const as a list (new reference). */
static json_t *values_of(const char *key, json_t *v) {
    return !strcmp(key, "const") ? json_pack("[O]", v) : json_is_array(v) ? json_incref(v) : NULL;
}

static int merge_values(merge_ctx *m, const char *key, json_t *v) {
    json_t *old_key = json_object_get(m->acc, "enum") ? json_object_get(m->acc, "enum")
                                                      : json_object_get(m->acc, "const");
    if (!old_key)
        return json_object_set(m->acc, key, v) ? err_oom("JSON schema: out of memory") : 0;
    json_t *old = values_of(json_object_get(m->acc, "enum") ? "enum" : "const", old_key);
    json_t *new = values_of(key, v);
    json_t *both = json_array();
    if (!old || !new || !both) {
        json_decref(old), json_decref(new), json_decref(both);
        return err_set("allOf: '%s' must be a list", key);
    }
    size_t i;
    json_t *a;
    json_array_foreach(old, i, a) if (list_has(new, a)) json_array_append(both, a);
    json_decref(old), json_decref(new);
    if (!json_array_size(both)) {
        json_decref(both);
        return MATCHES_NOTHING; /* no value in common */
    }
    json_object_del(m->acc, "const");
    json_object_set_new(m->acc, "enum", both);
    return 0;
}

static int merge_map(merge_ctx *m, const char *key, json_t *v) {
    if (!json_is_object(v)) return err_set("allOf: '%s' must be an object", key);
    json_t *old = json_object_get(m->acc, key);
    if (!old)
        return json_object_set_new(m->acc, key, json_copy(v))
                   ? err_oom("JSON schema: out of memory")
                   : 0;
    if (!json_is_object(old)) return err_set("allOf: '%s' must be an object", key);
    const char *name;
    json_t *s;
    json_object_foreach(v, name, s) {
        json_t *prev = json_object_get(old, name);
        if (json_object_set_new(old, name, prev ? all_of2(prev, s) : json_incref(s)))
            return err_oom("JSON schema: out of memory");
    }
    return 0;
}

static int merge_required(merge_ctx *m, json_t *v) {
    if (!json_is_array(v)) return err_set("allOf: '%s' must be an array", "required");
    json_t *old = json_object_get(m->acc, "required");
    if (!old)
        return json_object_set_new(m->acc, "required", json_copy(v))
                   ? err_oom("JSON schema: out of memory")
                   : 0;
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) if (!list_has(old, a)) json_array_append(old, a);
    return 0;
}

static int merge_key(merge_ctx *m, const char *k, json_t *v) {
    json_t *old = json_object_get(m->acc, k);
    if (!strcmp(k, "const") || !strcmp(k, "enum")) return merge_values(m, k, v);
    if (listed(k, MAP_KEYS)) return merge_map(m, k, v);
    if (!strcmp(k, "required")) return merge_required(m, v);
    if (!old || json_equal(old, v))
        return json_object_set(m->acc, k, v) ? err_oom("JSON schema: out of memory") : 0;
    json_t *merged = NULL;
    if (!strcmp(k, "type")) {
        const int a = type_bits_of(old), b = type_bits_of(v);
        if (a < 0 || b < 0) return err_set("'%s' must be a string or a list of strings", "type");
        if (!(a & b)) return MATCHES_NOTHING; /* no type in common */
        merged = type_of_bits(a & b);
    } else if (listed(k, SUBSCHEMA_KEYS)) {
        merged = all_of2(old, v);
    } else if (listed(k, MIN_KEYS) || listed(k, MAX_KEYS)) {
        if (!json_is_number(old) || !json_is_number(v))
            return err_set("allOf: '%s' must be a number", k);
        const bool bigger = json_number_value(v) > json_number_value(old);
        merged = json_incref(bigger == listed(k, MIN_KEYS) ? v : old);
    } else if (!strcmp(k, "uniqueItems")) {
        merged = json_boolean(json_is_true(old) || json_is_true(v));
    } else if (!strcmp(k, "nullable")) {
        merged = json_boolean(json_is_true(old) && json_is_true(v));
    } else if (!strcmp(k, "not")) {
        merged = json_pack("{s:[O,O]}", "anyOf", old, v);
    } else if (!strcmp(k, "multipleOf") && json_is_integer(old) && json_is_integer(v) &&
               json_integer_value(old) > 0 && json_integer_value(v) > 0) {
        const long long a = json_integer_value(old), b = json_integer_value(v);
        merged = json_integer(a / gcd_ll(a, b) * b);
    } else if (!strcmp(k, "prefixItems")) {
        if (!json_is_array(old) || !json_is_array(v))
            return err_set("allOf: '%s' must be an array", k);
        merged = json_array();
        for (size_t i = 0; merged && (i < json_array_size(old) || i < json_array_size(v)); i++) {
            json_t *a = json_array_get(old, i), *b = json_array_get(v, i);
            json_array_append_new(merged, a && b ? all_of2(a, b) : json_incref(a ? a : b));
        }
    } else if (!strcmp(k, "pattern") || !strcmp(k, "format")) {
        return 0; /* two different ones: no regex intersection is built; the first stands, the other
                     is not enforced */
    } else {
        return 0; /* an annotation or an assertion not enforced: the first branch's stands */
    }
    if (!merged) return err_oom("JSON schema: out of memory");
    return json_object_set_new(m->acc, k, merged) ? err_oom("JSON schema: out of memory") : 0;
}

/* The negation of an "if" that tests one property against a const or an
 * enum (the discriminator schemas use), as a list of choices: the property
 * absent (only when "if" requires it) or present with another value. NULL
 * (no error) for any other "if": an "if" without "else" is then not
 * enforced. */
static json_t *negate_if(json_t *cond) {
    json_t *props = json_object_get(cond, "properties"), *req = json_object_get(cond, "required");
    const size_t n_keys = json_is_object(cond) ? json_object_size(cond) : 0;
    if (!json_is_object(props) || json_object_size(props) != 1 || n_keys != 1 + (req != NULL))
        return NULL;
    const char *name = json_object_iter_key(json_object_iter(props));
    json_t *test = json_object_iter_value(json_object_iter(props));
    const size_t test_keys = json_is_object(test) ? json_object_size(test) : 0;
    if (!(json_object_get(test, "const") || json_object_get(test, "enum")) ||
        test_keys != 1 + (json_object_get(test, "type") != NULL))
        return NULL;
    bool requires = false;
    if (req) {
        if (!json_is_array(req) || json_array_size(req) > 1) return NULL;
        if (json_array_size(req) == 1) {
            const char *r = json_string_value(json_array_get(req, 0));
            if (!r || strcmp(r, name)) return NULL;
            requires = true;
        }
    }
    json_t *other_value = json_object_get(test, "const")
                              ? json_pack("{s:O}", "const", json_object_get(test, "const"))
                              : json_pack("{s:O}", "enum", json_object_get(test, "enum"));
    json_t *out = json_pack("[{s:[s],s:{s:{s:o}}}]", "required", name, "properties", name, "not",
                            other_value);
    if (out && requires)
        json_array_append_new(out, json_pack("{s:{s:[s]}}", "not", "required", name));
    return out;
}

static int push_choices(merge_ctx *m, json_t *choices) {
    return json_array_append(m->alts, choices) ? err_oom("JSON schema: out of memory") : 0;
}

static int merge_one(merge_ctx *m, json_t *s) {
    if (json_is_true(s)) return 0;
    if (json_is_false(s)) return MATCHES_NOTHING;
    if (!json_is_object(s)) return err_set("allOf: a branch must be a schema object or a boolean");
    if (++m->depth > MAX_MERGE_DEPTH)
        return err_set("allOf/$ref nested too deeply (over %d levels)", MAX_MERGE_DEPTH);
    int rc = 0;
    const char *ref = schema_ref_of(s);
    if (ref && !json_object_get(m->seen, ref)) {
        json_t *target = schema_resolve_ref(m->root, ref);
        if (json_object_set(m->seen, ref, json_true()))
            rc = err_oom("JSON schema: out of memory");
        else if (target)
            rc = merge_one(m, target);
        else if (ref[0] == '#') /* a reference within the schema to nothing: the schema is wrong */
            rc = err_set("cannot resolve $ref '%s' (only references within the schema: #, "
                         "#/JSON/pointer, #anchor)",
                         ref);
        /* A reference to another document (a URI): not fetched, so not enforced (any value), as
         * XGrammar and llguidance do. */
    }
    json_t *v = json_object_get(s, "allOf");
    if (!rc && v) {
        if (!json_is_array(v)) rc = err_set("'%s' must be an array", "allOf");
        size_t i;
        json_t *b;
        if (!rc) json_array_foreach(v, i, b) if (!rc) rc = merge_one(m, b);
    }
    if (!rc && (v = json_object_get(s, "anyOf"))) rc = push_choices(m, v);
    if (!rc && (v = json_object_get(s, "oneOf"))) rc = push_choices(m, v);
    json_t *cond = json_object_get(s, "if"), *then = json_object_get(s, "then"),
           *other = json_object_get(s, "else");
    if (!rc && cond && (then || other)) {
        /* anyOf[if and then, else]; without an else, the negated if where it can be written */
        json_t *choices = other ? json_pack("[O]", other) : negate_if(cond);
        if (choices && json_array_insert_new(choices, 0, all_of2(cond, then ? then : json_true())))
            rc = err_oom("JSON schema: out of memory");
        if (!rc && choices) rc = push_choices(m, choices);
        json_decref(choices);
    }
    const char *k;
    json_object_foreach(s, k, v) {
        if (rc) break;
        if (!strcmp(k, "$ref") || !strcmp(k, "$recursiveRef") || !strcmp(k, "$dynamicRef") ||
            !strcmp(k, "allOf") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf") || !strcmp(k, "if") ||
            !strcmp(k, "then") || !strcmp(k, "else"))
            continue;
        rc = merge_key(m, k, v);
    }
    m->depth--;
    return rc;
}

/* Whether a schema object asserts nothing (only annotations, or empty):
 * its "not" matches nothing. */
static bool asserts_nothing(json_t *s) {
    if (json_is_true(s)) return true;
    if (!json_is_object(s)) return false;
    static const char *const notes[] = {"title",   "description", "$comment", "examples",
                                        "default", "deprecated",  NULL};
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (!listed(k, notes)) return false;
    return true;
}

/* The enum values of acc that `negated` (a const or an enum) leaves; acc
 * unchanged when it holds no value list (the not is then not enforced). */
static int drop_values(json_t *acc, json_t *negated) {
    json_t *list = json_object_get(acc, "enum") ? json_object_get(acc, "enum") : json_object_get(acc, "const");
    if (!list) {
        json_t *c = json_object_get(negated, "const");
        const char *type = json_string_value(json_object_get(acc, "type"));
        if (c && json_is_boolean(c) && type && !strcmp(type, "boolean"))
            json_object_set_new(acc, "const", json_boolean(!json_is_true(c)));
        return 0;
    }
    json_t *have = values_of(json_object_get(acc, "enum") ? "enum" : "const", list);
    json_t *gone = json_object_get(negated, "enum") ? json_incref(json_object_get(negated, "enum"))
                                                    : json_pack("[O]", json_object_get(negated, "const"));
    json_t *kept = json_array();
    if (!have || !gone || !kept || !json_is_array(gone)) {
        json_decref(have), json_decref(gone), json_decref(kept);
        return err_set("'not': '%s' must be a list", "enum");
    }
    size_t i;
    json_t *a;
    json_array_foreach(have, i, a) if (!list_has(gone, a)) json_array_append(kept, a);
    json_decref(have), json_decref(gone);
    json_object_del(acc, "const");
    json_object_set_new(acc, "enum", kept);
    return json_array_size(kept) ? 0 : MATCHES_NOTHING;
}

/* One "not" the grammar can hold, applied to acc: of nothing ({} or true),
 * the schema false; of an anyOf, each of its choices (not (A or B) is not A
 * and not B; the merge joins two branches' nots so); of types, the types
 * left; of one required name, the property removed; of a const or an enum,
 * those values taken out of the schema's own enum. Any other is dropped.
 * 0, MATCHES_NOTHING or -1. */
static int apply_one_not(json_t *acc, json_t *negated, int depth) {
    if (asserts_nothing(negated)) return MATCHES_NOTHING;
    const size_t n_keys = json_is_object(negated) ? json_object_size(negated) : 0;
    json_t *choices = json_object_get(negated, "anyOf");
    if (n_keys == 1 && json_is_array(choices) && depth < MAX_MERGE_DEPTH) {
        size_t i;
        json_t *x;
        json_array_foreach(choices, i, x) {
            const int rc = apply_one_not(acc, x, depth + 1);
            if (rc) return rc;
        }
        return 0;
    }
    json_t *nt = json_object_get(negated, "type");
    if (nt && n_keys == 1) {
        const int have = type_bits_of(json_object_get(acc, "type")), drop = type_bits_of(nt);
        if (have < 0 || drop < 0) return err_set("'%s' must be a string or a list of strings", "type");
        if (!(have & ~drop)) return MATCHES_NOTHING;
        json_object_set_new(acc, "type", type_of_bits(have & ~drop));
    }
    if (n_keys == 1 && (json_object_get(negated, "const") || json_object_get(negated, "enum"))) {
        const int rc = drop_values(acc, negated);
        if (rc) return rc;
    }
    json_t *req = json_object_get(negated, "required");
    if (n_keys == 1 && json_is_array(req) && json_array_size(req) == 1) {
        json_t *name = json_array_get(req, 0);
        json_t *props = json_object_get(acc, "properties");
        if (list_has(json_object_get(acc, "required"), name)) return MATCHES_NOTHING;
        if (json_is_string(name) && json_is_object(props)) json_object_del(props, json_string_value(name));
    }
    return 0;
}

static int apply_not(json_t *acc) {
    json_t *negated = json_incref(json_object_get(acc, "not"));
    if (!negated) return 0;
    json_object_del(acc, "not");
    const int rc = apply_one_not(acc, negated, 0);
    json_decref(negated);
    return rc;
}

static json_t *flatten_at(json_t *root, json_t *schema, int depth);

/* acc with its maps and required list copied too: a merge changes those in
 * place, and the branches of one expansion must not see each other's. */
static json_t *copy_acc(json_t *acc) {
    json_t *out = json_copy(acc);
    if (!out) return NULL;
    static const char *const deep[] = {"properties", "patternProperties", "dependentSchemas", "required", NULL};
    for (int i = 0; deep[i]; i++) {
        json_t *v = json_object_get(out, deep[i]);
        if (v && json_object_set_new(out, deep[i], json_copy(v))) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Whether a required property of acc can hold no value (its schema false,
 * or rewritten to false: a discriminator with two different values). */
static int required_never(json_t *root, json_t *acc, int depth) {
    json_t *props = json_object_get(acc, "properties"), *name;
    size_t i;
    if (depth >= 2 || !json_is_object(props)) return 0;
    json_array_foreach(json_object_get(acc, "required"), i, name) {
        json_t *p = json_is_string(name) ? json_object_get(props, json_string_value(name)) : NULL;
        if (json_is_false(p)) return 1;
        if (!json_is_object(p) || !(json_object_get(p, "allOf") || json_object_get(p, "not"))) continue;
        json_t *flat = flatten_at(root, p, depth + 1);
        if (!flat) return -1;
        const int never = json_is_false(flat);
        json_decref(flat);
        if (never) return 1;
    }
    return 0;
}

/* acc's enum narrowed to the values its other keywords admit
 * (schema_values.h): MATCHES_NOTHING when none is left, so a choice of
 * names merged with a pattern for one of them keeps that one. */
static int narrow_values(json_t *acc) {
    json_t *values = schema_admitted_values(acc);
    if (!values) return json_object_get(acc, "enum") || json_object_get(acc, "const") ? -1 : 0;
    const size_t n = json_array_size(values);
    json_t *old = json_object_get(acc, "enum");
    int rc = 0;
    if (!n) rc = MATCHES_NOTHING;
    else if (!json_is_array(old) || json_array_size(old) != n) {
        json_object_del(acc, "const");
        rc = json_object_set(acc, "enum", values) ? err_oom("JSON schema: out of memory") : 0;
    }
    json_decref(values);
    return rc;
}

typedef struct {
    json_t *root;
    json_t *out; /* the consistent combinations, merged */
    int steps;   /* merges left */
    int depth;
} expansion;

/* Every consistent combination of the choice lists alts[i..], each merged
 * into acc, depth first: a branch is dropped as soon as its merge matches
 * nothing or leaves a required property no value, so a discriminator's k
 * if/then groups cost about k * k merges, not 2^k. */
static int expand(expansion *e, json_t *acc, json_t *seen, json_t *alts, size_t i) {
    if (i == json_array_size(alts)) {
        json_t *leaf = copy_acc(acc);
        if (!leaf) return err_oom("JSON schema: out of memory");
        int rc = apply_not(leaf);
        if (rc == 0) rc = narrow_values(leaf);
        if (rc == 0 && json_array_append(e->out, leaf)) {
            json_decref(leaf);
            return err_oom("JSON schema: out of memory");
        }
        json_decref(leaf);
        return rc == MATCHES_NOTHING ? 0 : rc;
    }
    json_t *choices = json_array_get(alts, i), *choice;
    if (!json_is_array(choices) || !json_array_size(choices)) return err_set("'%s' must be a non-empty array", "anyOf");
    size_t k;
    json_array_foreach(choices, k, choice) {
        if (--e->steps < 0 || json_array_size(e->out) >= 1024)
            return err_set("anyOf/oneOf/if choices make over %d combinations to merge", 1024);
        merge_ctx m = {.root = e->root, .acc = copy_acc(acc), .alts = json_copy(alts), .seen = json_copy(seen)};
        int rc = !m.acc || !m.alts || !m.seen ? err_oom("JSON schema: out of memory") : merge_one(&m, choice);
        if (rc == 0) rc = narrow_values(m.acc);
        if (rc == 0) rc = required_never(e->root, m.acc, e->depth);
        if (rc == 0) rc = expand(e, m.acc, m.seen, m.alts, i + 1); /* choices the choice holds come last */
        json_decref(m.acc), json_decref(m.alts), json_decref(m.seen);
        if (rc < 0) return rc;
    }
    return 0;
}

static json_t *flatten_at(json_t *root, json_t *schema, int depth) {
    merge_ctx m = {.root = root, .acc = json_object(), .alts = json_array(), .seen = json_object()};
    expansion e = {.root = root, .out = json_array(), .steps = 4096, .depth = depth};
    json_t *out = NULL;
    if (!m.acc || !m.alts || !m.seen || !e.out) {
        err_oom("JSON schema: out of memory");
    } else {
        int rc = merge_one(&m, schema);
        if (rc == 0) rc = expand(&e, m.acc, m.seen, m.alts, 0);
        if (rc == MATCHES_NOTHING || (rc == 0 && !json_array_size(e.out))) out = json_false();
        else if (rc == 0 && json_array_size(e.out) == 1) out = json_incref(json_array_get(e.out, 0));
        else if (rc == 0) out = json_pack("{s:O}", "anyOf", e.out);
        if (rc == 0 && !out) err_oom("JSON schema: out of memory");
    }
    json_decref(m.acc), json_decref(m.alts), json_decref(m.seen), json_decref(e.out);
    return out;
}

json_t *schema_flatten(json_t *root, json_t *schema) { return flatten_at(root, schema, 0); }
