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
#include "engine/spec_tree.h"
#include "model/forward.h"
#include "model/medusa.h"
#include "util/threadpool.h"

typedef struct {
    medusa_heads *heads;
    int max_rows, k;   /* heads run per sequence */
    spec_tree tree;    /* n 0: a chain of k guesses (its parents and ranks still filled in) */
    int n_nodes;       /* guesses per sequence: the tree's nodes, or k */
    sequence **seqs;   /* [max_rows] this step's sampled sequences */
    int32_t *rows;     /* [max_rows] the batch row each was sampled from */
    float *hidden;     /* [max_rows][n_embd] */
    int32_t *last;     /* [max_rows] each sequence's last token (chained heads read it) */
    int32_t *tokens;   /* [max_rows][n_nodes] */
    float p_min;       /* > 0: a chain ends after its first guess less likely than this (draft_p_min) */
    float *probs;      /* [max_rows][n_nodes] the guesses' probabilities, with p_min */
    int n;
} medusa_drafter;

/* Loads the heads for m from path, for up to max_rows sequences a step:
 * with token_tree "" a chain of k guesses per sequence (at most the
 * heads'); else a tree of k nodes, "auto" or a list of paths
 * (spec_config.token_tree), no deeper than the heads. vocab_size > 0 keeps
 * the first vocab_size tokens of the heads' draft vocabulary (a multiple of
 * 8 above 8): fewer rows of the output matrix read per guess. NULL with
 * err_get(). */
medusa_drafter *medusa_drafter_create(const model *m, const char *path, int max_rows, int k, const char *token_tree,
                                      int vocab_size);
void medusa_drafter_free(medusa_drafter *d);

/* Sequence s was just sampled from batch row `row` (a token row of the
 * step's forward) and will decode next: it gets guesses at the next run. */
void medusa_drafter_note(medusa_drafter *d, sequence *s, int32_t row);
/* The guesses of every noted sequence, from the forward's hidden states,
 * into s->spec.guess (before the next forward overwrites them). */
void medusa_drafter_run(medusa_drafter *d, forward_ctx *f, threadpool *threads);

/* Makes up to k of s's guesses its drafts (s->spec.draft, and for a tree
 * s->spec.parent and tree) when they were made for its current tokens;
 * returns how many. With p_min, a chain stops after its first guess whose
 * head gave it less: what follows an unsure guess is rarely accepted, and
 * every draft is a row of the next forward pass. */
int medusa_drafter_take(const medusa_drafter *d, sequence *s, int k);

#endif
