/* Embeddings for many callers at once: each call queues its inputs (token
 * ids) and waits; one worker thread takes queued inputs in arrival order,
 * from as many calls as fit in max_batch_tokens, and embeds them in a single
 * encoder_forward over its thread pool. Concurrent requests so share forward
 * passes, as generation requests share steps in the engine. */
#ifndef CLLM_ENGINE_EMBEDDER_H
#define CLLM_ENGINE_EMBEDDER_H

#include "model/encoder.h"

#include <stdint.h>

typedef struct embedder embedder;

typedef struct {
    uint64_t forward_passes; /* encoder_forward calls */
    uint64_t inputs;         /* inputs embedded */
    uint64_t tokens;         /* their tokens */
} embedder_stats;

/* n_threads 0: all cores. max_batch_tokens: tokens per forward pass (a single
 * longer input still runs, alone). NULL with err_get(). */
embedder *embedder_create(const encoder *enc, int n_threads, int max_batch_tokens);
/* Embeds n inputs (ids[i], lens[i] tokens; see encoder_forward) into out[n][n_embd],
 * blocking until all are done. Any thread. Returns 0, or -1 with err_get(). */
int embedder_embed(embedder *eb, const int32_t *const *ids, const int *lens, int n, float *out);
void embedder_get_stats(embedder *eb, embedder_stats *st);
/* Joins the worker; no call may be waiting. */
void embedder_free(embedder *eb);

#endif
