/* The request fields that constrain the output to a grammar, all compiled
 * into one constraint (grammar/constraint.h) for the engine:
 *   OpenAI      response_format {"type": "json_object"} or
 *               {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
 *   vLLM        structured_outputs {json | regex | choice | grammar | json_object,
 *               disable_any_whitespace}, and the older guided_json,
 *               guided_regex, guided_choice, guided_grammar
 *   llama-server grammar (GBNF), json_schema
 * At most one may be given. A constraint that does not compile is a 400
 * naming the field and, from the compiler, the position or keyword. */
#ifndef CLLM_SERVER_STRUCTURED_H
#define CLLM_SERVER_STRUCTURED_H

#include "grammar/constraint.h"
#include "server/errors.h"

#include <jansson.h>
#include <stdbool.h>

/* Whether `name` is one of the fields above. */
bool structured_is_field(const char *name);
/* Reads the fields of `body` into *out (NULL when none is given; the caller
 * owns the reference). 0, or -1 with *e filled. */
int structured_parse(const json_t *body, constraint **out, api_error *e);

#endif
