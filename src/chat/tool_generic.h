/* The prompt side of the generic tool format (tool_format.h: the reply is
 * {"tool_calls": [...]} or {"content": "..."}), for chat templates that show
 * no tool-call format of their own (Gemma's, most base models'), as
 * llama-server's generic format does. What the model reads:
 *   - the tools offered, in a system message (added to the conversation's
 *     own, or put first): each tool's function object (name, description,
 *     parameters) as JSON on its own line, then the shape of the reply and
 *     what tool_choice asks (call a tool or answer; call one; call the named
 *     one);
 *   - the history in turns such templates know: an assistant message's
 *     tool_calls become its content, written as the model writes them
 *     ({"tool_calls": [{"name": ..., "arguments": {...}}]}), and tool results
 *     (role "tool") user messages holding
 *     {"tool_response": {"tool_call_id": ..., "content": ...}}, consecutive
 *     results joined into one message (templates that alternate user and
 *     assistant refuse two user turns in a row).
 * The constraint engine holds the reply to the shape
 * (tool_format_generic_schema), so even a model never trained on it writes
 * well-formed calls. */
#ifndef CLLM_CHAT_TOOL_GENERIC_H
#define CLLM_CHAT_TOOL_GENERIC_H

#include <jansson.h>
#include <stdbool.h>

typedef enum { TOOL_GENERIC_CHOICE_AUTO, TOOL_GENERIC_CHOICE_REQUIRED, TOOL_GENERIC_CHOICE_NAMED } tool_generic_choice;

/* Whether messages hold tool parts (an assistant's tool_calls, a tool
 * result) that the rewrite changes. */
bool tool_generic_history_has_tools(const json_t *messages);
/* The messages the template renders: a new array (the caller owns it), or
 * NULL when out of memory. `tools` is the validated tools list, or NULL when
 * none are offered (tool_choice none: the history is still rewritten);
 * `named` the function of a named choice. */
json_t *tool_generic_messages(const json_t *messages, const json_t *tools, tool_generic_choice choice,
                              const char *named);

#endif
