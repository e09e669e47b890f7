/* One forward pass over a flat batch of tokens from many sequences. Each token
 * carries its position and sequence; each sequence brings its KV block tables
 * (one per layer group). The K and V of every token are written into the paged
 * cache, then every token attends to its sequence's cached positions, so a
 * batch may mix prompt chunks and single decode tokens freely. Logits are
 * computed only for the rows the caller asks for. */
#ifndef CLLM_MODEL_FORWARD_H
#define CLLM_MODEL_FORWARD_H

#include "kv/kv_cache.h"
#include "model/model.h"
#include "util/threadpool.h"

typedef struct {
    /* Logical block i of the sequence lives in physical block block_table[g][i]
     * of group g. Sliding groups may hold -1 for blocks that left the window. */
    const int32_t *block_table[KV_MAX_GROUPS];
    /* When set (H2O eviction), the attention each KV position receives from
     * this step's queries, summed over layers and heads, is added here, in
     * ATTN_MASS_ONE units (kernels/attention.h): the same sums whatever the
     * batch, chunking or threads. */
    int64_t *attn_acc;
    /* Where the sequence's draft tree starts (fwd_batch.tree): its nodes sit
     * at KV positions tree_base .. tree_base + ATTN_TREE_MAX - 1. */
    int tree_base;
} fwd_seq;

typedef struct fwd_batch {
    int n_tokens;
    const int32_t *tokens;  /* [n_tokens] */
    const int32_t *pos;     /* [n_tokens] position within its sequence */
    const int32_t *seq;     /* [n_tokens] index into seqs */
    int n_seqs;
    const fwd_seq *seqs;
    int n_out;
    const int32_t *out_rows; /* [n_out] token rows whose logits are wanted */
    /* Speculative decoding over a tree of drafts (Medusa): NULL, or
     * [n_tokens] ancestry masks. A token with tree[t] != 0 is a node of its
     * sequence's tree, written at KV position pos[t]; it sees the keys below
     * its sequence's tree_base and, from there on, only the nodes whose bit
     * (key - tree_base) is set: its ancestors and itself. tree[t] == 0: an
     * ordinary token. */
    const uint32_t *tree;
    /* NULL, or [n_tokens]: the position each token is rotated at and its
     * sliding window counted from, where that is not its KV position pos[t]
     * (a tree node: tree_base + its depth). */
    const int32_t *rope_pos;
} fwd_batch;

typedef struct forward_ctx forward_ctx;

/* Scratch for batches of up to max_tokens tokens and max_out logit rows. */
forward_ctx *forward_create(const model *m, kv_cache *kv, int max_tokens, int max_out, threadpool *threads);
void forward_free(forward_ctx *f);

/* The rope factors forward_run uses (model_rope_factors; forward_create
 * takes the trained context's). */
void forward_set_rope_factors(forward_ctx *f, const float *factors);

/* A mixture of experts' counts over every forward_run so far (moe_counts);
 * 0 for a dense model. */
void forward_moe_counts(const forward_ctx *f, uint64_t *layer_steps, uint64_t *experts_read);

/* Writes logits [n_out][n_vocab]. Returns 0, or -1 with err_get(). */
int forward_run(forward_ctx *f, const fwd_batch *b, float *logits);
/* Logits [n_rows][n_vocab] of more token rows of the last forward_run's batch
 * (n_rows <= max_out per call; the batch's hidden states stay until the next
 * run): how every position of a prompt chunk gets its logits without a
 * [n_tokens][n_vocab] buffer. Returns 0, or -1 with err_get(). */
int forward_logits(forward_ctx *f, const int32_t *rows, int n_rows, float *logits);
/* The last hidden states of token rows of the last forward_run's batch,
 * after the final norm (what the output head multiplies; what Medusa heads
 * read): out [n_rows][n_embd]. Returns 0, or -1 with err_get(). */
int forward_hidden(forward_ctx *f, const int32_t *rows, int n_rows, float *out);

/* ---- hooks for offline tools (quantization calibration, src/quant) ---- */

/* The four distinct inputs of a layer's linear maps. */
typedef enum {
    FWD_IN_QKV,    /* attention norm output: input of q, k, v  [n_embd] */
    FWD_IN_O,      /* attention output: input of the output projection  [n_head * head_dim_v] */
    FWD_IN_UPGATE, /* FFN norm output: input of gate and up  [n_embd] */
    FWD_IN_DOWN,   /* act(gate) * up: input of down  [n_ff] */
} fwd_linear_input;

typedef struct {
    /* When set, called with each linear input before its matmul:
     * x is [n_tokens][n_in]. */
    void (*linear_input)(void *user, int layer, fwd_linear_input which, const float *x, int n_tokens, int n_in);
    void *user;
    /* Run layers first_layer..last_layer only (last_layer < 0: to the end). */
    int first_layer, last_layer;
    /* The residual stream [n_tokens][n_embd] entering first_layer; NULL: the
     * token embeddings. */
    const float *x_in;
    /* When set, the residual stream after last_layer is copied here and the
     * pass ends there (no logits). */
    float *x_out;
} fwd_hooks;

/* Installs hooks (NULL removes them); h must stay valid while installed. */
void forward_set_hooks(forward_ctx *f, const fwd_hooks *h);

#endif
