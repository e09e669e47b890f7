/* The values of a schema's enum or const that its other assertions admit.
 * A schema with an enum compiles to those literal values, so an assertion
 * beside it (a type, a pattern, a length, a bound) is applied here, to the
 * values, rather than to the grammar. It also makes branches that merge a
 * choice of values with a pattern for one of them (Azure Pipelines' 259
 * tasks, each `{"enum": [NAME_i]}` merged with `{"pattern": "^NAME_j$"}`)
 * match nothing, so they drop out of a choice before they are compiled. */
#ifndef CLLM_GRAMMAR_SCHEMA_VALUES_H
#define CLLM_GRAMMAR_SCHEMA_VALUES_H

#include <jansson.h>

/* Whether `value` meets the assertions of `schema` that apply to it alone:
 * type (and OpenAPI's nullable), minLength/maxLength (in code points),
 * pattern (searched, as JSON Schema says; one outside regex.c's subset is
 * not applied), minimum/maximum/exclusiveMinimum/exclusiveMaximum (draft
 * 4's boolean forms too) and multipleOf. 1 admitted, 0 not, -1 with
 * err_get() (out of memory). */
int schema_admits_value(json_t *schema, json_t *value);

/* The values of schema's enum (or const) that schema_admits_value admits,
 * as a new list (empty when none is); NULL with err_get(). A schema with
 * neither keyword gets NULL and no error: check the keyword first. */
json_t *schema_admitted_values(json_t *schema);

/* A JSON Schema pattern as a regex for the whole string: searched (".*"
 * around it) unless anchored with ^ and $. NULL when out of memory. */
char *schema_pattern_anchored(const char *pattern);

#endif
