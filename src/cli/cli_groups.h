/* The option groups several commands share, and the settings they fill: the
 * model, the engine, sampling and the server. Declared once here, so each
 * setting has the same spelling, aliases, bounds and help in every command
 * that takes it (a command picks the options it takes with its section's
 * `only`, and may change a default, a bound or the help, or make it
 * required, with an override). */
#ifndef CLLM_CLI_CLI_GROUPS_H
#define CLLM_CLI_CLI_GROUPS_H

#include "cli/cli_options.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "kv/kv_cache.h"

#include <stdbool.h>
#include <stddef.h>

/* --model, --chat-template, --chat-parse-special-in-content */
typedef struct {
    const char *path;
    const char *chat_template;
    bool chat_parse_special_in_content; /* trusted clients: content may spell control tokens */
} cli_model_settings;

/* --max-model-len, --max-num-seqs, --max-num-batched-tokens, --block-size,
 * --kv-cache-memory, --kv-cache-dtype, --enable-prefix-caching, --threads,
 * --kv-eviction, --kv-budget, --kv-sink-tokens */
typedef struct {
    long max_model_len;     /* 0: the command decides (from the prompts, the model, ...) */
    long max_num_seqs;
    long max_num_batched_tokens;
    long block_size;
    size_t kv_cache_memory; /* bytes; 0: the command decides */
    kv_dtype kv_cache_dtype;
    bool prefix_caching;
    long threads;           /* 0: all cores */
    kv_evict_policy kv_eviction;
    long kv_budget;         /* 0: not given */
    long kv_sink_tokens;
} cli_engine_settings;

/* --max-tokens, --temperature, --top-k, --top-p, --min-p,
 * --repetition-penalty, --presence-penalty, --frequency-penalty, --seed */
typedef struct {
    long max_tokens;
    double temperature;
    long top_k;
    double top_p, min_p;
    double repetition_penalty, presence_penalty, frequency_penalty;
    long seed; /* -1: drawn from the clock */
} cli_sampling_settings;

/* --host, --port, --api-key, --api-key-file, --metrics-require-api-key, --no-webui,
 * --served-model-name, --shutdown-timeout, --max-waiting, --max-body-size,
 * --timeout-keep-alive, --request-header-timeout, --request-body-timeout,
 * --max-connections-per-client, --allowed-origins, --allowed-methods,
 * --allowed-headers */
typedef struct {
    const char *host;
    long port;
    const char *api_key;
    const char *api_key_file;
    bool metrics_require_api_key;
    bool no_webui; /* GET / is not the chat page */
    cli_list served_model_names; /* one per model, in order; fewer: the rest take their file names */
    double shutdown_timeout;
    long max_waiting;
    size_t max_body_size; /* 0: the server's default */
    long timeout_keep_alive, request_header_timeout, request_body_timeout; /* seconds */
    long max_connections_per_client; /* 0: no limit */
    long response_cache_size;        /* entries; 0: off */
    long max_embedding_inputs;       /* inputs per /v1/embeddings request */
    long embedding_cache_size;       /* entries; 0: off */
    const char *allowed_origins, *allowed_methods, *allowed_headers; /* JSON lists (CORS); NULL: not given */
    const char *reasoning_parser; /* NULL: as each chat template shows */
} cli_server_settings;

/* --speculative-config, --speculative-model, --num-speculative-tokens,
 * --prompt-lookup-min, --prompt-lookup-max */
typedef struct {
    const char *config;          /* vLLM's JSON; NULL: not given */
    const char *speculative_model; /* a draft model's path; NULL: not given */
    long num_speculative_tokens; /* 0: not given */
    long prompt_lookup_min, prompt_lookup_max; /* 0: not given */
} cli_spec_settings;

extern const cli_group cli_model_group;
extern const cli_group cli_engine_group;
extern const cli_group cli_sampling_group;
extern const cli_group cli_server_group;
extern const cli_group cli_spec_group;

/* The engine's own defaults (engine_config_defaults), as settings. */
cli_engine_settings cli_engine_defaults(void);
/* The engine configuration the settings give; fields left 0 stay 0 for the
 * command to decide. */
engine_config cli_engine_config(const cli_engine_settings *s);
/* llama.cpp's command-line defaults: temperature 0.8, top-k 40, top-p 0.95,
 * min-p 0.05, no penalties, a random seed, 128 tokens. */
cli_sampling_settings cli_sampling_defaults(void);
/* The sampler's parameters; a seed of -1 is drawn from the clock. */
sampling_params cli_sampling_params(const cli_sampling_settings *s);
/* The speculative config the settings give: off, unless --speculative-config
 * or a short flag is given; the JSON first, then the short flags over it
 * (--speculative-model means method "draft_model"; the other short flags
 * alone mean "ngram"). -1 with err_get() naming the flag and the problem. */
int cli_spec_config(const cli_spec_settings *s, spec_config *out);
/* 127.0.0.1:8000, no key, 10 s grace, 1024 waiting, the server's body limit. */
cli_server_settings cli_server_defaults(void);

#endif
