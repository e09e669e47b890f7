/* Medusa heads (Cai et al., 2024): K small residual blocks on the model's
 * last hidden state (after the final norm), head k guessing the token k + 1
 * places past the one the model's own output head predicts. Block k is
 * y = h + SiLU(W_k h + b_k); its logits are y times the model's own output
 * matrix, which the heads share and do not train.
 *
 * The heads read only the draft vocabulary's rows of that matrix: the N
 * tokens most frequent in the training text, counted by the model's
 * tokenizer (FR-Spec, Zhao et al., 2025). A full output head is most of a
 * small model's bytes (178 of gemma-3-270m's 247 MB); N = 16k of its 262k
 * tokens cuts a draft's share to a sixteenth. The target still verifies with
 * its full head, so the drafts change the speed, never the output.
 *
 * The file is a GGUF: general.architecture "medusa", medusa.n_heads,
 * medusa.n_embd, medusa.n_vocab (the model's), medusa.base_model (its name),
 * medusa.draft_vocab (int32 token ids, most frequent first), the training's
 * per-head accuracies (medusa.train.top1 / top5, float32 arrays), and
 * tensors medusa.<k>.weight [n_embd][n_embd] (F32 or F16) and
 * medusa.<k>.bias [n_embd] (F32), k = 0..n_heads-1. */
#ifndef CLLM_MODEL_MEDUSA_H
#define CLLM_MODEL_MEDUSA_H

#include "kernels/matmul.h"
#include "model/head_slice.h"
#include "model/model.h"
#include "util/threadpool.h"

#include <stdint.h>

#define MEDUSA_MAX_HEADS 8

typedef struct {
    int n_heads;
    int n_embd;
    int n_draft_vocab;          /* N */
    int32_t *draft_vocab;       /* [N] the model's token id of each draft row */
    float *w[MEDUSA_MAX_HEADS]; /* [n_embd][n_embd] row-major: out[o] = sum_i w[o][i] h[i] */
    float *b[MEDUSA_MAX_HEADS]; /* [n_embd] */
    float top1[MEDUSA_MAX_HEADS], top5[MEDUSA_MAX_HEADS]; /* held-out accuracy when trained */
} medusa_params;

/* Heads of zeros over a copy of vocab: each block gives y = h + SiLU(0) =
 * h, Medusa's initialization (every head starts as the model's own next
 * token guess). 0, or -1 with err_get(). */
int medusa_params_init(medusa_params *p, int n_heads, int n_embd, const int32_t *vocab, int n_vocab);
void medusa_params_free(medusa_params *p);

/* Writes p for model m (its name and vocabulary size) to path, weights in
 * F16 when f16. 0, or -1 with err_get(). */
int medusa_save(const medusa_params *p, const model *m, const char *path, bool f16);
/* Reads heads made for a model of m's shape: n_embd and n_vocab must match,
 * every draft token be in the vocabulary. 0, or -1 with err_get() naming
 * the problem. */
int medusa_load(medusa_params *p, const model *m, const char *path);

/* Heads ready to run: the parameters, and the draft rows of the model's
 * output matrix gathered into a weight of their own (its type). */
typedef struct medusa_heads medusa_heads;

/* Takes ownership of *p (zeroed on success). NULL with err_get(). max_rows
 * is the most hidden states one medusa_propose takes. */
medusa_heads *medusa_create(medusa_params *p, const model *m, int max_rows);
void medusa_free(medusa_heads *h);
int medusa_n_heads(const medusa_heads *h);

/* For each of the n hidden states (final-normed, [n][n_embd]; n <=
 * max_rows), the top token of heads 0..k-1 into tokens[i * k + j]
 * (k <= n_heads): the guesses for the tokens 2..k+1 places after the row's
 * position. Every head of every row goes through the draft head in one
 * matmul, so its bytes are read once per call. The same bits in any batch. */
void medusa_propose(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int32_t *tokens);

/* Candidates per head, at most (a draft tree's ranks). */
#define MEDUSA_MAX_TOP 8

/* The same with the `top` best tokens of each head (top <= MEDUSA_MAX_TOP
 * and the draft vocabulary), best first, the lower draft row first among
 * equal logits: tokens[(i * k + j) * top + t] is head j's t-th choice for
 * row i, so top 1 is medusa_propose. */
void medusa_propose_top(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int top,
                        int32_t *tokens);

#endif
