/* Tool-call conventions: how a model family writes a function call in its
 * output, found from the markers its chat template spells (the template
 * shows the model the format and renders past calls in it):
 *   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>
 *                (Qwen2.5, Qwen3, Hermes 2/3, Granite 4, ...)
 *   llama3_json  {"name": ..., "parameters": {...}} as the whole reply, an
 *                optional <|python_tag|> before it, calls joined by ';'
 *                (Llama 3.1/3.2/3.3)
 *   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
 *                (Mistral 7B v0.3, Nemo)
 *   mistral_args [TOOL_CALLS]name[ARGS]{...}, once per call
 *                (Mistral Small 3.2, Devstral, Ministral 3)
 *   functionary  <function=name>{...}</function> (functionary v3.1)
 *   harmony      <|start|>assistant<|channel|>commentary to=functions.name
 *                <|constrain|>json<|message|>{...}<|call|> (gpt-oss; the
 *                analysis message before it is the reasoning, reasoning.h)
 *   generic      one JSON object as the whole reply:
 *                {"tool_calls": [{"name": ..., "arguments": {...}}, ...]}
 *                or {"content": "the answer"}; for the templates that show
 *                no format (tool_generic.h: the tools go into a system
 *                message, the reply is constrained to this shape), as
 *                llama-server's generic format
 * Templates whose calls are XML-like argument lists (<parameter=...>,
 * <arg_key>) or that never mention tools have no format of their own
 * (tool_format_detect gives NONE); the server uses generic for them.
 * tool_parse.h reads the output; tool_format_call_schema builds the JSON
 * schema the constraint engine enforces for tool_choice required or a
 * named function. */
#ifndef CLLM_CHAT_TOOL_FORMAT_H
#define CLLM_CHAT_TOOL_FORMAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
    TOOL_FORMAT_NONE,
    TOOL_FORMAT_HERMES,
    TOOL_FORMAT_LLAMA3_JSON,
    TOOL_FORMAT_MISTRAL,
    TOOL_FORMAT_MISTRAL_ARGS,
    TOOL_FORMAT_FUNCTIONARY,
    TOOL_FORMAT_GENERIC,
    TOOL_FORMAT_HARMONY,
} tool_format;

/* The format a chat template's source uses, or TOOL_FORMAT_NONE. */
tool_format tool_format_detect(const char *template_source);
/* "hermes", "llama3_json", ...; "none". */
const char *tool_format_name(tool_format f);
/* The format of that name, or -1 when none is. */
int tool_format_from_name(const char *name);
/* Whether the format's markers are control tokens of the model's vocabulary
 * ([TOOL_CALLS], <|python_tag|>), so the output text must keep control
 * tokens for the parser to see them. */
bool tool_format_needs_special_text(tool_format f);
/* Mistral's templates require call ids of exactly 9 letters and digits;
 * others take OpenAI's "call_..." ids.  Writes a NUL-terminated id
 * from 128 random bits into out (at least 32 bytes). */
void tool_format_call_id(tool_format f, const unsigned char random[16], char *out, size_t cap);

/* The text a required call must take in format f: prefix, then one JSON
 * value matching `schema`, then suffix. For hermes: "<tool_call>\n",
 * {"name": one of the tools, "arguments": that tool's parameters},
 * "\n</tool_call>". `tools` is the request's validated tools array; `only`
 * names the one function a named tool_choice allows (NULL: any). */
typedef struct {
    char prefix[128];
    json_t *schema; /* owned */
    char suffix[16];
} tool_call_constraint;

/* Returns 0, or -1 when f has no JSON form to constrain (NONE). For
 * generic: {"tool_calls": [calls, at least one]}. */
int tool_format_call_schema(tool_format f, const json_t *tools, const char *only, tool_call_constraint *out);
/* The schema of a generic reply: {"tool_calls": [calls of the tools, or
 * of the one named `only`]} or, when allow_content (tool_choice auto),
 * {"content": string}; nothing else. One call at most when !parallel. */
json_t *tool_format_generic_schema(const json_t *tools, const char *only, bool allow_content, bool parallel);
void tool_call_constraint_free(tool_call_constraint *c);

#endif
