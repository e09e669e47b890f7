/* JSON Schema's combining and narrowing keywords compiled to grammars:
 * allOf of several schemas and $ref with assertions beside it (merged
 * into one), anyOf inside allOf (distributed), if/then/else, not of a type
 * or of a required name, minProperties/maxProperties (counted, with no
 * dead ends), patternProperties and propertyNames (the keys of additional
 * properties), draft 4 tuples, $recursiveRef and $dynamicRef, the formats
 * with a grammar and the ones that are only annotations; each on strings
 * the schema must take and strings it must refuse, and the refusals that
 * remain (no common type, two patterns, counts no object can meet). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "schema_match.h"

#include <stdio.h>
#include <stdlib.h>

/* Every string of `yes` matches, none of `no` does. */
static void check(const char *json, const char *const *yes, const char *const *no) {
    grammar *g = schema(json, false);
    for (int i = 0; yes[i]; i++)
        if (!matches(g, yes[i])) fail_msg("%s\nshould take %s", json, yes[i]);
    for (int i = 0; no[i]; i++)
        if (matches(g, no[i])) fail_msg("%s\nshould refuse %s", json, no[i]);
    grammar_free(g);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_allof_merges_the_branches(void **state) {
    (void)state;
    check("{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
          "\"required\": [\"a\"]},"
          " {\"properties\": {\"b\": {\"type\": \"string\"}}, \"required\": [\"b\"]}]}",
          LIST("{\"a\": 1, \"b\": \"x\"}"),
          LIST("{\"a\": 1}", "{\"b\": \"x\"}", "{\"a\": 1, \"b\": 2}"));
    /* A property in two branches gets both schemas. */
    check("{\"allOf\": [{\"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 0}}}, "
          "{\"properties\": {\"n\": {\"maximum\": 5}}}], \"required\": [\"n\"]}",
          LIST("{\"n\": 0}", "{\"n\": 5}"), LIST("{\"n\": 6}", "{\"n\": -1}", "{\"n\": 1.5}"));
    /* Types intersect, "integer" within "number"; enums keep the common values. */
    check("{\"allOf\": [{\"type\": [\"number\", \"string\"]}, {\"type\": \"integer\"}]}",
          LIST("3", "-12"), LIST("3.5", "\"a\"", "null"));
    check("{\"allOf\": [{\"enum\": [\"a\", \"b\", 3]}, {\"enum\": [3, \"b\", \"c\"]}]}",
          LIST("\"b\"", "3"), LIST("\"a\"", "\"c\""));
    /* Bounds: the larger minimum, the smaller maximum. */
    check("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"allOf\": [{\"minItems\": 1, "
          "\"maxItems\": 3}, "
          "{\"minItems\": 2}]}",
          LIST("[1, 2]", "[1, 2, 3]"), LIST("[1]", "[1, 2, 3, 4]"));
    /* allOf nested inside a branch, and true as a branch. */
    check("{\"allOf\": [true, {\"allOf\": [{\"type\": \"string\"}, {\"minLength\": 2}]}]}",
          LIST("\"ab\""), LIST("\"a\"", "1"));
}

static void test_ref_with_assertions_beside_it(void **state) {
    (void)state;
    check("{\"$defs\": {\"s\": {\"type\": \"string\"}}, \"$ref\": \"#/$defs/s\", \"minLength\": 2}",
          LIST("\"ab\""), LIST("\"a\"", "2"));
    check("{\"$defs\": {\"base\": {\"type\": \"object\", \"properties\": {\"id\": {\"type\": "
          "\"integer\"}}, "
          "\"required\": [\"id\"]}}, \"type\": \"object\", \"properties\": {\"item\": {\"$ref\": "
          "\"#/$defs/base\", "
          "\"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": [\"name\"], "
          "\"description\": \"d\"}}, "
          "\"required\": [\"item\"]}",
          LIST("{\"item\": {\"id\": 1, \"name\": \"x\"}}"),
          LIST("{\"item\": {\"id\": 1}}", "{\"item\": {\"name\": \"x\"}}"));
    /* A recursive target keeps its recursion beside the merge. */
    check("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"kids\": {\"type\": "
          "\"array\", \"items\": "
          "{\"$ref\": \"#/$defs/node\"}}}}}, \"$ref\": \"#/$defs/node\", \"required\": [\"kids\"]}",
          LIST("{\"kids\": []}", "{\"kids\": [{}, {\"kids\": [{}]}]}"),
          LIST("{}", "{\"kids\": [1]}"));
    /* A type beside the reference that contradicts it. */
    assert_contains(schema_error("{\"$ref\": \"#/$defs/s\", \"type\": \"integer\", \"$defs\": {\"s\": "
                                 "{\"type\": \"string\"}}}"),
                    "no value matches the schema at #");
}

/* Renovate's shape: 150 definitions, each the root schema merged with the
 * same extra options and told apart only by descriptions and defaults, and
 * the root naming all of them. Merged one by one they are 150 copies of a
 * 200-property object (about 90,000 rules, past the bound); as one
 * rewritten schema they are one. */
static void test_merges_that_differ_in_annotations_compile_once(void **state) {
    (void)state;
    enum { N_PLAIN = 50, N_DEFS = 150 };
    size_t cap = 64 * 1024, n = 0;
    char *text = malloc(cap);
#define OUT(...) n += (size_t)snprintf(text + n, cap - n, __VA_ARGS__)
    OUT("{\"type\": \"object\", \"properties\": {");
    for (int i = 0; i < N_PLAIN; i++)
        OUT("\"p%d\": {\"type\": \"string\"}, ", i);
    for (int i = 0; i < N_DEFS; i++)
        OUT("%s\"m%d\": {\"$ref\": \"#/definitions/m%d\"}", i ? ", " : "", i, i);
    OUT("}, \"definitions\": {");
    for (int i = 0; i < N_DEFS; i++)
        OUT("%s\"m%d\": {\"description\": \"manager %d\", \"default\": {\"p0\": \"v%d\"}, "
            "\"$ref\": \"#\", "
            "\"allOf\": [{\"type\": \"object\", \"properties\": {\"q\": {\"type\": "
            "\"integer\"}}}]}",
            i ? ", " : "", i, i, i);
    OUT("}}");
#undef OUT
    assert_true(n < cap);
    grammar *g = schema(text, false);
    assert_true(g->n_rules < 5000);
    /* Properties come in the merged order: the root's, then the manager's own. */
    assert_true(
        matches(g, "{\"p0\": \"a\", \"m7\": {\"p1\": \"b\", \"m9\": {\"q\": 4}, \"q\": 3}}"));
    assert_false(matches(g, "{\"q\": 3}")); /* the root has no q; only a manager does */
    assert_false(matches(g, "{\"m7\": {\"q\": \"x\"}}"));
    grammar_free(g);
    free(text);
}

/* oneOf of closed objects with disjoint names: {} matches both, so neither may be empty. */
static void test_one_of_closed_disjoint_objects(void **state) {
    (void)state;
    check("{\"oneOf\": [{\"type\": \"object\", \"additionalProperties\": false, \"properties\": "
          "{\"env\": "
          "{\"type\": \"string\"}}}, {\"$ref\": \"#/$defs/f\"}], \"$defs\": {\"f\": {\"type\": "
          "\"object\", "
          "\"additionalProperties\": false, \"properties\": {\"file\": {\"type\": \"string\"}}}}}",
          LIST("{\"env\": \"a\"}", "{\"file\": \"b\"}"),
          LIST("{}", "{\"env\": \"a\", \"file\": \"b\"}"));
    /* Open objects, or names in common: left as they are ({} stays, as a grammar cannot do better).
     */
    check("{\"oneOf\": [{\"type\": \"object\", \"additionalProperties\": false, \"properties\": "
          "{\"a\": {}}}, "
          "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {\"a\": {}, "
          "\"b\": {}}}]}",
          LIST("{}", "{\"a\": 1}"), LIST("[]"));
}

static void test_anyof_inside_allof_is_distributed(void **state) {
    (void)state;
    check("{\"allOf\": [{\"type\": \"object\", \"properties\": {\"k\": {\"type\": \"string\"}}, "
          "\"required\": [\"k\"]}], "
          "\"anyOf\": [{\"properties\": {\"x\": {\"type\": \"integer\"}}, \"required\": [\"x\"]}, "
          "{\"properties\": {\"y\": {\"type\": \"boolean\"}}, \"required\": [\"y\"]}]}",
          LIST("{\"k\": \"a\", \"x\": 1}", "{\"k\": \"a\", \"y\": true}"),
          LIST("{\"k\": \"a\"}", "{\"x\": 1}", "{\"k\": \"a\", \"x\": true}"));
    /* Two choice lists: every combination. */
    check("{\"allOf\": [{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]}, "
          "{\"oneOf\": [{\"minimum\": 5}, {\"maxLength\": 1}]}]}",
          LIST("7", "\"a\"", "2"), LIST("true", "null"));
}

static void test_if_then_else_and_not(void **state) {
    (void)state;
    const char *cond =
        "{\"type\": \"object\", \"properties\": {\"kind\": {\"enum\": [\"a\", \"b\"]}, \"v\": {}}, "
        "\"required\": [\"kind\"], \"if\": {\"properties\": {\"kind\": {\"const\": \"a\"}}}, "
        "\"then\": {\"properties\": {\"v\": {\"type\": \"integer\"}}, \"required\": [\"v\"]}, "
        "\"else\": {\"properties\": {\"kind\": {\"const\": \"b\"}}}}";
    check(
        cond,
        LIST("{\"kind\": \"a\", \"v\": 1}", "{\"kind\": \"b\"}", "{\"kind\": \"b\", \"v\": \"s\"}"),
        LIST("{\"kind\": \"a\"}", "{\"kind\": \"a\", \"v\": \"s\"}"));
    check("{\"not\": {\"type\": \"null\"}}", LIST("1", "\"x\"", "{}", "[]", "true"), LIST("null"));
    check("{\"type\": [\"string\", \"integer\", \"null\"], \"not\": {\"type\": [\"null\", "
          "\"string\"]}}",
          LIST("4"), LIST("null", "\"s\""));
    check("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": "
          "{\"type\": \"integer\"}}, "
          "\"not\": {\"required\": [\"b\"]}}",
          LIST("{\"a\": 1}", "{}"), LIST("{\"a\": 1, \"b\": 2}"));
    assert_contains(schema_error("{\"type\": \"null\", \"not\": {\"type\": \"null\"}}"),
                    "no value matches the schema at #");
    /* not of a value taken out of an enum; "not": {} matches nothing, so such a property is left
     * out. */
    check("{\"enum\": [\"a\", \"b\", \"c\"], \"not\": {\"enum\": [\"b\", \"c\"]}}", LIST("\"a\""),
          LIST("\"b\"", "\"c\""));
    check("{\"type\": \"object\", \"properties\": {\"s\": {\"type\": \"integer\"}, \"c\": "
          "{\"allOf\": [{\"type\": "
          "\"string\"}, {\"not\": {}}]}}}",
          LIST("{\"s\": 1}", "{}"), LIST("{\"s\": 1, \"c\": \"x\"}"));
    assert_contains(schema_error("{\"type\": \"object\", \"properties\": {\"c\": {\"not\": {}}}, "
                                 "\"required\": [\"c\"]}"),
                    "may hold no value");
    /* if/then without else over a discriminator (GitHub's issue forms): the if is negated exactly.
     */
    const char *forms =
        "{\"type\": \"object\", \"properties\": {\"type\": {\"enum\": [\"markdown\", \"input\"]}, "
        "\"attributes\": {\"type\": \"object\"}}, \"required\": [\"type\"], \"allOf\": [{\"if\": "
        "{\"properties\": {\"type\": {\"const\": \"input\"}}}, \"then\": {\"required\": "
        "[\"attributes\"]}}]}";
    check(forms,
          LIST("{\"type\": \"input\", \"attributes\": {}}", "{\"type\": \"markdown\"}",
               "{\"type\": \"markdown\", \"attributes\": {}}"),
          LIST("{\"type\": \"input\"}"));
}

/* Keywords beside an anyOf/oneOf apply to every choice (meltano's schedules). */
static void test_choices_keep_their_siblings(void **state) {
    (void)state;
    check("{\"type\": \"object\", \"oneOf\": [{\"required\": [\"name\", \"job\"]}, {\"required\": "
          "[\"name\", "
          "\"loader\"]}], \"additionalProperties\": false, \"properties\": {\"name\": {\"type\": "
          "\"string\"}, "
          "\"job\": {\"type\": \"string\"}, \"loader\": {\"type\": \"string\"}}}",
          LIST("{\"name\": \"a\", \"job\": \"j\"}", "{\"name\": \"a\", \"loader\": \"l\"}"),
          LIST("{\"name\": \"a\", \"job\": [1]}", "{\"name\": \"a\"}",
               "{\"name\": 1, \"job\": \"j\"}"));
    check("{\"type\": \"string\", \"anyOf\": [{\"maxLength\": 1}, {\"pattern\": \"^z+$\"}]}",
          LIST("\"a\"", "\"zzz\""), LIST("\"ab\"", "1"));
    /* A choice whose required discriminator contradicts the one around it is dropped, not an error.
     */
    check("{\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"a\"}, \"x\": {\"type\": "
          "\"integer\"}}, "
          "\"required\": [\"kind\"], \"oneOf\": [{\"properties\": {\"kind\": {\"const\": \"b\"}}}, "
          "{\"required\": [\"x\"]}]}",
          LIST("{\"kind\": \"a\", \"x\": 1}"), LIST("{\"kind\": \"a\"}", "{\"kind\": \"b\"}"));
    /* Three if/then groups over one discriminator: of the eight combinations, the three consistent
     * ones stay. */
    check("{\"type\": \"object\", \"required\": [\"t\"], \"properties\": {\"t\": {\"enum\": "
          "[\"a\", \"b\", \"c\"]}, "
          "\"x\": {\"type\": \"integer\"}, \"y\": {\"type\": \"integer\"}}, \"allOf\": ["
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"a\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"b\"}}}, \"then\": {\"required\": "
          "[\"y\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"c\"}}}, \"then\": {\"required\": "
          "[\"x\", \"y\"]}}]}",
          LIST("{\"t\": \"a\", \"x\": 1}", "{\"t\": \"b\", \"y\": 2}",
               "{\"t\": \"c\", \"x\": 1, \"y\": 2}", "{\"t\": \"a\", \"x\": 1, \"y\": 2}"),
          LIST("{\"t\": \"a\"}", "{\"t\": \"b\", \"x\": 1}", "{\"t\": \"c\", \"x\": 1}",
               "{\"t\": \"d\", \"x\": 1}"));
    /* Six groups (64 combinations, GitHub's issue forms): only one then holds at a time, and each
     * is found. */
    check("{\"type\": \"object\", \"required\": [\"t\"], \"properties\": {\"t\": {\"enum\": "
          "[\"a\", \"b\", \"c\", "
          "\"d\", \"e\", \"f\"]}, \"x\": {\"type\": \"integer\"}}, \"allOf\": ["
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"a\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"b\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"c\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"d\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"e\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}, "
          "{\"if\": {\"properties\": {\"t\": {\"const\": \"f\"}}}, \"then\": {\"required\": "
          "[\"x\"]}}]}",
          LIST("{\"t\": \"a\", \"x\": 1}", "{\"t\": \"f\", \"x\": 2}"),
          LIST("{\"t\": \"e\"}", "{\"t\": \"g\", \"x\": 1}"));
}

static void test_property_counts_have_no_dead_ends(void **state) {
    (void)state;
    const char *ab =
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": "
        "\"integer\"}}, \"minProperties\": 1}";
    check(ab, LIST("{\"a\": 1}", "{\"b\": 2}", "{\"a\": 1, \"b\": 2}"), LIST("{}"));
    check("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": "
          "{\"type\": \"integer\"}}, "
          "\"maxProperties\": 1}",
          LIST("{}", "{\"a\": 1}", "{\"b\": 2}"), LIST("{\"a\": 1, \"b\": 2}"));
    check("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": "
          "[\"a\"], "
          "\"additionalProperties\": true, \"minProperties\": 2, \"maxProperties\": 3}",
          LIST("{\"a\": 1, \"x\": 1}", "{\"a\": 1, \"x\": 1, \"y\": null}"),
          LIST("{\"a\": 1}", "{\"a\": 1, \"x\": 1, \"y\": 2, \"z\": 3}"));
    /* At most one member and b required: writing a first leads nowhere, so it is refused at once.
     */
    grammar *g = schema(
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": "
        "\"integer\"}}, \"required\": [\"b\"], \"maxProperties\": 1}",
        false);
    assert_true(matches(g, "{\"b\": 1}"));
    assert_false(viable(g, "{\"a"));
    assert_false(matches(g, "{\"a\": 1, \"b\": 1}"));
    grammar_free(g);
    assert_contains(
        schema_error("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"minProperties\": 2}"),
        "no object fits");
    assert_contains(
        schema_error("{\"type\": \"object\", \"minProperties\": 3, \"maxProperties\": 2}"),
        "below minProperties");
}

static void test_pattern_properties_and_property_names(void **state) {
    (void)state;
    check("{\"type\": \"object\", \"patternProperties\": {\"^x-\": {\"type\": \"integer\"}}}",
          LIST("{}", "{\"x-a\": 1}", "{\"x-a\": 1, \"x-b\": 2}"),
          LIST("{\"y\": 1}", "{\"x-a\": \"s\"}"));
    check("{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, "
          "\"required\": [\"name\"], "
          "\"patternProperties\": {\"^[0-9]+$\": {\"type\": \"boolean\"}}}",
          LIST("{\"name\": \"n\", \"12\": true}"), LIST("{\"name\": \"n\", \"a1\": true}"));
    /* Beside patternProperties, additionalProperties would need keys matching no pattern: not
     * written. */
    check("{\"type\": \"object\", \"additionalProperties\": true, \"patternProperties\": "
          "{\"^[a-z]+$\": "
          "{\"type\": \"object\"}}}",
          LIST("{\"id\": {}}"), LIST("{\"id\": \"s\"}", "{\"ID\": 1}"));
    check("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}, "
          "\"propertyNames\": "
          "{\"pattern\": \"^[a-z]+$\"}}",
          LIST("{\"ab\": 1}", "{}"), LIST("{\"A\": 1}", "{\"ab\": \"s\"}"));
    check("{\"type\": \"object\", \"additionalProperties\": true, \"propertyNames\": {\"enum\": "
          "[\"p\", \"q\"]}}",
          LIST("{\"p\": 1, \"q\": [2]}"), LIST("{\"r\": 1}"));
    /* unevaluatedProperties stands in for an absent additionalProperties. */
    check("{\"type\": \"object\", \"unevaluatedProperties\": {\"type\": \"string\"}}",
          LIST("{\"k\": \"v\"}"), LIST("{\"k\": 1}"));
}

static void test_tuples_and_dynamic_references(void **state) {
    (void)state;
    check("{\"type\": \"array\", \"items\": [{\"type\": \"integer\"}, {\"type\": \"string\"}], "
          "\"additionalItems\": "
          "false}",
          LIST("[1, \"a\"]"), LIST("[1, \"a\", 2]", "[\"a\", 1]"));
    check("{\"type\": \"array\", \"items\": [{\"type\": \"integer\"}], \"additionalItems\": "
          "{\"type\": \"boolean\"}}",
          LIST("[1]", "[1, true, false]"), LIST("[1, 2]"));
    check("{\"$recursiveAnchor\": true, \"type\": \"object\", \"properties\": {\"kids\": "
          "{\"type\": \"array\", "
          "\"items\": {\"$recursiveRef\": \"#\"}}}}",
          LIST("{\"kids\": [{\"kids\": []}, {}]}"), LIST("{\"kids\": [3]}"));
    check("{\"$dynamicAnchor\": \"node\", \"type\": \"object\", \"properties\": {\"next\": "
          "{\"$dynamicRef\": "
          "\"#node\"}, \"v\": {\"type\": \"integer\"}}}",
          LIST("{\"next\": {\"v\": 1}, \"v\": 2}"), LIST("{\"next\": 1}"));
    check("{\"$defs\": {\"x\": {\"$anchor\": \"item\", \"type\": \"integer\"}}, \"type\": "
          "\"array\", \"items\": "
          "{\"$ref\": \"#item\"}}",
          LIST("[1, 2]"), LIST("[\"a\"]"));
}

static void test_formats_and_annotations(void **state) {
    (void)state;
    check("{\"type\": \"string\", \"format\": \"ipv6\"}",
          LIST("\"::1\"", "\"2001:db8::8a2e:370:7334\"", "\"fe80:0:0:0:0:0:0:1\"", "\"::\"",
               "\"::ffff:192.0.2.1\"", "\"64:ff9b::1:2:3.4.5.6\"", "\"1:2:3:4:5:6:7::\""),
          LIST("\"1::2::3\"", "\"12345::\"", "\"1.2.3.4\"", "\"1:2:3:4:5:6:7:8:9\"",
               "\"::256.1.1.1\"", "\"1:2:3:4:5:6:7:1.2.3.4\""));
    check("{\"type\": \"string\", \"format\": \"hostname\"}", LIST("\"example.com\"", "\"a-b.c\""),
          LIST("\"-a.com\"", "\"a..b\"", "\"a b\""));
    check("{\"type\": \"string\", \"format\": \"duration\"}",
          LIST("\"P3D\"", "\"PT1H30M\"", "\"P1Y2M\"", "\"P2W\""),
          LIST("\"3D\"", "\"P\"", "\"PT\"", "\"P1M2Y\"", "\"P1DT\""));
    check("{\"type\": \"string\", \"format\": \"uri\"}",
          LIST("\"http://a.b/c?d=1#e\"", "\"mailto:x@y\"", "\"urn:isbn:1\"", "\"s3://b/k%20\""),
          LIST("\"a b:c\"", "\"no-scheme\"", "\"http://a/%zz\""));
    check("{\"type\": \"string\", \"format\": \"uri-reference\"}", LIST("\"../a/b?c=1\"", "\"\""),
          LIST("\"a b\""));
    /* A format without a grammar, and assertions a grammar cannot hold, still compile. */
    check("{\"type\": \"string\", \"format\": \"x-my-format\"}", LIST("\"anything\""), LIST("1"));
    check("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"uniqueItems\": true, "
          "\"contains\": "
          "{\"const\": 1}}",
          LIST("[1, 2]"), LIST("[\"a\"]"));
    check("{\"type\": \"object\", \"properties\": {\"a\": {}, \"b\": {}}, \"dependentRequired\": "
          "{\"a\": [\"b\"]}}",
          LIST("{\"a\": 1, \"b\": 2}"), LIST("{\"c\": 1}"));
    /* Two patterns in one intersection: the first is enforced, the second not (no regex
     * intersection). */
    check("{\"allOf\": [{\"type\": \"string\", \"pattern\": \"^a+$\"}, {\"pattern\": \"b\"}]}",
          LIST("\"aa\""), LIST("\"b\"", "\"ab\""));
    /* A bound out past the range that bounds nothing of it is not enforced; one that would bound
     * all is refused. */
    check("{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9223372036854775807}",
          LIST("0", "123"), LIST("-1"));
    assert_contains(schema_error("{\"type\": \"integer\", \"minimum\": 1e16}"),
                    "out of the supported range");
    /* Draft 3: a type list may hold schemas. */
    check("{\"type\": [\"integer\", {\"type\": \"string\", \"maxLength\": 1}]}", LIST("1", "\"a\""),
          LIST("\"ab\"", "true"));
    assert_contains(schema_error("{\"allOf\": [{\"type\": \"string\"}, false]}"),
                    "no value matches");
    /* A choice no value can match is left out of its anyOf; an anyOf left with none is refused. */
    check("{\"anyOf\": [{\"allOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}, {\"type\": "
          "\"boolean\"}]}",
          LIST("true"), LIST("\"a\"", "1"));
    check("{\"type\": \"object\", \"required\": [\"k\"], \"oneOf\": [{\"not\": {\"required\": "
          "[\"k\"]}}, "
          "{\"properties\": {\"k\": {\"const\": 1}}}]}",
          LIST("{\"k\": 1}"), LIST("{}", "{\"k\": 2}"));
    assert_contains(schema_error("{\"anyOf\": [{\"type\": \"string\", \"not\": {\"type\": \"string\"}}]}"),
                    "no choice of 'anyOf'");
}

/* Forty if/then groups over one discriminator merge in about 40 * 40 steps
 * (each branch is dropped once two groups fix two values), not 2^40; choices
 * that are all consistent with each other past 1,024 combinations are
 * refused with a message rather than built. */
static void test_many_choice_groups(void **state) {
    (void)state;
    char *js = malloc(20000);
    strcpy(js, "{\"type\": \"object\", \"required\": [\"t\"], \"properties\": {\"t\": {\"enum\": [");
    for (int i = 0; i < 40; i++) snprintf(js + strlen(js), 32, "%s\"v%d\"", i ? ", " : "", i);
    strcat(js, "]}, \"x\": {\"type\": \"integer\"}}, \"allOf\": [");
    for (int i = 0; i < 40; i++)
        snprintf(js + strlen(js), 160, "%s{\"if\": {\"properties\": {\"t\": {\"const\": \"v%d\"}}}, \"then\": "
                                      "{\"required\": [\"x\"]}}", i ? ", " : "", i);
    strcat(js, "]}");
    check(js, LIST("{\"t\": \"v0\", \"x\": 1}", "{\"t\": \"v39\", \"x\": 2}"), LIST("{\"t\": \"v7\"}"));
    strcpy(js, "{\"type\": \"object\", \"allOf\": [");
    for (int i = 0; i < 12; i++)
        snprintf(js + strlen(js), 160, "%s{\"anyOf\": [{\"required\": [\"a%d\"]}, {\"required\": [\"b%d\"]}]}",
                 i ? ", " : "", i, i);
    strcat(js, "]}");
    assert_contains(schema_error(js), "over 1024 combinations");
    free(js);
}

/* A number schema takes exactly the values its bounds allow, over whole and
 * fractional values around them (plain decimals; no exponent once bounded). */
static void check_number_range(const char *bounds, double lo, bool lo_ex, double hi, bool hi_ex) {
    char js[256];
    snprintf(js, sizeof js, "{\"type\": \"number\"%s}", bounds);
    grammar *g = schema(js, false);
    static const char *const fracs[] = {"", ".0", ".00", ".5", ".25", ".05", ".999"};
    for (int whole = -25; whole <= 25; whole++)
        for (int f = 0; f < 7; f++)
            for (int neg = 0; neg < 2; neg++) {
                if (neg && whole != 0) continue; /* -0.x: the only way to write values in (-1, 0) */
                char num[48];
                snprintf(num, sizeof num, "%s%d%s", neg ? "-" : "", whole, fracs[f]);
                const double v = strtod(num, NULL);
                const bool in = (lo_ex ? v > lo : v >= lo) && (hi_ex ? v < hi : v <= hi);
                if (neg && v == 0) continue; /* "-0", "-0.0": zero needs no sign (not written) */
                if (matches(g, num) != in) fail_msg("%s: %s should be %s", js, num, in ? "taken" : "refused");
            }
    assert_false(matches(g, "1e0"));
    assert_false(matches(g, "01"));
    grammar_free(g);
}

static void test_number_bounds_exact(void **state) {
    (void)state;
    check_number_range(", \"minimum\": 0, \"maximum\": 1", 0, false, 1, false);
    check_number_range(", \"minimum\": -10, \"maximum\": 10", -10, false, 10, false);
    check_number_range(", \"exclusiveMinimum\": 0", 0, true, 1e18, false);
    check_number_range(", \"minimum\": 0, \"exclusiveMinimum\": true", 0, true, 1e18, false); /* draft 4 */
    check_number_range(", \"exclusiveMinimum\": -3, \"exclusiveMaximum\": 2", -3, true, 2, true);
    check_number_range(", \"maximum\": -2", -1e18, false, -2, false);
    check_number_range(", \"exclusiveMaximum\": 0", -1e18, false, 0, true);
    check_number_range(", \"minimum\": 7, \"maximum\": 7", 7, false, 7, false);
    check_number_range(", \"minimum\": 3, \"exclusiveMinimum\": 3, \"maximum\": 4", 3, true, 4, false);
    grammar *g = schema("{\"type\": \"number\", \"minimum\": 0, \"maximum\": 100}", false);
    assert_true(matches(g, "99.99"));
    assert_true(matches(g, "100.000"));
    assert_false(matches(g, "100.01"));
    assert_false(matches(g, "1000"));
    grammar_free(g);
    assert_contains(schema_error("{\"type\": \"number\", \"maximum\": 2.5}"), "whole value");
    assert_contains(schema_error("{\"type\": \"number\", \"minimum\": 3, \"exclusiveMaximum\": 3}"), "leave no number");
}

static void test_enum_values_meet_the_keywords_beside_them(void **state) {
    (void)state;
    /* An enum compiles to its values: the keywords beside it filter them. */
    check("{\"type\": \"string\", \"enum\": [\"ab\", 3, \"abc\", \"xbc\", null], \"pattern\": \"^a\", \"maxLength\": 2}",
          LIST("\"ab\""), LIST("3", "\"abc\"", "\"xbc\"", "null"));
    check("{\"enum\": [\"2024-01-02\", \"x2024\", \"2024\"], \"pattern\": \"[0-9]{4}-[0-9]{2}\"}",
          LIST("\"2024-01-02\""), LIST("\"x2024\"", "\"2024\""));
    check("{\"enum\": [1, 2.5, 4, 6, 8], \"minimum\": 2, \"exclusiveMaximum\": 8, \"multipleOf\": 2}",
          LIST("4", "6"), LIST("1", "2.5", "8"));
    check("{\"enum\": [\"\\u00e9\\u00e9\", \"abc\"], \"minLength\": 1, \"maxLength\": 2}", /* code points */
          LIST("\"\xc3\xa9\xc3\xa9\""), LIST("\"abc\""));
    check("{\"enum\": [null, \"a\"], \"type\": \"integer\", \"nullable\": true}", LIST("null"), LIST("\"a\""));
    /* A pattern outside the regex subset (lookahead) filters nothing, as before the filter. */
    check("{\"enum\": [\"a\", \"b\"], \"pattern\": \"^(?=a)\"}", LIST("\"a\"", "\"b\""), LIST("\"c\""));
    assert_contains(schema_error("{\"const\": \"a\", \"type\": \"integer\"}"), "no value of 'const'");
    assert_contains(schema_error("{\"enum\": [\"a\", \"b\"], \"pattern\": \"^c\"}"), "no value of 'enum'");
    /* A choice of names merged with one branch's pattern for its own name
     * keeps that name alone (Azure Pipelines' task schemas): 60 branches
     * each keep one name, not all 60 (3,600 parses, past the 2,048 that
     * generation allows), and each name keeps its own branch's fields. */
    char *json = malloc(1 << 16);
    assert_non_null(json);
    int at = sprintf(json, "{\"type\": \"object\", \"properties\": {\"task\": {\"anyOf\": [");
    for (int i = 0; i < 60; i++) at += sprintf(json + at, "%s{\"enum\": [\"T%d@1\"]}", i ? ", " : "", i);
    at += sprintf(json + at, "]}}, \"required\": [\"task\"], \"anyOf\": [");
    for (int i = 0; i < 60; i++)
        at += sprintf(json + at, "%s{\"properties\": {\"task\": {\"pattern\": \"^T%d@1$\"}, \"v%d\": {\"type\": \"integer\"}}}",
                      i ? ", " : "", i, i);
    sprintf(json + at, "]}");
    check(json, LIST("{\"task\": \"T3@1\", \"v3\": 1}", "{\"task\": \"T59@1\"}"),
          LIST("{\"task\": \"T3@1\", \"v5\": 1}", "{\"task\": \"T60@1\"}"));
    free(json);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allof_merges_the_branches),
        cmocka_unit_test(test_ref_with_assertions_beside_it),
        cmocka_unit_test(test_merges_that_differ_in_annotations_compile_once),
        cmocka_unit_test(test_one_of_closed_disjoint_objects),
        cmocka_unit_test(test_anyof_inside_allof_is_distributed),
        cmocka_unit_test(test_if_then_else_and_not),
        cmocka_unit_test(test_choices_keep_their_siblings),
        cmocka_unit_test(test_property_counts_have_no_dead_ends),
        cmocka_unit_test(test_pattern_properties_and_property_names),
        cmocka_unit_test(test_tuples_and_dynamic_references),
        cmocka_unit_test(test_formats_and_annotations),
        cmocka_unit_test(test_number_bounds_exact),
        cmocka_unit_test(test_many_choice_groups),
        cmocka_unit_test(test_enum_values_meet_the_keywords_beside_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
