/* JSON Schema's conjunctions as one schema: allOf, a $ref with assertions
 * beside it, if/then/else and not, rewritten into keywords the grammar
 * compiler (json_schema.c) covers, so that it builds one grammar for the
 * values every branch accepts. Where no exact grammar exists the rewrite
 * approximates, as listed at the top of schema_merge.c. */
#ifndef CLLM_GRAMMAR_SCHEMA_MERGE_H
#define CLLM_GRAMMAR_SCHEMA_MERGE_H

#include <jansson.h>

/* The schema a local reference points at: "#", "#/json/pointer" (with ~0,
 * ~1), or "#name" naming an $anchor or $dynamicAnchor in the document;
 * NULL when it resolves to nothing or leaves the document. */
json_t *schema_resolve_ref(json_t *root, const char *ref);

/* The reference a $ref, $recursiveRef or $dynamicRef of a schema object
 * names ("#" for $recursiveRef), or NULL when it has none. */
const char *schema_ref_of(json_t *schema);

/* One schema object (holding allOf, a $ref with assertions beside it, if,
 * not, ...) as a new schema without those; the schema false when no value
 * can match (branches with no type or enum value in common, "not": {});
 * NULL with err_get() for what is malformed or not supported ("allOf: two
 * different 'pattern' values ..."). References at its top
 * level are followed (against root, up to a bound); nested schemas keep
 * theirs. The anyOf/oneOf and if/then/else lists of the branches become
 * the result's anyOf of their consistent combinations, each merged. */
json_t *schema_flatten(json_t *root, json_t *schema);

#endif
