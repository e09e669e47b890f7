/* Chat templates: our own interpreter of the Jinja subset that real model
 * templates use (for/if/elif/else, set, namespace, macros where used, loop
 * variables, filters such as trim/length/tojson/upper/lower, string methods,
 * raise_exception). Rendering takes the whole context as JSON (messages with
 * string or list-of-parts content, add_generation_prompt, bos_token, ...), so
 * the output is byte-identical to Python jinja2 given the same input - jinja2
 * as Hugging Face transformers sets it up for apply_chat_template (sandboxed,
 * trim_blocks, lstrip_blocks, loopcontrols, {% generation %}, tojson as
 * json.dumps, raise_exception, strftime_now).
 *
 * A parsed template is immutable: it may be rendered from several threads at
 * once. Runaway templates (deep nesting, endless loops, huge output) fail with
 * an error instead of exhausting the stack, the CPU or memory. */
#ifndef CLLM_CHAT_TEMPLATE_H
#define CLLM_CHAT_TEMPLATE_H

#include "chat/reasoning.h"
#include "chat/tool_format.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct chat_template chat_template;

/* Parses template source (UTF-8). NULL with err_get() naming the line and
 * problem ("chat template line 3: ..."). */
chat_template *chat_template_parse(const char *source);
void chat_template_free(chat_template *t);

/* Renders with `context` (a JSON object: "messages", "add_generation_prompt",
 * "bos_token", "eos_token", "tools", ...; its strings are used in place, so it
 * must live until the call returns). Returns a malloc'd string, or NULL with
 * err_get(): a raise_exception(msg) in the template gives exactly msg, other
 * failures "chat template line N: what". */
char *chat_template_render(const chat_template *t, json_t *context);

/* A byte range of a rendering. */
typedef struct {
    size_t off, len;
} chat_span;

/* As chat_template_render, and the byte ranges of the result that came from
 * the context rather than from the template's text (*spans: malloc'd, sorted,
 * disjoint; NULL when none). Every string of the context counts but those
 * under the top-level keys named in `trusted` (a NULL-terminated list, e.g.
 * bos_token); so does every string the template derives from one, through
 * any filter, method or operator (see template_taint.c). */
char *chat_template_render_marked(const chat_template *t, json_t *context, const char *const *trusted,
                                  chat_span **spans, size_t *nspans);

/* Whether message content may spell control tokens ("<end_of_turn>") that
 * then become those tokens, as vLLM and llama.cpp allow: only for trusted
 * callers (--chat-parse-special-in-content). Off by default; set it before
 * the template is shared between threads. prompt.c reads it. */
void chat_template_set_trust_content(chat_template *t, bool trust);
bool chat_template_trusts_content(const chat_template *t);

/* The tool-call format the template's source shows (tool_format_detect). */
tool_format chat_template_tool_format(const chat_template *t);
/* How replies mark their reasoning: what the source shows
 * (reasoning_format_detect) unless set (a server's --reasoning-parser; set
 * it before the template is shared between threads). */
reasoning_format chat_template_reasoning(const chat_template *t);
void chat_template_set_reasoning(chat_template *t, reasoning_format f);

/* A built-in template for models whose file has none, chosen by architecture:
 * Gemma 3's for "gemma3"; for "llama", Llama 3's with a Llama 3 vocabulary
 * and Mistral's [INST] format otherwise; ChatML (as Qwen2 writes it) for the
 * rest. The texts are the upstream ones (tests/data/templates). Never NULL. */
const char *chat_template_builtin(const char *arch, bool llama3_vocab);

#endif
