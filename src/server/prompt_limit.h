/* Prompts bounded by the context before they are tokenized. A text of len
 * bytes has at least len / tokenizer_max_token_bytes tokens, so a prompt
 * that cannot fit max_model_len is refused (400, context_length_exceeded)
 * without tokenizing it, and the text that is tokenized is at most
 * max_model_len times that many bytes: with Gemma 3's vocabulary (no token
 * over 48 bytes) and 8192 tokens, 384 KiB, whatever the body holds.
 * Chat messages are rendered first (linear in the body, which --max-body-size
 * caps), and the rendering is what is measured. */
#ifndef CLLM_SERVER_PROMPT_LIMIT_H
#define CLLM_SERVER_PROMPT_LIMIT_H

#include "chat/prompt.h"
#include "chat/template.h"
#include "server/errors.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The 400 for a prompt of n_prompt tokens that leaves no room for
 * max_tokens (< 0: not given, so for even one token) in max_len. Returns -1. */
int prompt_context_error(api_error *e, const char *param, int max_len, long long n_prompt, long long max_tokens);

/* The context and the tokens the prompt must leave free in it: one for
 * generation (the exact check against max_tokens follows tokenization,
 * which the bound keeps cheap), 0 for /tokenize. */
typedef struct {
    int max_len;
    int room;
} prompt_budget;

/* Encodes a completions prompt (prompt_encode_text) unless its length alone
 * shows it cannot fit. Returns the token count (tokens in *out), or -1 with
 * *e filled: 400 for a prompt too long or not tokenizable, 500 when memory
 * ran out. */
int prompt_limit_text(const tokenizer *t, const char *text, size_t len, bool add_special, const prompt_budget *b,
                      const char *param, int32_t **out, api_error *e);
/* The same for chat messages (prompt_encode_chat). */
int prompt_limit_chat(const tokenizer *t, const chat_template *tmpl, json_t *messages, const chat_render_opts *opts,
                      const prompt_budget *b, const char *param, int32_t **out, api_error *e);

#endif
