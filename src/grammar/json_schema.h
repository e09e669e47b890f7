/* JSON Schema compiled to a grammar (OpenAI response_format json_schema,
 * vLLM guided_json, llama-server json_schema), and the "any JSON object"
 * grammar of response_format json_object. What is covered and how is
 * listed at the top of json_schema.c; a schema no value matches, or one
 * using what is refused there, fails with the keyword and where it is. */
#ifndef CLLM_GRAMMAR_JSON_SCHEMA_H
#define CLLM_GRAMMAR_JSON_SCHEMA_H

#include "grammar/grammar.h"

#include <jansson.h>
#include <stdbool.h>

typedef struct {
    /* false (the default): one layout, separators ", " and ": ", no other
     * whitespace (XGrammar's any_whitespace=False); true: any run of
     * spaces, tabs and newlines between tokens (any_whitespace=True). */
    bool any_whitespace;
} json_schema_options;

/* Adds a rule for values valid under `schema` and returns its id, or -1
 * with err_get() ("unsupported JSON Schema keyword 'if' at #/properties/a"). */
int json_schema_to_rule(grammar_builder *b, json_t *schema, const json_schema_options *opt);
grammar *grammar_from_json_schema(json_t *schema, const json_schema_options *opt);
/* Any JSON object (response_format json_object). */
grammar *grammar_json_object(const json_schema_options *opt);

#endif
