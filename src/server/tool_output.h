/* A chat reply's tool calls in OpenAI's shapes. With tools offered, the
 * reply text is read in the model's tool-call format (chat/tool_parse.h):
 *   whole: message.tool_calls [{id, type: "function", function: {name,
 *     arguments: the JSON text the model wrote}}], content the text outside
 *     the calls (null when none); a malformed call leaves the reply plain
 *     content;
 *   streamed: each chunk's delta carries the content and the tool_calls
 *     added since the last one: {index, id, type, function: {name,
 *     arguments: ""}} when a call's name is complete, then
 *     {index, function: {arguments: fragment}} as its arguments arrive, so
 *     the fragments join into the same arguments as the whole reply. Markup
 *     is never sent as content once it is recognised.
 * finish_reason is "tool_calls" when the model stopped after calling.
 * parallel_tool_calls false keeps the first call only. A reply that is
 * wholly a call in bare JSON naming an offered tool (tool_parse_bare) is a
 * call too; a stream holds such a reply back until it ends, then sends the
 * call or, when it was not one, the text. `tools` is the request's validated
 * tools list. */
#ifndef CLLM_SERVER_TOOL_OUTPUT_H
#define CLLM_SERVER_TOOL_OUTPUT_H

#include "chat/tool_parse.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Sets "content" and, when the reply calls tools, "tool_calls" on msg.
 * Returns whether it does. */
bool tool_output_message(tool_format f, bool parallel, const json_t *tools, const char *text, size_t len,
                         json_t *msg);

/* What one streamed choice has sent so far. Zero-initialize. */
typedef struct {
    size_t content_sent;
    int n_announced;
    size_t args_sent[TOOL_PARSE_MAX_CALLS];
} tool_stream;

/* Adds to delta ("content", "tool_calls") what text[0, len) holds beyond what
 * ts has sent; final when the choice has finished. */
void tool_stream_delta(tool_stream *ts, tool_format f, bool parallel, const json_t *tools, const char *text,
                       size_t len, bool final, json_t *delta);

#endif
