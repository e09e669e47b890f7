/* /metrics in the Prometheus text format (version 0.0.4). Names follow
 * vLLM's (prefix "vllm:", label model_name) so dashboards built for vLLM work
 * unchanged; what only cllm has uses the prefix "cllm:". With several models
 * served, each metric of a model has one sample per model, told apart by
 * model_name; what belongs to the whole server (HTTP responses, the response
 * cache's size) has no model_name.
 *
 *   vllm:num_requests_running / _waiting        gauges (sequences)
 *   vllm:kv_cache_usage_perc                    gauge, 0..1 (blocks in use)
 *   vllm:prefix_cache_queries_total / _hits_total  counters (tokens)
 *   vllm:num_preemptions_total                  counter
 *   vllm:prompt_tokens_total, vllm:generation_tokens_total  counters
 *   vllm:request_success_total{finished_reason} counter
 *   vllm:time_to_first_token_seconds, vllm:time_per_output_token_seconds,
 *   vllm:e2e_request_latency_seconds, vllm:request_queue_time_seconds  histograms
 *   cllm:kv_cache_blocks_total / _used, cllm:kv_cache_tokens_used  gauges
 *   cllm:http_responses_total{code="2xx"...}   counter, server-wide
 *   cllm:server_ready                           gauge, 1 when the model is loaded
 *   cllm:response_cache_hits_total / _misses_total  counters (the model's cacheable requests), and
 *   cllm:response_cache_entries                 gauge, server-wide: only with a response cache
 *   cllm:embedding_inputs_total, _tokens_total, _forward_passes_total  counters:
 *                                               only for an embedding model
 *   cllm:embedding_cache_hits_total / _misses_total  counters (text inputs), and
 *   cllm:embedding_cache_entries                gauge: only with an embedding cache
 *   cllm:constraint_cache_hits_total / _misses_total  counters, server-wide: structured-output
 *                                               constraints found compiled / compiled anew
 * The embedding samples are those of each embedding model served. */
#ifndef CLLM_SERVER_METRICS_H
#define CLLM_SERVER_METRICS_H

#include "engine/embedder.h"
#include "engine/engine.h"
#include "server/embed_cache.h"
#include "server/response_cache.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>

/* One model's samples. */
typedef struct {
    const char *name;
    bool ready;
    engine_stats stats;                  /* zeros while loading */
    uint64_t finished[FINISH_ERROR + 1]; /* by finish_reason */
    uint64_t cache_hits, cache_misses;   /* with a response cache */
    bool has_embedder;                   /* an embedding model, loaded */
    embedder_stats embedder;
    bool has_embed_cache;
    embed_cache_stats embed_cache;
} metrics_model;

typedef struct {
    const metrics_model *models;
    int n_models;
    uint64_t http[6];                    /* by status class */
    bool has_response_cache;
    size_t response_cache_entries;
    uint64_t constraint_cache_hits, constraint_cache_misses; /* constraint_cache_stats */
} metrics_input;

void metrics_render(buf *b, const metrics_input *in);

#endif
