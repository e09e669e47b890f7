/* Medusa drafts in the engine ("method": "medusa"): after each step, every
 * sequence that was just sampled and may speculate next gets its guesses
 * from the hidden state of the row it was sampled from, all in one batch
 * (model/medusa.h); the next step's propose_drafts takes them as drafts.
 * The guesses of a row are the tokens 2..K+1 places after its position,
 * i.e. the ones after the token just sampled, so they line up with the
 * chain the engine verifies: that token, then the drafts. */
#ifndef CLLM_ENGINE_SPEC_MEDUSA_H
#define CLLM_ENGINE_SPEC_MEDUSA_H

#include "engine/request.h"
#include "model/forward.h"
#include "model/medusa.h"
#include "util/threadpool.h"

typedef struct {
    medusa_heads *heads;
    int max_rows, k;
    sequence **seqs;   /* [max_rows] this step's sampled sequences */
    int32_t *rows;     /* [max_rows] the batch row each was sampled from */
    float *hidden;     /* [max_rows][n_embd] */
    int32_t *tokens;   /* [max_rows][k] */
    int n;
} medusa_drafter;

/* Loads the heads for m from path; k guesses per sequence (at most the
 * heads'), for up to max_rows sequences a step. NULL with err_get(). */
medusa_drafter *medusa_drafter_create(const model *m, const char *path, int max_rows, int k);
void medusa_drafter_free(medusa_drafter *d);

/* Sequence s was just sampled from batch row `row` (a token row of the
 * step's forward) and will decode next: it gets guesses at the next run. */
void medusa_drafter_note(medusa_drafter *d, sequence *s, int32_t row);
/* The guesses of every noted sequence, from the forward's hidden states,
 * into s->spec.guess (before the next forward overwrites them). */
void medusa_drafter_run(medusa_drafter *d, forward_ctx *f, threadpool *threads);

/* Copies up to k of s's guesses into draft when they were made for its
 * current tokens; returns how many. */
int medusa_drafter_take(const sequence *s, int k, int32_t *draft);

#endif
