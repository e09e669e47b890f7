/* Request validation: the JSON body of /v1/completions or
 * /v1/chat/completions becomes an api_request (prompts or normalized chat
 * messages, and the engine's request_params), or an api_error naming the
 * field. Types are strict ("max_tokens": "5" is a 400), ranges are OpenAI's,
 * and any field we do not implement is a 400 naming it, never ignored.
 * Nothing here needs a model beyond the vocabulary size. */
#ifndef CLLM_SERVER_PARAMS_H
#define CLLM_SERVER_PARAMS_H

#include "engine/engine.h"
#include "server/errors.h"
#include "server/tools.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum { API_COMPLETIONS, API_CHAT } api_kind;

#define API_MAX_N 64          /* samples per prompt (the engine's limit) */
#define API_MAX_PROMPTS 128   /* prompts in one completions request */
#define API_MAX_CHOICES 256   /* prompts x n */
#define API_MAX_STOP 16
#define API_MAX_STOP_IDS 256
#define API_MAX_LOGIT_BIAS 1024
#define API_MAX_LOGPROBS 20

typedef struct {
    const char *text;  /* a text prompt (borrowed from the body), or NULL */
    size_t len;
    int32_t *ids;      /* a token prompt (owned) when text is NULL */
    int n_ids;
} api_prompt;

typedef struct {
    api_kind kind;
    const char *model;     /* borrowed; NULL when absent */
    api_prompt *prompts;   /* completions */
    int n_prompts;
    json_t *messages;      /* chat: [{"role", "content": string}], owned */
    long long max_tokens;  /* -1: not given (defaults to what the context leaves) */
    request_params rp;     /* its pointers lead into the arrays below */
    bool stream, include_usage, echo;
    int logprobs;          /* -1: none; else alternatives per token */
    bool seed_given;
    bool use_beam_search; /* vLLM's; the width is best_of, else n */
    int best_of;          /* 0: not given */
    /* vLLM-style extra fields for KV eviction (kv/kv_evict.h); -1: not given,
     * the server's --kv-eviction, --kv-budget, --kv-sink-tokens apply. */
    int kv_eviction;      /* a kv_evict_policy */
    long long kv_budget, kv_sink_tokens;
    char **stops;
    int32_t *stop_ids;
    logit_bias_entry *bias;
    api_tools tools;      /* chat: tools, tool_choice, parallel_tool_calls */
    /* vLLM's extra fields (params_vllm.c) */
    long long truncate_prompt_tokens; /* 0: not given; -1: max_model_len; else keep the last N prompt tokens */
    bool add_generation_prompt;       /* chat; default true */
    bool continue_final_message;      /* chat */
    const char *chat_template;        /* chat: this request's template (borrowed), or NULL */
    json_t *template_vars;            /* chat: chat_template_kwargs and documents (owned), or NULL */
    const json_t *bad_words;          /* a list of strings (borrowed), tokenized with the prompt */
    int32_t *allowed_ids;             /* rp.allowed_token_ids points here */
} api_request;

/* Parses `body` (any JSON value). Returns 0, or -1 with *err filled (400).
 * On success free the request with api_request_free (also safe after -1). */
int api_request_parse(const json_t *body, api_kind kind, int n_vocab, api_request *out, api_error *err);
void api_request_free(api_request *r);

/* Whether `name` is a field accepted and ignored because it changes no
 * output (the IGNORED table: user, metadata, store, ...). */
bool api_field_ignored(const char *name);
/* vLLM's extra fields (params_vllm.c): whether `name` is one for `kind`;
 * parsing them all from the body (in a fixed order; null is "not given");
 * the checks across fields once every field is parsed. */
bool api_vllm_field(const char *name, api_kind kind);
int api_vllm_parse_all(const json_t *body, int n_vocab, api_request *r, api_error *e);
int api_vllm_check(api_request *r, api_error *e);

/* OpenAI's accepted-and-ignored fields (IGNORED in params.c): 1 when `name`
 * is one and v has its type (or is null), 0 when it is not one, -1 with *e. */
int api_ignored_field(const char *name, const json_t *v, api_error *e);

/* Helpers shared with the tokenize endpoints. */
/* Normalizes chat messages (developer -> system, text parts joined; tool
 * calls and tool results as tools.h says). */
int api_parse_messages(const json_t *v, json_t **out, api_error *err);
/* A list of token ids, each in [0, n_vocab). */
int api_parse_token_ids(const json_t *v, const char *param, int n_vocab, int32_t **out, int *n, api_error *err);

#endif
