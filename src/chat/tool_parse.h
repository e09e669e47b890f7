/* Reading tool calls out of a model's reply, in the family's format
 * (tool_format.h). The same parse serves a finished reply and a stream: it
 * is run on the whole text so far, and what it reports only grows as text is
 * added, so a stream can send the difference each time:
 *   - content: the text outside the calls, in pieces; whitespace next to a
 *     call is dropped, and while the text is unfinished (final false) a tail
 *     that may still become a marker ("<tool_c") or a call is held back;
 *   - calls: each with its name once the name is complete, and the raw JSON
 *     text of its arguments object as far as it has arrived (complete when
 *     args_done).
 * Markup that cannot be a call (bad JSON, a missing closing tag, a name
 * that is not a string) sets malformed_at: the calls before it stand, and the
 * text from there on is plain content. In a finished reply
 * (tool_parse_is_plain) any malformed or unfinished call makes the whole
 * reply plain content, as vLLM and llama.cpp fall back. */
#ifndef CLLM_CHAT_TOOL_PARSE_H
#define CLLM_CHAT_TOOL_PARSE_H

#include "chat/tool_format.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stddef.h>

#define TOOL_PARSE_MAX_CALLS 64
#define TOOL_PARSE_MAX_CONTENT (TOOL_PARSE_MAX_CALLS + 1)

typedef struct {
    size_t off, len;
} tool_span;

typedef struct {
    tool_span name;     /* raw bytes of the name (a JSON string's inside for JSON formats) */
    bool name_done;     /* the name is complete */
    bool name_escaped;  /* the raw name holds JSON escapes: decode with tool_parse_name */
    tool_span args;     /* raw JSON text of the arguments object so far */
    bool args_missing;  /* the call had no arguments member: they are "{}" */
    bool args_done;
    bool done;          /* the whole call's markup is complete */
} tool_parsed_call;

typedef struct {
    tool_span content[TOOL_PARSE_MAX_CONTENT];
    int n_content;
    tool_parsed_call calls[TOOL_PARSE_MAX_CALLS];
    int n_calls;
    size_t malformed_at; /* (size_t)-1: none */
} tool_parse_result;

/* Parses text[0, len). final: the reply is complete. */
void tool_parse(tool_format f, const char *text, size_t len, bool final, tool_parse_result *out);
/* Whether a finished reply's parse gives plain content only: no calls, or a
 * malformed or unfinished one. */
bool tool_parse_is_plain(const tool_parse_result *r);
/* A reply that is, as a whole, tool calls written without the format's
 * markup, as small models often write them: one object {"name": N,
 * "arguments": {...}} ("parameters" for "arguments"), or a list of them,
 * alone or alone in one ``` fenced block (```json), with nothing else but
 * whitespace, where every N is one of `names` (the tools offered) and the
 * objects have no other keys. NO: it is not (ordinary text, an ordinary JSON
 * answer); MAYBE: the unfinished text (final false) may still become one;
 * YES: it is, and *out holds the calls (no content). */
typedef enum { TOOL_BARE_NO, TOOL_BARE_MAYBE, TOOL_BARE_YES } tool_bare_rc;
tool_bare_rc tool_parse_bare(const char *text, size_t len, bool final, const char *const *names, int n_names,
                             tool_parse_result *out);
/* A reply in the generic format (tool_format.h): one JSON object,
 * {"tool_calls": [...]} or {"content": "..."}.
 *   CALLS: *out holds the calls so far (as tool_parse gives them, no
 *     content); in a finished reply, all of them complete (a reply cut off
 *     by max_tokens inside the list keeps its complete calls).
 *   CONTENT: the answer's text so far, its JSON escapes decoded (an escape
 *     not yet complete left out), appended to *content; a reply cut off
 *     inside the string (max_tokens) is that text.
 *   UNKNOWN: an unfinished reply too short to tell (final false).
 *   BAD: not the format (a finished reply cut off before its first call
 *     was complete included): plain text. */
typedef enum { TOOL_GENERIC_BAD, TOOL_GENERIC_UNKNOWN, TOOL_GENERIC_CALLS, TOOL_GENERIC_CONTENT } tool_generic_rc;
tool_generic_rc tool_parse_generic(const char *text, size_t len, bool final, tool_parse_result *out, buf *content);
/* The name of a call as a malloc'd string (JSON escapes decoded); NULL when
 * out of memory or undecodable. */
char *tool_parse_name(const char *text, const tool_parsed_call *c);

#endif
