/* Beam search over the engine's sequences (see beam.c for the algorithm).
 * The dependency runs one way: the step loop (engine.c) calls beam_collect
 * and beam_advance; beam.c calls nothing in engine.c. What it needs of the
 * engine comes in a beam_env, and it ends sequences through finish.h as the
 * step loop does. */
#ifndef CLLM_ENGINE_BEAM_H
#define CLLM_ENGINE_BEAM_H

#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_manager.h"
#include "tokenizer/tokenizer.h"

#include <stddef.h>

typedef struct {
    const tokenizer *tok;
    int n_vocab; /* logits per row (the model's, which may exceed the tokenizer's) */
    int max_model_len;
    kv_manager *kvm; /* forks the KV blocks of a beam's continuations */
    scheduler *sched;
    char *text; /* scratch for a finished hypothesis's text */
    size_t text_cap;
} beam_env;

/* Records the 2 * beam_width best next tokens of `s` from its raw logits. */
void beam_collect(const beam_env *env, sequence *s, const float *logits);
/* For every beam request among live[0..n_live) whose live beams all have
 * candidates: picks the next beams (forking KV), or finishes the request
 * with its best hypotheses. */
void beam_advance(const beam_env *env, request *const *live, int n_live);

#endif
