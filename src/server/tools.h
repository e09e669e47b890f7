/* The request side of tool calling (OpenAI's shapes): the `tools` list,
 * `tool_choice`, `parallel_tool_calls`, and the tool parts of chat history
 * (assistant messages' `tool_calls`, `role: "tool"` results with their
 * `tool_call_id`). Everything is checked here with a 400 naming the field;
 * what passes is handed to the chat template as transformers would: the
 * tool objects as given, and each call's `arguments` JSON string parsed into
 * a mapping (as vLLM does before rendering), since templates write
 * `arguments | tojson` or iterate its items. */
#ifndef CLLM_SERVER_TOOLS_H
#define CLLM_SERVER_TOOLS_H

#include "chat/tool_format.h"
#include "grammar/constraint.h"
#include "server/errors.h"

#include <jansson.h>
#include <stdbool.h>

typedef enum { TOOL_CHOICE_AUTO, TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NAMED } tool_choice_kind;

#define API_MAX_TOOLS 128
#define API_TOOL_NAME_MAX 64 /* OpenAI: ^[a-zA-Z0-9_-]{1,64}$ */

typedef struct {
    json_t *tools;           /* the validated list (owned), NULL when not given */
    bool choice_given;
    tool_choice_kind choice; /* default: auto with tools, none without */
    char named[API_TOOL_NAME_MAX + 1];
    bool parallel;           /* parallel_tool_calls; default true */
} api_tools;

void api_tools_init(api_tools *t);
void api_tools_free(api_tools *t);
int api_parse_tools(const json_t *v, api_tools *t, api_error *e);
int api_parse_tool_choice(const json_t *v, api_tools *t, api_error *e);
/* After every field: the choice agrees with the tools. */
int api_tools_check(const api_tools *t, api_error *e);
/* Whether the request offers tools to the model (some, and choice not none). */
bool api_tools_offered(const api_tools *t);

/* Against the model's chat template: the format its output is read in (the
 * generic format when the template shows none). A choice that forces a call
 * (required, a named function) also yields *forced (the caller owns it): a
 * constraint on the output to the format's markup around one JSON value
 * valid under tool_format_call_schema's schema, so the call is always
 * well-formed; NULL otherwise. In the generic format every choice yields one
 * (tool_format_generic_schema: auto allows {"content": ...} too). */
int api_tools_resolve(const api_tools *t, tool_format template_format, tool_format *out, constraint **forced,
                      api_error *e);

/* The tool parts of chat message i (`role` already normalized): an
 * assistant's tool_calls, a tool result's tool_call_id, copied into `out`
 * (the normalized message). Whether key `key` of a message is one of them. */
bool api_message_tool_key(const char *role, const char *key);
int api_message_tool_fields(const json_t *m, size_t i, const char *role, json_t *out, api_error *e);

#endif
