/* Model families and their hyper-parameters. What differs between Llama,
 * Mistral, Qwen2/3, Gemma 2/3, Granite, SmolLM3 and OLMo 2 is data here (a
 * rope style, an activation, which norms exist and where, soft-caps, NoPE
 * layers, multipliers, the sliding-window pattern), read once at load time;
 * the forward pass has no per-family branches beyond these fields. */
#ifndef CLLM_MODEL_ARCH_H
#define CLLM_MODEL_ARCH_H

#include "kv/kv_cache.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gguf_ctx gguf_ctx;
typedef struct gguf_writer gguf_writer;

typedef enum { ROPE_NORM, ROPE_NEOX } rope_style; /* adjacent pairs / split halves */
/* SwiGLU, GELU-tanh-GLU, or gpt-oss's clamped SwiGLU: gate clamped to at most
 * swiglu_limit, up to +-swiglu_limit, out = gate * sigmoid(alpha * gate) *
 * (up + 1). */
typedef enum { ACT_SILU, ACT_GELU_TANH, ACT_SWIGLU_OAI } act_kind;
/* RMSNorm of q and k before rope: none, each head on its own (Qwen3, Gemma),
 * or the whole projection at once (OLMo 2: q_norm has n_head * head_dim
 * weights). */
typedef enum { QK_NORM_NONE, QK_NORM_HEAD, QK_NORM_ALL } qk_norm_kind;
/* How a mixture of experts' router turns logits into weights (llama.cpp's
 * expert_gating_func: 1 softmax, 2 sigmoid). */
typedef enum { GATING_SOFTMAX = 1, GATING_SIGMOID = 2 } expert_gating;

#define CLLM_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */

typedef struct {
    const char *name;       /* general.architecture */
    const char *family;     /* what `cllm info` calls it */
    rope_style rope;
    act_kind act;
    bool qkv_bias;          /* attn_{q,k,v}.bias present (Qwen2) */
    qk_norm_kind qk_norm;
    bool no_pre_norms;      /* no norm before attention and MLP (OLMo 2: only the post-norms) */
    bool post_norms;        /* norms after attention and MLP, before the residual add */
    bool embd_scale_sqrt;   /* embeddings times sqrt(n_embd) */
    int swa_pattern;        /* every n-th layer is global, the others sliding; 0: none */
    float rope_base_swa;    /* rope base of sliding layers when the file names none */
    int nope_period;        /* every n-th layer has no rope unless the file says otherwise (SmolLM3); 0: none */
    bool multipliers;       /* embedding, residual, attention and logit multipliers in the file (Granite) */
    bool softcaps;          /* attention and final logit soft-capping (Gemma 2) */
    bool longrope;          /* LongRoPE keys and factor tensors (Phi-3); q/k/v and gate/up fused in the file */
    bool window_all_layers; /* a sliding window in the file applies to every layer (Mistral via cllm quantize) */
    bool expert_norm;       /* MoE: the chosen experts' weights are renormalized to sum 1 unless the file says */
    bool biases;            /* attention output, router and expert biases, and attention sinks (gpt-oss) */
    const char *ffn_norm;   /* the MLP's input norm's tensor, when not ffn_norm.weight (gpt-oss:
                             * post_attention_norm.weight, which is then no post-norm) */
    bool mla;               /* multi-head latent attention (DeepSeek-V2, src/model/mla.c) */
} arch_traits;

#define CLLM_MAX_LAYERS 256
_Static_assert(CLLM_MAX_LAYERS <= KV_MAX_LAYERS, "the KV cache must hold every layer");

