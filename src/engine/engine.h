/* The engine: one copy of the model serving many requests at once. It owns
 * the KV cache, the scheduler's queues and the forward pass; each step it
 * schedules one batch (decodes first, then prompt chunks, under a token and a
 * sequence budget), runs one forward over it, samples, and reports each
 * request's new tokens and text through the request's callback. With
 * speculative decoding on, decoding sequences bring n-gram draft tokens into
 * the same forward and keep the accepted ones (see engine/spec.h).
 *
 * Thread safety: engine_submit, engine_abort and engine_get_stats may be
 * called from any thread. engine_step runs on one thread (the caller's, or the
 * loop thread of engine_start); callbacks run on that thread. After a
 * callback reports `finished`, the request's `user` pointer is never used
 * again. */
#ifndef CLLM_ENGINE_ENGINE_H
#define CLLM_ENGINE_ENGINE_H

#include "engine/sampler.h"
#include "engine/spec.h"
#include "grammar/constraint.h"
#include "kv/kv_cache.h"
#include "kv/kv_evict.h"
#include "model/model.h"
#include "util/histogram.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int max_num_seqs;            /* sequences per step (and running at once) */
    int max_num_batched_tokens;  /* tokens per step: the prefill chunk budget */
    int max_model_len;           /* prompt + output limit per request */
    int block_size;              /* tokens per KV block: 8, 16 or 32 */
    size_t kv_cache_bytes;       /* KV memory budget; 0 with kv_cache_blocks 0: room for
                                    max_num_seqs requests of max_model_len */
    int kv_cache_blocks;         /* if > 0, overrides kv_cache_bytes (tests) */
    kv_dtype kv_type;
    bool prefix_caching;
    int n_threads;               /* <= 0: all cores */
    int max_waiting;             /* submit fails when this many requests wait; 0 = no limit */
    kv_evict_params evict;       /* the KV eviction of requests that name none (kv/kv_evict.h) */
    spec_config spec;            /* speculative decoding; method SPEC_NONE: off; with
                                    SPEC_DRAFT_MODEL the engine loads spec.model itself */
} engine_config;

engine_config engine_config_defaults(void);

typedef enum { FINISH_NONE = 0, FINISH_STOP, FINISH_LENGTH, FINISH_ABORT, FINISH_ERROR } finish_reason;
const char *finish_reason_name(finish_reason r);

typedef struct {
    sampling_params sampling; /* logit_bias is copied */
    int max_tokens;           /* output tokens at most (>= 0) */
    int min_tokens;           /* end-of-generation and stop tokens are masked before this */
    bool ignore_eos;
    const int32_t *stop_token_ids;
    int n_stop_token_ids;
    const char *const *stop;  /* stop strings (copied) */
    int n_stop;
    int n;                    /* parallel samples (>= 1) */
    int logprobs;             /* -1: none; else the chosen token's logprob plus this many alternatives */
    int prompt_logprobs;      /* -1: none; else each prompt token's logprob (given the tokens before it)
                                 plus this many alternatives: every prompt position is computed, none
                                 taken from the prefix cache. With max_tokens 0 only the prompt runs. */
    bool include_special_text; /* render control tokens in the text */
    bool include_stop_str_in_output; /* the stop string (or stop token's text) ends the text */
    const int32_t *allowed_token_ids; /* n_allowed_token_ids > 0: only these may be sampled (copied, sorted) */
    int n_allowed_token_ids;
    /* vLLM's bad_words as token sequences, back to back in bad_word_ids,
     * bad_word_lens[i] tokens each: the last token of a sequence is banned
     * when the output ends with the ones before it (copied). */
    const int32_t *bad_word_ids;
    const int *bad_word_lens;
    int n_bad_words;
    int beam_width;           /* > 1: beam search with this many beams; the n best are reported */
    float length_penalty;     /* beam score = cumulative logprob / output_length^length_penalty */
    constraint *constraint;   /* structured output (a grammar the output must match); NULL: none.
                                 The request holds its own reference. */
    kv_evict_params evict;    /* KV eviction past a per-sequence budget (kv/kv_evict.h); policy none: off */
} request_params;

request_params request_params_defaults(void);

typedef struct {
    int32_t token;
    float logprob;
    int rank;                 /* prompt logprobs: 1 + the tokens at least as likely (vLLM's rank); else 0 */
    int n_top;
    const int32_t *top_tokens;
    const float *top_logprobs;
} token_logprobs;

