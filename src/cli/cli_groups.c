/* The shared option groups of cli_groups.h. Canonical names are vLLM's where
 * vLLM has the setting; the aliases are the spellings cllm's commands used
 * before (llama.cpp's, mostly), kept so old command lines keep working. */
#include "cli/cli_groups.h"

#include "util/error.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- values the plain kinds cannot check ---- */

static int parse_kv_dtype(const char *flag, const char *value, void *setting) {
    if (kv_dtype_parse(value, setting)) return err_prefix("%s: ", flag);
    return 0;
}

static json_t *kv_dtype_json(const void *setting) { return json_string(kv_dtype_name(*(const kv_dtype *)setting)); }

static int parse_kv_eviction(const char *flag, const char *value, void *setting) {
    if (kv_evict_parse(value, setting))
        return err_set("%s: unknown KV eviction policy '%s' (accepted: " KV_EVICT_NAMES ")", flag, value);
    return 0;
}

static json_t *kv_eviction_json(const void *setting) {
    return json_string(kv_evict_name(*(const kv_evict_policy *)setting));
}

/* The block tables and the paged attention kernels take these three sizes. */
static int parse_block_size(const char *flag, const char *value, void *setting) {
    char *end;
    errno = 0;
    const long v = strtol(value, &end, 10);
    if (errno || end == value || *end || (v != 8 && v != 16 && v != 32))
        return err_set("%s must be 8, 16 or 32, got '%s'", flag, value);
    *(long *)setting = v;
    return 0;
}

static json_t *long_json(const void *setting) { return json_integer(*(const long *)setting); }

/* ---- the groups ---- */

const cli_group cli_model_group = {
    "model options",
    (const cli_option[]){
        {.name = "--model", .aliases = "-m", .kind = CLI_STRING, .offset = offsetof(cli_model_settings, path),
         .metavar = "PATH", .help = "a GGUF file, or a Hugging Face model folder (safetensors: plain, GPTQ or AWQ)"},
        {.name = "--chat-template", .kind = CLI_STRING, .offset = offsetof(cli_model_settings, chat_template),
         .metavar = "FILE", .help = "a Jinja chat template used instead of the model's own",
         .default_text = "the model's, else a built-in one for its family"},
        {.name = "--chat-parse-special-in-content", .kind = CLI_FLAG,
         .offset = offsetof(cli_model_settings, chat_parse_special_in_content),
         .help = "let control tokens spelled in message content (\"<end_of_turn>\") become those tokens, as "
                 "vLLM and llama.cpp do; only for trusted clients (off: content is always text)"},
        {0}},
};

