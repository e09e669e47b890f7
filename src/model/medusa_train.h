/* Training Medusa heads (model/medusa.h) on a frozen model. The model runs
 * over each training sequence once and its last hidden states are kept;
 * then head k learns, from the hidden state at position t, the token at
 * t + 2 + k (the model's own output head gives t + 1); an exit adapter, from
 * the state after its first layers, the token at t + 1. The sequences should
 * be the model's own text (its greedy continuations of varied prompts:
 * Medusa-2's self-distillation), so the heads learn what it will say, which
 * is what verification accepts.
 *
 * The draft vocabulary is the N tokens most frequent in the sequences. The
 * loss is the cross-entropy over those N (a target outside them cannot be
 * drafted anyway); each head trains with Adam from Medusa's zero
 * initialization. Chained heads (medusa.h) train head by head on each
 * batch, head j reading the state head j - 1 just computed (not
 * differentiated through) and the text's token before its target. Accuracy is measured on held-out sequences, a target
 * outside the draft vocabulary counting as a miss: the acceptance a chain of
 * drafts can expect per position. */
#ifndef CLLM_MODEL_MEDUSA_TRAIN_H
#define CLLM_MODEL_MEDUSA_TRAIN_H

#include "model/medusa.h"
#include "model/model.h"

#include <stdint.h>

typedef struct {
    int n_heads;        /* K, 1..MEDUSA_MAX_HEADS */
    bool chained;       /* Hydra's heads, each reading the token before its guess */
    int exit_layer;     /* >0: an exit adapter (medusa.h): one independent block on the state after this many
                           layers, learning the next token itself (the full model's, in its own text) */
    int draft_vocab;    /* N at most (fewer when fewer distinct tokens occur) */
    int epochs;
    int batch;          /* positions per optimizer step */
    float lr;           /* Adam's step size */
    float holdout;      /* fraction of the sequences kept for accuracy (0: none measured) */
    uint64_t seed;
    int n_threads;      /* 0: every core */
    /* Called with a line of progress (an epoch's loss and accuracy); may be NULL. */
    void (*progress)(void *user, const char *line);
    void *user;
} medusa_train_opts;

medusa_train_opts medusa_train_defaults(void);

typedef struct {
    int64_t train_positions, holdout_positions;
    double seconds_hidden, seconds_train;
    float top1[MEDUSA_MAX_HEADS], top5[MEDUSA_MAX_HEADS]; /* held-out, after the last epoch */
    float vocab_coverage; /* share of held-out targets inside the draft vocabulary */
    float start_top1[MEDUSA_MAX_HEADS]; /* an exit adapter's held-out top-1 before training: the raw exit's */
} medusa_train_report;

/* Trains heads for m on n_seqs token sequences; *out gets them (free with
 * medusa_params_free), their top1/top5 the held-out accuracy. 0, or -1
 * with err_get(). */
int medusa_train(const model *m, const int32_t *const *seqs, const int *lens, int n_seqs, const medusa_train_opts *o,
                 medusa_params *out, medusa_train_report *rep);

#endif
