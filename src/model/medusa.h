/* Medusa heads (Cai et al., 2024): K small residual blocks on the model's
 * last hidden state (after the final norm), head k guessing the token k + 1
 * places past the one the model's own output head predicts. Block k is
 * y = h + SiLU(W_k h + b_k); its logits are y times the model's own output
 * matrix, which the heads share and do not train.
 *
 * Chained heads (Hydra, Ankner et al., 2024) also read the token before the
 * one they guess: block k is z_k+1 = z_k + SiLU(W_k [n(z_k); e(x_k)] + b_k),
 * z_0 the hidden state, x_0 the token just sampled from it, x_k (k > 0) the
 * token block k - 1 guessed, n(v) v scaled to unit RMS, e(x) = n(the model's
 * embedding row of x): both halves of the input on one scale, whatever the
 * hidden state's, so the token's half weighs from the first step. Knowing
 * the token in between is most of what an independent head lacks: head 0
 * no longer guesses two places ahead blind. A tree of
 * chained heads runs each head on every node that has children (the nodes'
 * own tokens are the inputs), so candidates differ per parent.
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
 * per-head accuracies (medusa.train.top1 / top5, float32 arrays; a chained
 * head's given the true tokens before it), medusa.kind ("medusa", the
 * default, or "hydra" for chained heads) and tensors medusa.<k>.weight
 * [n_embd][n_in] (F32, F16 or Q8_0; n_in = n_embd, or 2 n_embd when chained) and
 * medusa.<k>.bias [n_embd] (F32), k = 0..n_heads-1.
 *
 * An exit adapter (medusa.kind "exit", medusa.exit_layer L) is one such
 * block on the hidden state after the model's first L layers (final-normed),
 * guessing the next token itself: the draft of layer_skip self-speculation,
 * which runs those L layers, reads it instead of handing layer L's state
 * straight to the output head. On gemma-3-270m, after 12 of 18 layers, the
 * raw exit agrees with the full model on 69% of held-out tokens, the
 * trained block on 87% (bench/RESULTS.md). */
#ifndef CLLM_MODEL_MEDUSA_H
#define CLLM_MODEL_MEDUSA_H

#include "kernels/matmul.h"
#include "model/head_slice.h"
#include "model/model.h"
#include "util/threadpool.h"

#include <stdbool.h>
#include <stdint.h>

#define MEDUSA_MAX_HEADS 8

typedef struct {
    int n_heads;
    int n_embd;
    bool chained;               /* Hydra: each block also reads a token's embedding */
    int n_in;                   /* a block's input: n_embd, 2 n_embd when chained */
    int exit_layer;             /* an exit adapter's layer L; 0: heads on the last hidden state */
    int n_draft_vocab;          /* N */
    int32_t *draft_vocab;       /* [N] the model's token id of each draft row */
    float *w[MEDUSA_MAX_HEADS]; /* [n_embd][n_in] row-major: out[o] = sum_i w[o][i] x[i] */
    float *b[MEDUSA_MAX_HEADS]; /* [n_embd] */
    float top1[MEDUSA_MAX_HEADS], top5[MEDUSA_MAX_HEADS]; /* held-out accuracy when trained */
} medusa_params;

/* Heads of zeros over a copy of vocab: each block gives y = h + SiLU(0) =
 * h, Medusa's initialization (every head starts as the model's own next
 * token guess). 0, or -1 with err_get(). */
int medusa_params_init(medusa_params *p, int n_heads, int n_embd, const int32_t *vocab, int n_vocab, bool chained);

/* n(v): v[0..n) scaled to unit RMS, into out (may be v). */
void medusa_unit_rms(const float *v, int n, float *out);
/* e(x): row `token` of m's token embedding, scaled to unit RMS, into out[n_embd]. */
void medusa_token_input(const model *m, int32_t token, float *out);
/* A block's output once its matmul has run, over n rows of n_embd e: wx (W x) becomes the pre-activation
 * a = wx + b, which training's backward pass keeps, and y = res + SiLU(a). wx may be y. */