const cli_group cli_engine_group = {
    "engine options",
    (const cli_option[]){
        {.name = "--max-model-len", .aliases = "-c --ctx-size --ctx", .kind = CLI_INT,
         .offset = offsetof(cli_engine_settings, max_model_len), .metavar = "N", .min = 1, .max = 1 << 24,
         .help = "tokens per sequence, prompt and output together"},
        {.name = "--max-num-seqs", .kind = CLI_INT, .offset = offsetof(cli_engine_settings, max_num_seqs),
         .metavar = "N", .min = 1, .max = 4096, .help = "sequences running at once"},
        {.name = "--max-num-batched-tokens", .kind = CLI_INT,
         .offset = offsetof(cli_engine_settings, max_num_batched_tokens), .metavar = "N", .min = 1, .max = 1 << 20,
         .help = "tokens per engine step, the budget prompt chunks share"},
        {.name = "--block-size", .kind = CLI_CUSTOM, .offset = offsetof(cli_engine_settings, block_size),
         .metavar = "8|16|32", .help = "tokens per KV cache block", .parse = parse_block_size, .to_json = long_json},
        {.name = "--kv-cache-memory", .kind = CLI_MEMORY, .offset = offsetof(cli_engine_settings, kv_cache_memory),
         .metavar = "SIZE",
         .help = "KV cache budget: bytes with a unit (2GiB, 512MiB; any case) or a fraction of the memory free now "
                 "(0.5)"},
        {.name = "--kv-cache-dtype", .aliases = "--kv-type", .kind = CLI_CUSTOM,
         .offset = offsetof(cli_engine_settings, kv_cache_dtype),
         .metavar = "auto|f16|bf16|f32|fp8|fp8_e4m3|fp8_e5m2|int8",
         .help = "KV cache precision; auto = f16, fp8 = fp8_e4m3; 8-bit types keep an f32 scale per token and kv "
                 "head and hold 1.9x the tokens of f16", .parse = parse_kv_dtype, .to_json = kv_dtype_json},
        {.name = "--enable-prefix-caching", .kind = CLI_BOOL, .offset = offsetof(cli_engine_settings, prefix_caching),
         .help = "reuse the KV blocks of prompt prefixes already computed"},
        {.name = "--threads", .aliases = "-t", .kind = CLI_INT, .offset = offsetof(cli_engine_settings, threads),
         .metavar = "N", .min = 1, .max = 1024, .help = "compute threads", .default_text = "all cores"},
        {.name = "--kv-eviction", .kind = CLI_CUSTOM, .offset = offsetof(cli_engine_settings, kv_eviction),
         .metavar = "none|streaming|h2o|truncate",
         .help = "evict KV entries past --kv-budget tokens per sequence, so it can run past its memory and the "
                 "trained context: streaming = StreamingLLM (sink tokens + recent window), h2o = sinks + heavy "
                 "hitters (most attention received) + recent window, truncate = recent window only; requests may "
                 "name their own (kv_eviction)",
         .parse = parse_kv_eviction, .to_json = kv_eviction_json},
        {.name = "--kv-budget", .kind = CLI_INT, .offset = offsetof(cli_engine_settings, kv_budget),
         .metavar = "N", .min = 1, .max = 1 << 24,
         .help = "KV tokens one sequence keeps at most with --kv-eviction (at most --max-model-len)"},
        {.name = "--kv-sink-tokens", .kind = CLI_INT, .offset = offsetof(cli_engine_settings, kv_sink_tokens),
         .metavar = "S", .min = 0, .max = 1 << 20, .help = "first tokens always kept (attention sinks) by "
         "--kv-eviction streaming and h2o"},
        {0}},
};

const cli_group cli_sampling_group = {
    "sampling options",
    (const cli_option[]){
        {.name = "--max-tokens", .aliases = "-n --n-predict", .kind = CLI_INT,
         .offset = offsetof(cli_sampling_settings, max_tokens), .metavar = "N", .min = 0, .max = 1 << 24,
         .help = "tokens to generate at most"},
        {.name = "--temperature", .aliases = "--temp", .kind = CLI_FLOAT,
         .offset = offsetof(cli_sampling_settings, temperature), .metavar = "T", .min = 0, .max = 100,
         .help = "0 = greedy"},
        {.name = "--top-k", .kind = CLI_INT, .offset = offsetof(cli_sampling_settings, top_k), .metavar = "K",
         .min = 0, .max = 1 << 24, .help = "sample from the K most likely tokens; 0 = off"},
        {.name = "--top-p", .kind = CLI_FLOAT, .offset = offsetof(cli_sampling_settings, top_p), .metavar = "P",
         .min = 0, .max = 1, .help = "sample from the most likely tokens holding probability P; 1 = off"},
        {.name = "--min-p", .kind = CLI_FLOAT, .offset = offsetof(cli_sampling_settings, min_p), .metavar = "P",
         .min = 0, .max = 1, .help = "drop tokens less likely than P times the most likely one; 0 = off"},
        {.name = "--repetition-penalty", .aliases = "--repeat-penalty", .kind = CLI_FLOAT,
         .offset = offsetof(cli_sampling_settings, repetition_penalty), .metavar = "R", .min = 0.01, .max = 100,
         .help = "penalize tokens already in the prompt or output, as HF and vLLM do; 1 = off"},
        {.name = "--presence-penalty", .kind = CLI_FLOAT, .offset = offsetof(cli_sampling_settings, presence_penalty),
         .metavar = "P", .min = -2, .max = 2, .help = "subtract P from the logits of tokens in the output; 0 = off"},
        {.name = "--frequency-penalty", .kind = CLI_FLOAT,
         .offset = offsetof(cli_sampling_settings, frequency_penalty), .metavar = "P", .min = -2, .max = 2,
         .help = "subtract P times the count of each token in the output; 0 = off"},
        {.name = "--seed", .aliases = "-s", .kind = CLI_INT, .offset = offsetof(cli_sampling_settings, seed),
         .metavar = "S", .min = 0, .max = (double)INT64_MAX, .help = "seeds sampling, for repeatable output",
         .default_text = "random"},
        {0}},
};

