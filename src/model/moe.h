/* A mixture-of-experts FFN over a batch of tokens. The router scores every
 * expert for each token (softmax or sigmoid of ffn_gate_inp . x), each token
 * takes its n_expert_used best (their weights renormalized to sum 1 and
 * scaled where the family does so), and the tokens are grouped by expert:
 * one matmul per chosen expert over exactly the tokens that chose it, so a
 * step reads only the experts its tokens use (one token: its k experts).
 * Each token's output is the weighted sum of its experts' outputs, added in
 * ascending expert order (as transformers' loop does), plus the shared
 * expert's output (times sigmoid(sh_router . x) where it has a gate).
 * gpt-oss adds a bias to the router's logits and to each expert's gate, up
 * and down outputs, and clamps its SwiGLU (ACT_SWIGLU_OAI).
 * The chosen experts' matmuls run together (matmul_multi): threads split
 * the rows of all of them at once, so a step with few tokens per expert
 * keeps every core busy and costs a few thread-pool passes, not a few per
 * expert. */
#ifndef CLLM_MODEL_MOE_H
#define CLLM_MODEL_MOE_H

#include "model/model.h"
#include "util/threadpool.h"

#include <stddef.h>
#include <stdint.h>

typedef struct moe_scratch moe_scratch;

/* g[n] = act(g) * u, with the family's activation (silu, GELU-tanh, or
 * gpt-oss's clamped SwiGLU): the dense FFN's and the experts' alike. */
void ffn_activation(const model_hparams *hp, float *g, const float *u, int n);

/* Buffers for batches of up to max_tokens tokens through m's expert
 * layers; NULL with err_get(). */
moe_scratch *moe_scratch_create(const model *m, int max_tokens);
void moe_scratch_free(moe_scratch *s);

/* Bytes of matmul scratch the layer's router and shared expert need for
 * max_tokens rows (the experts' matmuls have their own, in the scratch). */
size_t moe_matmul_scratch_size(const model_hparams *hp, const moe_weights *w, int max_tokens);

/* y[n][n_embd] = the layer's experts applied to x[n][n_embd]; n <= the
 * scratch's max_tokens. mm_scratch: moe_matmul_scratch_size bytes. */
void moe_ffn(threadpool *threads, const model_hparams *hp, const moe_weights *w, const float *x, int n, float *y,
             moe_scratch *s, void *mm_scratch);

/* Since the scratch was made: expert layers run (one per layer and batch)
 * and the distinct experts they read; 0 for NULL. */
void moe_counts(const moe_scratch *s, uint64_t *layer_steps, uint64_t *experts_read);

/* Bytes of every routed expert's matrices over all layers (what a token
 * reads n_expert_used / n_expert of), and the number of MoE layers. */
size_t moe_expert_bytes(const model *m, int *n_layers);

/* The router's choice for one token: probs[n_expert] holds its router
 * logits on entry (overwritten with their softmax or sigmoid); the
 * n_expert_used chosen experts (best first, ties to the lower index) and
 * their weights come out. select_bias (DeepSeek-V3's, or NULL) is added to
 * the scores that choose, not to the weights, and groups are then ranked by
 * the sum of their two best such scores (DeepSeek-V3's noaux_tc) rather
 * than by their best one (DeepSeek-V2's group_limited_greedy). */
void moe_route(const model_hparams *hp, float *probs, const float *select_bias, int32_t *experts, float *weights);

#endif
