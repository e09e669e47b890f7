/* From request to prompt tokens, the same way for generation and /tokenize
 * (so `usage.prompt_tokens` always equals what /tokenize counts):
 *   completions: the text with special tokens parsed (as llama.cpp's server
 *     does) and BOS added when the model wants one, never doubled;
 *   chat: the messages rendered with the chat template (context: messages,
 *     add_generation_prompt, bos_token, eos_token and the request's own
 *     variables, chat_render_opts), tokenized with special
 *     tokens parsed and no BOS added, since templates spell it themselves;
 *     a BOS is only prepended when the model wants one and the rendering
 *     lacks it. Control tokens are parsed only in the template's own text:
 *     the bytes that came from the messages stay text, so content cannot
 *     forge turns (unless the template trusts content:
 *     chat_template_set_trust_content).
 * The server (for HTTP requests and /tokenize) and `cllm chat` both use it.
 * Failures return PROMPT_BAD_INPUT (the caller's input cannot be rendered or
 * tokenized; a 400 over HTTP) or PROMPT_NO_MEMORY, with err_get() saying
 * what was wrong. */
#ifndef CLLM_CHAT_PROMPT_H
#define CLLM_CHAT_PROMPT_H

#include "chat/template.h"
#include "tokenizer/tokenizer.h"
#include "util/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum { PROMPT_BAD_INPUT = -1, PROMPT_NO_MEMORY = -2 };

/* How messages become a chat prompt (vLLM's chat request fields). */
typedef struct {
    bool add_generation_prompt;  /* open the assistant's turn */
    /* End the prompt inside the last message, right after its content, so
     * the model continues it (as transformers' apply_chat_template does:
     * the rendering is cut after the last occurrence of that content).
     * Not together with add_generation_prompt. */
    bool continue_final_message;
    /* More variables for the template (chat_template_kwargs, documents), or
     * NULL; they may not replace "messages", and they count as the
     * request's text (control tokens in them stay text). */
    json_t *vars;
    /* The template's `tools` variable: the request's list of tool objects,
     * as transformers' apply_chat_template passes it; NULL leaves it
     * undefined. Request text like the messages. */
    json_t *tools;
} chat_render_opts;

/* add_generation_prompt only, as a chat client sends. */
static inline chat_render_opts chat_render_defaults(void) {
    return (chat_render_opts){.add_generation_prompt = true};
}

/* Returns the token count (tokens in *out, malloc'd) or a PROMPT_* failure. */
int prompt_encode_text(const tokenizer *t, const char *text, size_t len, bool add_special, int32_t **out);
/* Renders messages (an array of {role, content, ...} objects, assistant
 * ones possibly with tool_calls, tool results with role "tool"); a malloc'd
 * string, or NULL with err_get() (a template error such as raise_exception). */
char *prompt_render_chat(const tokenizer *t, const chat_template *tmpl, json_t *messages,
                         const chat_render_opts *opts);
int prompt_encode_chat(const tokenizer *t, const chat_template *tmpl, json_t *messages, const chat_render_opts *opts,
                       int32_t **out);
/* The text of tokens as one stream (UTF-8 safe); control tokens rendered when
 * `special`. */
void prompt_decode(const tokenizer *t, const int32_t *ids, int n, bool special, buf *out);
/* The text of one token for logprobs: its bytes (control tokens spelled), and
 * those bytes made valid UTF-8 for a JSON string. */
void token_bytes(const tokenizer *t, int32_t id, buf *out);

#endif