const cli_group cli_server_group = {
    "server options",
    (const cli_option[]){
        {.name = "--host", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, host), .metavar = "ADDR",
         .help = "address to listen on"},
        {.name = "--port", .kind = CLI_INT, .offset = offsetof(cli_server_settings, port), .metavar = "N",
         .min = 0, .max = 65535, .help = "port; 0 = any free port"},
        {.name = "--api-key", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, api_key),
         .metavar = "KEY", .secret = true, .default_text = "$CLLM_API_KEY, else $VLLM_API_KEY, else none",
         .help = "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize"},
        {.name = "--api-key-file", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, api_key_file),
         .metavar = "PATH",
         .help = "read the API key from the first line of this file (a key on the command line is visible to "
                 "other users in /proc)"},
        {.name = "--metrics-require-api-key", .kind = CLI_FLAG,
         .offset = offsetof(cli_server_settings, metrics_require_api_key),
         .help = "/metrics needs the API key too (/health never does)", .default_text = "off: /metrics is open"},
        {.name = "--no-webui", .kind = CLI_FLAG, .offset = offsetof(cli_server_settings, no_webui),
         .help = "do not serve the chat page at / (GET / then answers 404)",
         .default_text = "off: the chat page is served, without a key"},
        {.name = "--served-model-name", .kind = CLI_LIST,
         .offset = offsetof(cli_server_settings, served_model_names), .metavar = "NAME",
         .help = "the model id clients use; repeat it to name each --model in order",
         .default_text = "the model's file name without .gguf"},
        {.name = "--shutdown-timeout", .kind = CLI_FLOAT, .offset = offsetof(cli_server_settings, shutdown_timeout),
         .metavar = "SECONDS", .min = 0, .max = 86400,
         .help = "on SIGTERM or SIGINT, how long running requests may take to finish"},
        {.name = "--max-waiting", .kind = CLI_INT, .offset = offsetof(cli_server_settings, max_waiting),
         .metavar = "N", .min = 0, .max = 1 << 24, .help = "waiting requests before new ones get 503; 0 = no limit"},
        {.name = "--max-body-size", .kind = CLI_MEMORY, .offset = offsetof(cli_server_settings, max_body_size),
         .metavar = "SIZE", .max = 4294967296.0,
         .help = "largest request body; larger ones get 413 without being kept in memory",
         .default_text = "1MiB, or 128 bytes per token of --max-model-len if more"},
        {.name = "--timeout-keep-alive", .kind = CLI_INT, .offset = offsetof(cli_server_settings, timeout_keep_alive),
         .metavar = "SECONDS", .min = 1, .max = 86400,
         .help = "close a connection silent this long: idle between requests, or stalled mid-request"},
        {.name = "--request-header-timeout", .kind = CLI_INT,
         .offset = offsetof(cli_server_settings, request_header_timeout), .metavar = "SECONDS", .min = 1,
         .max = 86400, .help = "close a connection whose request line and headers take longer than this"},
        {.name = "--request-body-timeout", .kind = CLI_INT,
         .offset = offsetof(cli_server_settings, request_body_timeout), .metavar = "SECONDS", .min = 1,
         .max = 86400, .help = "close a connection whose request body takes longer than this after its headers"},
        {.name = "--max-connections-per-client", .kind = CLI_INT,
         .offset = offsetof(cli_server_settings, max_connections_per_client), .metavar = "N", .min = 0,
         .max = 1 << 20, .help = "open connections per client IP address; 0 = no limit (e.g. behind a proxy)"},
        {.name = "--response-cache-size", .kind = CLI_INT, .offset = offsetof(cli_server_settings, response_cache_size),
         .metavar = "N", .min = 0, .max = 1 << 20,
         .help = "answer exact repeats of deterministic requests (temperature 0 or a seed) from an LRU cache of N "
                 "responses; 0 = off"},
        {.name = "--max-embedding-inputs", .kind = CLI_INT,
         .offset = offsetof(cli_server_settings, max_embedding_inputs), .metavar = "N", .min = 1, .max = 1 << 20,
         .help = "an embedding model: the most inputs one /v1/embeddings request may send (OpenAI's limit)"},
        {.name = "--embedding-cache-size", .kind = CLI_INT,
         .offset = offsetof(cli_server_settings, embedding_cache_size), .metavar = "N", .min = 0, .max = 1 << 24,
         .help = "an embedding model: keep the embeddings of the last N distinct text inputs (LRU); 0 = off"},
        {.name = "--reasoning-parser", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, reasoning_parser),
         .metavar = "NAME",
         .default_text = "harmony where the chat template shows <|channel|>, think where it shows <think>, else none",
         .help = "where replies' reasoning goes: deepseek_r1 or qwen3 (vLLM's names; also think): <think> ... "
                 "</think> to the chat message's reasoning_content; openai_gptoss (or harmony): gpt-oss's analysis "
                 "channel there, its final channel in content; none: the whole reply in content"},
        {.name = "--allowed-origins", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, allowed_origins),
         .metavar = "JSON", .default_text = "[]: no cross-origin access",
         .help = "CORS: the origins browsers may call from, a JSON list such as '[\"http://localhost:3000\"]'; "
                 "\"*\" allows any"},
        {.name = "--allowed-methods", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, allowed_methods),
         .metavar = "JSON", .default_text = "[\"*\"]", .help = "CORS: the methods allowed cross-origin, a JSON list"},
        {.name = "--allowed-headers", .kind = CLI_STRING, .offset = offsetof(cli_server_settings, allowed_headers),
         .metavar = "JSON", .default_text = "[\"*\"]",
         .help = "CORS: the request headers allowed cross-origin, a JSON list"},
        {0}},
};

