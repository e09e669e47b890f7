/* The response cache (`cllm serve --response-cache-size N`): exact repeats of
 * deterministic requests (temperature 0, a fixed seed, or beam search) are
 * answered from memory without touching the engine.
 *
 * Key: the request body as canonical JSON (keys sorted, compact), with the
 * endpoint and the served name of the model that answers it in it (one cache
 * serves every model of the server, so the same body sent to two models is
 * two entries) and without what cannot change the output: null fields (null
 * means "not given"), the accepted-and-ignored fields (api_field_ignored:
 * user, metadata, ...), "model" as the client spelled it (any alias of that
 * model), and "stream" / "stream_options", which only choose
 * how the same output is delivered. The whole key is stored and compared, so
 * a hash collision cannot serve a wrong answer.
 *
 * Value: the engine's outputs for the request in the order they came (text,
 * logprobs, token counts, finish reasons), recorded through a gen tap. A hit
 * feeds them to a fresh gen (gen_feed), so the response is built by the same
 * code as a live one: a whole body, or SSE chunks one engine output at a
 * time, with the same shapes. Only answers whose every choice finished with
 * "stop" or "length" are kept.
 *
 * Eviction: least recently used, at N entries. Entries are reference-counted,
 * so one being replayed survives its eviction until the replay ends. */
#ifndef CLLM_SERVER_RESPONSE_CACHE_H
#define CLLM_SERVER_RESPONSE_CACHE_H

#include "server/generation.h"
#include "server/params.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct response_cache response_cache;
typedef struct response_replay response_replay;

typedef struct {
    uint64_t hits, misses; /* lookups of cacheable requests */
    size_t entries;
    size_t capacity;
} response_cache_stats;

/* NULL when out of memory; capacity > 0 entries. */
response_cache *response_cache_create(size_t capacity);
/* No replay may still be running. */
void response_cache_free(response_cache *c);
void response_cache_get_stats(response_cache *c, response_cache_stats *out);

/* Whether the request's output is fixed by the request alone. */
bool response_cache_cacheable(const api_request *r);
/* The canonical key of a parsed-valid body (see above); NULL when out of
 * memory. Free it with free(). */
char *response_cache_key(const json_t *body, api_kind kind, const char *served_name);

/* A hit: a replay to feed into a gen made for the same request; counts a hit
 * or a miss. */
response_replay *response_cache_lookup(response_cache *c, const char *key);
/* Feeds the next recorded output into g. Returns false when none is left. */
bool response_replay_step(response_replay *rp, gen *g);
/* Feeds everything left. */
void response_replay_all(response_replay *rp, gen *g);
void response_replay_free(response_replay *rp);

/* On a miss, before anything is submitted: records g's outputs. */
void response_cache_record(gen *g);
/* After g finished: keeps its recording under key when every choice
 * succeeded (else drops it). Harmless on a gen that records nothing. */
void response_cache_store(response_cache *c, const char *key, gen *g);

#endif
