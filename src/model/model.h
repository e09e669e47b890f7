/* A loaded model: hyper-parameters, weights (views into the memory-mapped
 * file, or buffers converted at load time), tokenizer and chat template.
 * Built by model_load from a GGUF file or a Hugging Face model folder,
 * released by model_free. Immutable after loading, so many engines and
 * threads may share it. */
#ifndef CLLM_MODEL_MODEL_H
#define CLLM_MODEL_MODEL_H

#include "kernels/matmul.h"
#include "model/arch.h"
#include "model/tensors.h"

#include <stddef.h>

typedef struct gguf_ctx gguf_ctx;
typedef struct hf_source hf_source;
typedef struct tokenizer tokenizer;

/* A mixture-of-experts FFN (model/moe.h): the router, each expert's gate,
 * up and down matrices as views into the file's merged [n_expert] tensors
 * (or its per-expert ones), and the shared expert where the family has one. */
typedef struct {
    weight router;             /* ffn_gate_inp: n_expert rows of n_embd */
    weight *gate, *up, *down;  /* [n_expert] each, owned by the tensor table */
    weight sh_gate, sh_up, sh_down; /* the shared expert; data NULL when none */
    const float *sh_router;    /* ffn_gate_inp_shexp [n_embd]: sigmoid(router . x) weighs it; NULL: weight 1 */
    /* gpt-oss's biases, NULL elsewhere: the router's [n_expert], and each
     * expert's gate and up [n_expert][n_ff_exp] and down [n_expert][n_embd]. */
    const float *router_bias, *gate_bias, *up_bias, *down_bias;
    /* DeepSeek-V3's e_score_correction_bias (exp_probs_b) [n_expert], NULL
     * elsewhere: added to the scores that choose the experts, not to their weights. */
    const float *select_bias;
} moe_weights;

/* Multi-head latent attention's matrices (DeepSeek-V2, model/mla.h); the
 * query comes from wq, or from q_a, its norm and q_b (low-rank q). */
typedef struct {
    weight q_a, q_b;          /* attn_q_a, attn_q_b; data NULL without low-rank q */
    const float *q_a_norm;
    weight kv_a;              /* attn_kv_a_mqa: the latent and the rope key */
    const float *kv_a_norm;   /* of the latent */
    weight *k_b, *v_b;        /* [n_head] each: latent from a head's nope query dims, value dims from the latent */
} mla_weights;

typedef struct {
    const float *attn_norm;
    weight wq, wk, wv, wo;
    mla_weights mla;            /* latent attention (mla.kv_a.data != NULL) in place of wk, wv */
    const float *bq, *bk, *bv;  /* NULL unless the family has biases */
    const float *bo;            /* the output projection's bias (gpt-oss), or NULL */
    const float *sinks;         /* [n_head] attention sink logits (gpt-oss), or NULL */
    const float *q_norm, *k_norm;
    const float *post_attn_norm;
    const float *ffn_norm;
    weight w_gate, w_up, w_down; /* a dense FFN, or */
    moe_weights moe;             /* experts (moe.gate != NULL) */
    const float *post_ffn_norm;
} layer_weights;

typedef struct {
    weight tok_embd;
    const float *output_norm;
    weight output;               /* the token embedding when the output is tied */
    const float *rope_freqs;     /* Llama 3 frequency factors [rope_dim/2] or NULL */
    const float *rope_long, *rope_short; /* LongRoPE's factors [rope_dim/2] (Phi-3), or NULL */
    layer_weights layers[CLLM_MAX_LAYERS];
} model_weights;

struct fwd_batch;

/* Tensor parallelism: this process holds shard `rank` of `size` of the
 * attention heads and FFN columns (model/shard.h). The hooks are set by the
 * layer that talks to the other ranks (src/parallel) and are NULL while
 * size is 1. */
typedef struct {
    int rank, size;
    /* Sums x[n] over the ranks in place: forward.c calls it after the
     * attention output and the FFN down projections. */
    void (*allreduce)(void *user, float *x, size_t n);
    /* Rank 0 only: called before each forward over kv, so the other ranks
     * run the same batch, and before each copy of a KV block (copy on write),
     * so theirs copy too. long_rope: the forward rotates with LongRoPE's
     * long factors (model_rope_factors for its context), so theirs do too. */
    void (*on_forward)(void *user, const kv_cache *kv, const struct fwd_batch *b, bool long_rope);
    void (*on_kv_copy)(void *user, const kv_cache *kv, int src, int dst);
    void *user;
} model_tp;

typedef struct model {
    char *path;
    char *name;
    gguf_ctx *gguf;        /* a GGUF file, or */
    hf_source *hf;         /* a Hugging Face folder */
    tensor_table tensors;  /* every tensor, under llama.cpp's names */
    model_hparams hp;
    kv_spec kv;            /* what the KV cache needs of hp (model_kv_spec) */
    model_weights w;
    tokenizer *tok;
    char *chat_template;  /* NULL when the file has none */
    bool tied_output;
    size_t weight_bytes;  /* bytes of all tensors in the table */
    size_t repacked_bytes; /* of those, bytes also held in the x8 layout (weight_repack) */
    int64_t n_params;
    model_tp tp;          /* rank 0 of 1 unless loaded with model_load_shard */
} model;

/* A GGUF file, or a directory holding a Hugging Face model (config.json,
 * *.safetensors, tokenizer.json), ready for inference: the matrices whose
 * type has a faster layout for the active kernels are repacked into it
 * (weight_repack; same results, unless CLLM_NO_REPACK is set to anything but
 * 0). NULL with err_get() saying why. */
model *model_load(const char *path);
/* Shard `rank` of `size` of the model for tensor parallelism
 * (model/shard.h): hp and kv describe the shard. size 1 is model_load. */
model *model_load_shard(const char *path, int rank, int size);
/* The same with every weight as the file stores it: for tools that read or
 * replace the weights (cllm quantize, cllm info). */
model *model_load_as_stored(const char *path);
/* Bytes of the matrices model_load repacks (or would repack, for a model
 * loaded as stored) with the active kernels. */
size_t model_repack_bytes(const model *m);
/* The rope frequency factors that divide the angles, for sequences of up to
 * n_ctx tokens (0: the trained context): LongRoPE's long factors when n_ctx
 * is past its original context and its short ones within it (llama.cpp
 * chooses by the context too; transformers by the sequence it is given,
 * which for a single sequence is the same), Llama 3's factors, or NULL. */
const float *model_rope_factors(const model *m, int n_ctx);
void model_free(model *m);

#endif