const cli_group cli_spec_group = {
    "speculative decoding options",
    (const cli_option[]){
        {.name = "--speculative-config", .kind = CLI_STRING, .offset = offsetof(cli_spec_settings, config),
         .metavar = "JSON",
         .help = "vLLM's speculative config: {\"method\": \"ngram\", \"num_speculative_tokens\": K (1..16), "
                 "\"prompt_lookup_min\": N, \"prompt_lookup_max\": N, \"disable_by_batch_size\": N}, or "
                 "{\"method\": \"draft_model\", \"model\": PATH, \"draft_p_min\": P (an unsure draft ends the "
                 "chain), ...}, or {\"method\": \"layer_skip\", "
                 "\"draft_layers\": N, ...} (or \"model\": ADAPTER.gguf, an exit adapter), or {\"method\": "
                 "\"medusa\", \"model\": HEADS.gguf, ...} (heads and adapters made by `cllm medusa train`)",
         .default_text = "off"},
        {.name = "--speculative-model", .kind = CLI_STRING,
         .offset = offsetof(cli_spec_settings, speculative_model), .metavar = "PATH",
         .help = "speculative decoding with this draft model (GGUF or HF folder; the target's vocabulary), "
                 "drafting greedily; method \"draft_model\""},
        {.name = "--num-speculative-tokens", .kind = CLI_INT,
         .offset = offsetof(cli_spec_settings, num_speculative_tokens), .metavar = "K", .min = 1,
         .max = SPEC_MAX_TOKENS, .help = "n-gram speculative decoding with up to K draft tokens per step",
         .default_text = "off; 4 with --speculative-config"},
        {.name = "--prompt-lookup-min", .kind = CLI_INT, .offset = offsetof(cli_spec_settings, prompt_lookup_min),
         .metavar = "N", .min = 1, .max = 64, .help = "shortest n-gram that n-gram speculation matches",
         .default_text = "2"},
        {.name = "--prompt-lookup-max", .kind = CLI_INT, .offset = offsetof(cli_spec_settings, prompt_lookup_max),
         .metavar = "N", .min = 1, .max = 64,
         .help = "longest n-gram that n-gram speculation matches (tried first); with another method, "
                 "n-gram lookup is tried first each step and that method drafts where it finds nothing",
         .default_text = "5"},
        {0}},
};

/* ---- defaults and conversions ---- */

cli_engine_settings cli_engine_defaults(void) {
    const engine_config c = engine_config_defaults();
    return (cli_engine_settings){.max_model_len = c.max_model_len, .max_num_seqs = c.max_num_seqs,
                                 .max_num_batched_tokens = c.max_num_batched_tokens, .block_size = c.block_size,
                                 .kv_cache_memory = c.kv_cache_bytes, .kv_cache_dtype = c.kv_type,
                                 .prefix_caching = c.prefix_caching, .threads = c.n_threads,
                                 .kv_eviction = c.evict.policy, .kv_budget = c.evict.budget,
                                 .kv_sink_tokens = c.evict.sink};
}

