/* The engine's state, shared by engine.c (the loop: inbox, schedule, run)
 * and postprocess.c (what happens to a step's logits). Nothing outside
 * src/engine/engine*.c and postprocess.c includes this. */
#ifndef CLLM_ENGINE_ENGINE_INTERNAL_H
#define CLLM_ENGINE_ENGINE_INTERNAL_H

#include "engine/beam.h"
#include "engine/seq_constraint.h"
#include "engine/draft.h"
#include "engine/spec_medusa.h"
#include "engine/engine.h"
#include "engine/prompt_logprobs.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/runner.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_LOGPROBS 20
#define MAX_SAMPLES 64

struct engine {
    model *m;
    engine_config cfg;
    runner run; /* KV cache and its block manager, forward pass, threads */
    scheduler sched;
    sampler *smp;
    model *draft_model;  /* method draft_model: loaded from spec.model, owned */
    model *draft_view;   /* method layer_skip: the target with fewer layers (shares its weights) */
    draft_runner *draft;
    medusa_drafter *medusa; /* method medusa */
    int32_t *eog_ids;
    int n_eog_ids;

    /* Batch layout, sized for max_num_batched_tokens / max_num_seqs. */
    sched_batch batch;
    int32_t *b_tokens, *b_pos, *b_seq, *b_rows;
    int32_t *b_rope;   /* draft trees: each token's rotary position (fwd_batch.rope_pos) */
    uint32_t *b_tree;  /* and its ancestry mask (fwd_batch.tree) */
    fwd_seq *b_seqs;
    sequence **b_row_seq;
    int max_out;     /* logits rows per step: max_num_seqs + max_draft_rows */
    int max_draft_rows; /* speculative draft tokens per step, all sequences */
    float *logits;   /* [max_out][n_vocab] */
    sequence **spec_seqs; /* [max_num_seqs]: this step's sequences for the draft model */
    int *spec_want;       /* [max_num_seqs]: the drafts each may take */
    float *scratch;  /* [n_vocab]: a copy of a logits row for a forked sample */
    float *raw;      /* [n_vocab]: unmodified logits, for logprobs */
    char *text;      /* detokenized piece */
    size_t text_cap;
    prompt_lp_scratch prompt_lp; /* logits rows of prompt positions (prompt_logprobs) */
    beam_env beam;   /* what beam search sees of all this */
    constrainer cons; /* structured output: the vocabulary index and a mask */

    /* Requests not yet finished, owned by the engine thread. */
    request **live;
    int n_live;
    size_t cap_live;

    /* Inbox, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    request **inbox;
    int n_inbox;
    size_t cap_inbox;
    uint64_t *aborts;
    int n_aborts;
    size_t cap_aborts;
    bool abort_all;
    int n_unfinished; /* inbox + live, under mu */
    uint64_t next_id;

    pthread_t loop;
    bool loop_running;
    bool loop_stop;

    pthread_mutex_t stats_mu;
    engine_stats stats;
};

/* Ends a sequence (reporting tok and text when given) or every sample of a request. */
void engine_finish_seq(engine *e, sequence *s, finish_reason why, const int32_t *tok, const token_logprobs *lp,
                       const char *text, size_t text_len);
void engine_finish_request(engine *e, request *r, finish_reason why);

/* After a forward pass over the step's batch (n_rows logits rows in
 * e->logits): counts what was computed, then for each sequence, in batch
 * order, verifies its drafts, collects a beam, forks its samples, or samples
 * and reports its next token (postprocess.c). */
void postprocess(engine *e, int n_rows);

#endif
