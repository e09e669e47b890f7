/* vLLM's prompt_logprobs: the log-probability of every prompt token given the
 * tokens before it, with its rank and the most likely alternatives. The
 * prefill of such a sequence needs the output head on every position of each
 * chunk, not only the last; after the step's forward pass, prompt_lp_collect
 * runs the head over those rows a few at a time (forward_logits) and keeps
 * per position only the token's logprob, its rank and the top k, never the
 * [positions][n_vocab] matrix. Position j's entry comes from the logits of
 * position j - 1, so a chunk that ends before the prompt's last token fills
 * its own positions and the first of the next chunk. */
#ifndef CLLM_ENGINE_PROMPT_LOGPROBS_H
#define CLLM_ENGINE_PROMPT_LOGPROBS_H

#include "engine/request.h"
#include "model/forward.h"
#include "util/threadpool.h"

typedef struct {
    float *logits;       /* [max_rows][n_vocab], allocated at the first use */
    int32_t *rows;       /* batch rows of this group */
    sequence **row_seq;  /* and whose prompt position each one predicts */
    int *row_pos;
    int max_rows;
} prompt_lp_scratch;

/* After forward_run over a batch whose sequences are seqs[0..n_seqs), in the
 * batch's order, n_computed not yet advanced by n_scheduled: fills the prompt
 * logprobs of every sequence that wants them (the rows spread over threads), and
 * marks a request done when its whole prompt was computed. max_out:
 * forward_logits' row limit. Returns
 * 0, or -1 with err_get() (out of memory, or a forward error). */
int prompt_lp_collect(prompt_lp_scratch *sc, forward_ctx *f, threadpool *threads, int max_out, int n_vocab,
                      sequence *const *seqs, int n_seqs);
void prompt_lp_free(prompt_lp_scratch *sc);

#endif