engine_config cli_engine_config(const cli_engine_settings *s) {
    engine_config c = engine_config_defaults();
    c.max_model_len = (int)s->max_model_len;
    c.max_num_seqs = (int)s->max_num_seqs;
    c.max_num_batched_tokens = (int)s->max_num_batched_tokens;
    c.block_size = (int)s->block_size;
    c.kv_cache_bytes = s->kv_cache_memory;
    c.kv_type = s->kv_cache_dtype;
    c.prefix_caching = s->prefix_caching;
    c.n_threads = (int)s->threads;
    c.evict = (kv_evict_params){.policy = s->kv_eviction, .budget = (int)s->kv_budget, .sink = (int)s->kv_sink_tokens};
    return c;
}

cli_sampling_settings cli_sampling_defaults(void) {
    return (cli_sampling_settings){.max_tokens = 128, .temperature = 0.8, .top_k = 40, .top_p = 0.95,
                                   .min_p = 0.05, .repetition_penalty = 1, .seed = -1};
}

sampling_params cli_sampling_params(const cli_sampling_settings *s) {
    sampling_params p = sampling_defaults();
    p.temperature = (float)s->temperature;
    p.top_k = (int)s->top_k;
    p.top_p = (float)s->top_p;
    p.min_p = (float)s->min_p;
    p.repetition_penalty = (float)s->repetition_penalty;
    p.presence_penalty = (float)s->presence_penalty;
    p.frequency_penalty = (float)s->frequency_penalty;
    p.seed = s->seed >= 0 ? (uint64_t)s->seed : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return p;
}

int cli_spec_config(const cli_spec_settings *s, spec_config *out) {
    *out = spec_config_defaults();
    if (s->config && spec_config_parse_json(s->config, out)) return err_prefix("--speculative-config: ");
    if (s->speculative_model) {
        if (out->method == SPEC_NGRAM)
            return err_set("--speculative-model is for method \"draft_model\", not \"ngram\"");
        if (strlen(s->speculative_model) >= sizeof out->model)
            return err_set("--speculative-model: the path is too long");
        out->method = SPEC_DRAFT_MODEL;
        snprintf(out->model, sizeof out->model, "%s", s->speculative_model);
    }
    const bool short_flags = s->num_speculative_tokens > 0 || s->prompt_lookup_min > 0 || s->prompt_lookup_max > 0;
    if (short_flags && out->method == SPEC_NONE) out->method = SPEC_NGRAM;
    if (s->num_speculative_tokens > 0) out->num_speculative_tokens = (int)s->num_speculative_tokens;
    if (s->prompt_lookup_min > 0) out->prompt_lookup_min = (int)s->prompt_lookup_min;
    if (s->prompt_lookup_max > 0) out->prompt_lookup_max = (int)s->prompt_lookup_max;
    /* One bound given alone moves the other when they would cross. */
    if (s->prompt_lookup_min > 0 && !s->prompt_lookup_max && out->prompt_lookup_max < out->prompt_lookup_min)
        out->prompt_lookup_max = out->prompt_lookup_min;
    if (s->prompt_lookup_max > 0 && !s->prompt_lookup_min && out->prompt_lookup_min > out->prompt_lookup_max)
        out->prompt_lookup_min = out->prompt_lookup_max;
    if ((s->prompt_lookup_min > 0 || s->prompt_lookup_max > 0) && out->method != SPEC_NGRAM) out->lookup_first = true;
    spec_config_finish(out); /* --speculative-model may have made it a draft model */
    if (spec_config_check(out)) return err_prefix("speculative decoding: ");
    return 0;
}

cli_server_settings cli_server_defaults(void) {
    return (cli_server_settings){.host = "127.0.0.1",
                                 .port = 8000,
                                 .shutdown_timeout = 10,
                                 .max_waiting = 1024,
                                 .timeout_keep_alive = 5,
                                 .request_header_timeout = 10,
                                 .request_body_timeout = 60,
                                 .max_embedding_inputs = 2048,
                                 .embedding_cache_size = 1024};
}