typedef struct {
    const arch_traits *traits;
    rope_style rope;        /* the family's, unless the file's layout differs (HF Llama: NEOX) */
    int n_vocab;
    int n_ctx_train;
    int n_embd;
    int n_layer;
    int n_ff;
    int n_head;
    int n_head_kv;
    int head_dim_k;
    int head_dim_v;
    int rope_dim;           /* leading dims of each head that are rotated */
    float norm_eps;
    float rope_base;        /* global layers */
    float rope_base_swa;    /* sliding layers */
    float rope_pos_scale;   /* linear rope scaling: position multiplier (1/factor) */
    float rope_attn_factor; /* LongRoPE: cos and sin times this (1: none) */
    int rope_orig_ctx;      /* LongRoPE: its long factors serve contexts past this (0: no LongRoPE) */
    /* YaRN (rope_yarn.c): the frequencies below the correction range are
     * divided by yarn_factor, those above it kept, a linear ramp between;
     * the range comes from beta_fast and beta_slow rotations over
     * yarn_orig_ctx positions, rounded outwards when yarn_truncate (as
     * llama.cpp always does). The attention factor goes to rope_attn_factor. */
    float rope_yarn_factor; /* 0: no YaRN */
    int rope_yarn_orig_ctx;
    float rope_yarn_beta_fast, rope_yarn_beta_slow;
    bool rope_yarn_truncate;
    float attn_scale;       /* multiplier of q.k */
    float embd_scale;
    float residual_scale;   /* multiplier of each layer's attention and MLP output (Granite) */
    float logit_scale;      /* multiplier of the logits (Granite: 1 / logits_scaling) */
    float attn_softcap;     /* scores become cap * tanh(score / cap) (Gemma 2); 0: none */
    float final_softcap;    /* the same for the logits; 0: none */
    int n_swa;              /* sliding window in tokens; 0 when no layer slides */
    bool is_swa[CLLM_MAX_LAYERS];
    bool no_rope[CLLM_MAX_LAYERS]; /* NoPE layers: q and k are not rotated (SmolLM3) */
    /* Mixture of experts (src/model/moe.c): a layer whose file has a router
     * (ffn_gate_inp) sends each token through n_expert_used of n_expert
     * experts of n_ff_exp hidden units, weighted by the router (and through
     * the shared expert of n_ff_shexp units where there is one); n_ff is the
     * width of the dense layers. n_expert 0: every layer is dense. */
    int n_expert;
    int n_expert_used;
    int n_ff_exp;
    int n_ff_shexp;
    expert_gating gating;
    bool expert_norm;       /* the chosen weights are divided by their sum */
    float expert_scale;     /* then multiplied by this (1: none) */
    bool dense_ffn[CLLM_MAX_LAYERS]; /* a Hugging Face MoE's dense layers (mlp_only_layers, decoder_sparse_step) */
    float swiglu_alpha, swiglu_limit; /* ACT_SWIGLU_OAI's */
    /* Group-limited routing (DeepSeek-V2): the experts form n_expert_groups
     * groups; a token's experts come from its n_group_used groups with the
     * best expert. 0: no groups. */
    int n_expert_groups, n_group_used;
    /* Multi-head latent attention (DeepSeek-V2; mla.c). Keys and values are
     * one shared latent of mla_kv_rank dims (plus rope_dim rotated key dims):
     * the cache holds one kv head with head_dim_k = mla_kv_rank + rope_dim
     * and head_dim_v = mla_kv_rank. Each query head has mla_nope_dim + rope_dim
     * dims and each value head mla_v_dim; 0 when the family has no MLA. */
    int mla_kv_rank, mla_q_rank, mla_nope_dim, mla_v_dim;
    float rope_yarn_log_mul; /* YaRN's 0.1 x mscale_all_dim (DeepSeek): q.k times (1 + this ln factor)^2 */
} model_hparams;

#define HPARAMS_MAX_CTX (1 << 24) /* tokens; far above any trained context */

const arch_traits *arch_find(const char *name);
/* "llama, qwen2, ...": the supported GGUF architectures, for messages. */
void arch_names(char *buf, size_t cap);
/* What the family computes beyond a plain Llama layer, for `cllm info`:
 * "q/k norm per head, post-norms, ...", or "plain" when nothing. */
void arch_describe(const model_hparams *hp, char *buf, size_t cap);
/* The YaRN frequency factors (rope_dim / 2 of them) that divide rope's
 * angles, as rope_freqs.weight does: 1 / (ramp / factor + 1 - ramp). */
void rope_yarn_factors(const model_hparams *hp, float *out);
/* YaRN's attention factor for a scaling factor s: 1 + 0.1 ln s (1 for s <= 1). */
float rope_yarn_mscale(float s);
/* Latent attention's q.k scale: 1 / sqrt(nope + rope dims) times the square
 * of YaRN's yarn_attn x (1 + rope_yarn_log_mul ln factor), as DeepSeek's
 * reference (and llama.cpp) scale it. */
float mla_attn_scale(const model_hparams *hp, float yarn_attn);
/* Whether sliding layers rotate with a rope of their own (Gemma 3: their
 * base, unscaled); elsewhere they rotate as the other layers do. */
static inline bool hparams_swa_own_rope(const model_hparams *hp) {
    return hp->n_swa > 0 && hp->traits && hp->traits->rope_base_swa > 0;
}
/* Marks every period-th layer (the 4th, 8th, ...) as NoPE; 0: none. */
void hparams_nope_period(model_hparams *hp, int period);
/* Refuses hyper-parameters the forward pass cannot compute with: a norm
 * epsilon, rope base, rope scale or attention scale that is not finite or
 * not positive (or absurdly large), a context or window past
 * HPARAMS_MAX_CTX. Returns 0, or -1 with err_get() naming the value. Both
 * loaders (GGUF, Hugging Face config) end with it. */
int hparams_check(const model_hparams *hp);
/* Reads {arch}.* keys. n_vocab comes from the token embedding, set by the loader. */
int hparams_from_gguf(const gguf_ctx *g, model_hparams *hp);
/* GGUF metadata "{arch}.{suffix}": a required unsigned integer in [lo, hi],
 * an optional one (absent: *out unchanged), an optional finite float. 0, or
 * -1 with err_get() naming the key. */
int meta_need_u32(const gguf_ctx *g, const char *arch, const char *suffix, int *out, int lo, int hi);
int meta_opt_u32(const gguf_ctx *g, const char *arch, const char *suffix, int *out, int lo, int hi);
int meta_opt_f32(const gguf_ctx *g, const char *arch, const char *suffix, float *out);
/* Writes general.architecture and the {arch}.* keys that read back (with
 * hparams_from_gguf) as hp; the rope style is the family's, so rows laid out
 * for another style must be permuted by the caller (arch_write.c). */
int hparams_to_gguf(const model_hparams *hp, gguf_writer *w);
/* What the KV cache needs of the model: layers, heads, dims and each layer's
 * window. */
void model_kv_spec(const model_hparams *hp, kv_spec *spec);

#endif