void medusa_block_out(float *wx, const float *res, const float *b, int n, int e, float *y);
/* Keeps the first n tokens of p's draft vocabulary (the most frequent first, so a prefix is a smaller draft
 * vocabulary), rounded down to a multiple of 8 above 8; n <= 0 or beyond it keeps all. */
void medusa_params_keep_vocab(medusa_params *p, int n);
void medusa_params_free(medusa_params *p);

/* Writes p for model m (its name and vocabulary size) to path, the blocks'
 * matrices as type: WT_F32, WT_F16 or WT_Q8_0 (what medusa_load reads).
 * 0, or -1 with err_get(). */
int medusa_save(const medusa_params *p, const model *m, const char *path, wtype type);
/* Reads heads made for a model of m's shape: n_embd and n_vocab must match,
 * every draft token be in the vocabulary. 0, or -1 with err_get() naming
 * the problem. */
int medusa_load(medusa_params *p, const model *m, const char *path);

/* Heads ready to run: the parameters, and the draft rows of the model's
 * output matrix gathered into a weight of their own (its type). */
typedef struct medusa_heads medusa_heads;

/* Takes ownership of *p (zeroed on success). NULL with err_get(). max_rows
 * is the most hidden states one call takes, max_nodes the most nodes of a
 * medusa_draft tree (at least the heads). The blocks' matrices run as
 * block_type: WT_F32 as trained, or a type with a quantizer (WT_Q8_0 reads
 * a quarter of F32's bytes per step; a draft's rounding changes which
 * guesses are made, never what verification keeps). */
medusa_heads *medusa_create(medusa_params *p, const model *m, int max_rows, int max_nodes, wtype block_type);
void medusa_free(medusa_heads *h);
int medusa_n_heads(const medusa_heads *h);
bool medusa_chained(const medusa_heads *h);

/* Independent heads only (not chained). For each of the n hidden states
 * (final-normed, [n][n_embd]; n <= max_rows), the top token of heads
 * 0..k-1 into tokens[i * k + j]
 * (k <= n_heads): the guesses for the tokens 2..k+1 places after the row's
 * position. Every head of every row goes through the draft head in one
 * matmul, so its bytes are read once per call. The same bits in any batch. */
void medusa_propose(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int32_t *tokens);

/* Candidates per head, at most (a draft tree's ranks), and a tree's nodes. */
#define MEDUSA_MAX_TOP 8
#define MEDUSA_MAX_NODES 32

/* The same with the `top` best tokens of each head (top <= MEDUSA_MAX_TOP
 * and the draft vocabulary), best first, the lower draft row first among
 * equal logits: tokens[(i * k + j) * top + t] is head j's t-th choice for
 * row i, so top 1 is medusa_propose. */
void medusa_propose_top(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int top,
                        int32_t *tokens);

/* Either kind: a tree of n_nodes drafts per hidden state (node j is
 * candidate rank[j] of its parent's guesses, parent[j] < j, -1: the root;
 * a chain is parent j - 1, rank 0; n_nodes <= max_nodes, no deeper than
 * the heads, ranks < MEDUSA_MAX_TOP). last[i] is the token just sampled from
 * row i, which chained heads read first. Node j's token into
 * tokens[i * n_nodes + j]. For independent heads node j is head depth(j)'s
 * candidate rank[j], whatever its parent; chained heads run once per
 * depth over every node with children. With probs (else NULL), the
 * probability node j's head gave its token (softmax over the draft
 * vocabulary, temperature 1) into probs[i * n_nodes + j]: how sure the
 * draft is. The same bits in any batch. */
void medusa_draft(medusa_heads *h, threadpool *threads, const float *hidden, const int32_t *last, int n,
                  const int8_t *parent, const int8_t *rank, int n_nodes, int32_t *tokens, float *probs);

#endif
