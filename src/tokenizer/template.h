/* Chat templates: our own interpreter of the Jinja subset that real model
 * templates use (for/if/elif/else, set, namespace, macros where used, loop
 * variables, filters such as trim/length/tojson/upper/lower, string methods,
 * raise_exception). Rendering takes the whole context as JSON (messages with
 * string or list-of-parts content, add_generation_prompt, bos_token, ...), so
 * the output is byte-identical to Python jinja2 given the same input. */
#ifndef CLLM_TOKENIZER_TEMPLATE_H
#define CLLM_TOKENIZER_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>

typedef struct chat_template chat_template;

/* Parses template source. NULL with err_get() naming the line and problem. */
chat_template *chat_template_parse(const char *source);
void chat_template_free(chat_template *t);

/* Renders with `context` (a JSON object: "messages", "add_generation_prompt",
 * "bos_token", "eos_token", ...). Returns a malloc'd string, or NULL with
 * err_get() (a raise_exception message is passed through as the error). */
char *chat_template_render(const chat_template *t, json_t *context);

/* A built-in template for models whose file has none, chosen by architecture
 * (Gemma's turn format for gemma3, Llama 3's for llama with a Llama 3
 * vocabulary, ChatML otherwise). Never NULL. */
const char *chat_template_builtin(const char *arch, bool llama3_vocab);

#endif