typedef struct {
    uint64_t request_id;
    int index;                 /* which of the n samples */
    int n_new_tokens;          /* 0 or 1 per output (a step with accepted speculative drafts
                                  reports one output per token); a beam search reports all at the end */
    const int32_t *new_tokens;
    const token_logprobs *logprobs; /* [n_new_tokens] when asked for */
    /* [n_prompt_tokens] with prompt_logprobs, on each sample's first output
     * (entry 0 has no context: token only, n_top 0); NULL otherwise. */
    const token_logprobs *prompt_logprobs;
    const char *text;          /* newly released text (whole UTF-8 characters) */
    size_t text_len;
    bool finished;
    finish_reason reason;
    int n_prompt_tokens;
    int n_cached_tokens;
    int n_output_tokens;
    int n_evicted_tokens;      /* tokens of this sample evicted from its KV cache (kv/kv_evict.h) */
    const char *error;         /* reason FINISH_ERROR: why, when the request itself caused it (its grammar
                                  past a limit while generating); NULL otherwise */
} engine_output;

typedef void (*engine_output_fn)(void *user, const engine_output *out);

typedef struct {
    int n_running;       /* sequences */
    int n_waiting;
    int kv_blocks_total;
    int kv_blocks_used;
    int kv_tokens_used;  /* token slots holding data, for utilization */
    uint64_t prefix_queries, prefix_hits;
    uint64_t preemptions;
    uint64_t kv_evictions, kv_evicted_tokens; /* compactions, and the tokens they evicted */
    uint64_t prompt_tokens, generation_tokens;
    uint64_t requests_finished;
    histogram ttft, tpot, e2e, queue;
    /* Speculative decoding (vLLM's spec_decode counters): verifications,
     * draft tokens verified, drafts accepted, and accepted at each position. */
    int spec_k; /* the most drafts a sequence has in a step (spec_max_draft); 0: speculation off */
    uint64_t spec_drafts, spec_draft_tokens, spec_accepted_tokens;
    uint64_t spec_accepted_per_pos[SPEC_MAX_TOKENS];
    uint64_t spec_drafted_per_pos[SPEC_MAX_TOKENS]; /* drafts that had a token at position i */
    /* Of those, the draft tokens n-gram lookup gave a method that tries it first (lookup_first), and accepted. */
    uint64_t spec_lookup_tokens, spec_lookup_accepted;
    /* Draft trees: verifications whose accepted path was not the nodes'
     * first slots, so its KV rows moved into place. */
    uint64_t spec_paths_moved;
    /* A mixture of experts: expert layers run (one per layer and step), and
     * the distinct experts whose weights they read (the experts the step's
     * tokens chose). */
    uint64_t moe_layer_steps, moe_experts_read;
} engine_stats;

typedef struct engine engine;

/* NULL with err_get() when the KV budget cannot hold one request of
 * max_model_len, or on allocation failure. */
engine *engine_create(model *m, const engine_config *cfg);
void engine_free(engine *e);
const engine_config *engine_get_config(const engine *e);
/* KV capacity in tokens (full-attention layers) and how many max_model_len
 * requests fit at once. */
int engine_kv_capacity_tokens(const engine *e);
int engine_max_concurrency(const engine *e);

/* Queues a request; its id goes to *id. Fails (-1, err_get()) when the prompt
 * is empty or too long, the request could never fit in the KV cache, or the
 * waiting queue is full (then err_get() starts with "queue full"). */
int engine_submit(engine *e, const int32_t *prompt, int n_prompt, const request_params *p,
                  engine_output_fn on_output, void *user, uint64_t *id);
/* Aborts a request; it reports finished (FINISH_ABORT) at the next step. */
void engine_abort(engine *e, uint64_t id);

/* Runs one step. Returns the number of unfinished requests after it. */
int engine_step(engine *e);
/* Whether any request is queued, running or waiting in the inbox. */
bool engine_has_work(engine *e);

/* A loop thread that steps while there is work and sleeps otherwise. */
int engine_start(engine *e);
/* Stops the loop thread (after its current step); requests stay queued. */
void engine_stop(engine *e);
/* Aborts everything unfinished (the callbacks see FINISH_ABORT). */
void engine_abort_all(engine *e);

void engine_get_stats(engine *e, engine_stats *out);

#endif
