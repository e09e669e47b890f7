/* The JSON shapes of OpenAI's responses, for completions ("text_completion")
 * and chat ("chat.completion" / "chat.completion.chunk"): bodies, stream
 * chunks, choices, usage and the two logprobs formats:
 *   completions: {"tokens", "token_logprobs", "top_logprobs": [{token: lp}], "text_offset"}
 *   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
 * and vLLM's prompt_logprobs (on each completions choice, on the chat body). */
#ifndef CLLM_SERVER_COMPLETION_JSON_H
#define CLLM_SERVER_COMPLETION_JSON_H

#include "chat/reasoning.h"
#include "server/api_json.h" /* resp_string, which every response builder uses */
#include "server/generation.h"
#include "server/params.h"
#include "server/tool_output.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <time.h>

typedef struct {
    api_kind kind;
    char id[64];
    const char *model;
    time_t created;
    const tokenizer *tok;
    tool_format tool_fmt; /* chat with tools offered: the format replies are read in; else NONE */
    bool tool_parallel;   /* parallel_tool_calls */
    const json_t *tools;  /* the request's tools list (NULL: none), for calls written without markup */
    reasoning_format reasoning; /* chat: how replies mark their reasoning (chat/reasoning.h) */
    bool reasoning_opened;      /* the prompt opened the reasoning ("<think>" at its end) */
} resp_ctx;

/* "stop", "length", or NULL for unfinished; "abort" and "error" as named. */
const char *resp_finish_name(finish_reason r);
/* The same, "tool_calls" for a reply that stopped after calling tools. */
const char *resp_finish_name_tools(finish_reason r, bool called);
/* Usage over all prompts (prompt tokens once per prompt, completion tokens of
 * every choice, cached tokens from the prefix cache). Caller holds g's lock. */
json_t *resp_usage(const gen *g);
/* Logprobs of tokens [from, to) of a choice, in the endpoint's format.
 * *text_offset (completions) advances by the characters of each token. */
json_t *resp_logprobs(const resp_ctx *c, const gen_logprob *lps, int from, int to, long *text_offset);
/* vLLM's prompt_logprobs of one prompt: [null, {"<id>": {"logprob", "rank",
 * "decoded_token"}, ...}, ...], the prompt token first, then its top
 * alternatives; null when the engine reported none. */
json_t *resp_prompt_logprobs(const resp_ctx *c, const gen_prompt_lps *p);
/* Completions' logprobs of an echoed prompt and the choice's output (OpenAI's
 * echo with logprobs): the prompt's tokens first (the first with null logprob
 * and alternatives), each with its first n_top alternatives, text offsets
 * from the start of the prompt. */
json_t *resp_echo_logprobs(const resp_ctx *c, const gen_prompt_lps *p, int n_top, const gen_choice *ch);
/* A whole (non-streamed) choice; echo is prepended to completions text. */
json_t *resp_choice(const resp_ctx *c, const gen_choice *ch, int index, const char *echo, size_t echo_len,
                    long text_offset0);
/* The response body around a choices array (stolen) and usage (stolen). */
json_t *resp_body(const resp_ctx *c, json_t *choices, json_t *usage);
/* One streamed choice: text delta, role (chat's first chunk), logprobs (stolen,
 * may be NULL) and finish reason (NULL while running). */
json_t *resp_chunk_choice(const resp_ctx *c, int index, const char *text, size_t len, bool role, json_t *logprobs,
                          const char *finish);
/* A chunk around choices (stolen); usage_null adds "usage": null. */
json_t *resp_chunk(const resp_ctx *c, json_t *choices, bool usage_null);
#endif
