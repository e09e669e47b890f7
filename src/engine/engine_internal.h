/* The engine's private state, shared by engine.c (the step loop) and beam.c
 * (beam search). Nothing outside src/engine includes this. */
#ifndef CLLM_ENGINE_ENGINE_INTERNAL_H
#define CLLM_ENGINE_ENGINE_INTERNAL_H

#include "engine/engine.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_manager.h"
#include "model/forward.h"
#include "util/threadpool.h"

#include <pthread.h>

#define MAX_LOGPROBS 20
#define MAX_SAMPLES 64

struct engine {
    model *m;
    engine_config cfg;
    kv_cache *kv;
    kv_manager kvm;
    scheduler sched;
    threadpool *tp;
    forward_ctx *fwd;
    sampler *smp;
    int32_t *eog_ids;
    int n_eog_ids;

    /* Batch layout, sized for max_num_batched_tokens / max_num_seqs. */
    sched_batch batch;
    int32_t *b_tokens, *b_pos, *b_seq, *b_rows;
    fwd_seq *b_seqs;
    sequence **b_row_seq;
    float *logits;   /* [max_num_seqs][n_vocab] */
    float *scratch;  /* [n_vocab]: a copy of a logits row for a forked sample */
    float *raw;      /* [n_vocab]: unmodified logits, for logprobs */
    char *text;      /* detokenized piece */
    size_t text_cap;

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

/* Marks a sequence finished, releases its blocks, and (if report) tells the
 * request's callback. */
void engine_finish_seq(engine *e, sequence *s, finish_reason why, const int32_t *toks, int n_toks,
                       const token_logprobs *lp, const char *text, size_t text_len, bool report);

/* Beam search (beam.c). */
/* Records the 2 * beam_width best next tokens of `s` from its raw logits. */
void beam_collect(engine *e, sequence *s, const float *logits);
/* For every beam request whose live beams all have candidates: picks the next
 * beams (forking KV), or finishes the request with its best hypotheses. */
void beam_advance(engine *e);

#endif
