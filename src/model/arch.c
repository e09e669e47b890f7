/* The table of supported model families and the reading of their GGUF
 * hyper-parameters. Conventions follow llama.cpp's GGUF files: Llama/Mistral
 * q/k weights are permuted for adjacent-pair rope; Gemma's norm weights already
 * hold HF's (1 + w). */
#include "model/arch.h"

#include "format/gguf.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const arch_traits k_archs[] = {
    /* Llama 2/3 and Mistral (GGUF calls Mistral "llama"). */
    /* Mixtral is "llama" with experts: llama.cpp always renormalizes its two chosen experts' weights. */
    {.name = "llama", .family = "Llama / Mistral / Mixtral", .rope = ROPE_NORM, .act = ACT_SILU,
     .window_all_layers = true, .expert_norm = true},
    {.name = "qwen2", .family = "Qwen2", .rope = ROPE_NEOX, .act = ACT_SILU, .qkv_bias = true},
    {.name = "qwen3", .family = "Qwen3", .rope = ROPE_NEOX, .act = ACT_SILU, .qk_norm = QK_NORM_HEAD},
    {.name = "gemma2", .family = "Gemma 2", .rope = ROPE_NEOX, .act = ACT_GELU_TANH, .post_norms = true,
     .embd_scale_sqrt = true, .swa_pattern = 2, .softcaps = true},
    {.name = "gemma3", .family = "Gemma 3", .rope = ROPE_NEOX, .act = ACT_GELU_TANH, .qk_norm = QK_NORM_HEAD,
     .post_norms = true, .embd_scale_sqrt = true, .swa_pattern = 6, .rope_base_swa = 10000.0f},
    {.name = "granite", .family = "Granite", .rope = ROPE_NORM, .act = ACT_SILU, .multipliers = true},
    {.name = "smollm3", .family = "SmolLM3", .rope = ROPE_NORM, .act = ACT_SILU, .nope_period = 4},
    {.name = "olmo2", .family = "OLMo 2", .rope = ROPE_NEOX, .act = ACT_SILU, .qk_norm = QK_NORM_ALL,
     .no_pre_norms = true, .post_norms = true},
    /* Phi-3's sliding window is in its files, but llama.cpp attends to every position: so does cllm on GGUF. */
    {.name = "phi3", .family = "Phi-3 / Phi-4-mini", .rope = ROPE_NEOX, .act = ACT_SILU, .longrope = true},
    /* Mixtures of experts; whether the chosen weights are renormalized is llama.cpp's choice per family. */
    {.name = "qwen2moe", .family = "Qwen2-MoE", .rope = ROPE_NEOX, .act = ACT_SILU, .qkv_bias = true},
    {.name = "qwen3moe", .family = "Qwen3-MoE", .rope = ROPE_NEOX, .act = ACT_SILU, .qk_norm = QK_NORM_HEAD,
     .expert_norm = true},
    {.name = "olmoe", .family = "OLMoE", .rope = ROPE_NEOX, .act = ACT_SILU, .qk_norm = QK_NORM_ALL},
    /* gpt-oss: q/k/v/o, router and expert biases, attention sinks, every other layer sliding (the first
     * one), clamped SwiGLU experts, softmax over the chosen experts' logits (= renormalized softmax), YaRN;
     * llama.cpp names its MLP input norm post_attention_norm. */
    /* DeepSeek-V2 (and -Lite): multi-head latent attention, shared experts, group-limited routing. */
    {.name = "deepseek2", .family = "DeepSeek-V2", .rope = ROPE_NORM, .act = ACT_SILU, .mla = true},
    {.name = "gpt-oss", .family = "gpt-oss", .rope = ROPE_NEOX, .act = ACT_SWIGLU_OAI, .qkv_bias = true,
     .swa_pattern = 2, .expert_norm = true, .biases = true, .ffn_norm = "post_attention_norm.weight"},
};

#define N_ARCHS (sizeof k_archs / sizeof k_archs[0])

const arch_traits *arch_find(const char *name) {
    for (size_t i = 0; i < N_ARCHS; i++)
        if (!strcmp(k_archs[i].name, name)) return &k_archs[i];
    return NULL;
}

void arch_names(char *buf, size_t cap) {
    buf[0] = 0;
    for (size_t i = 0, n = 0; i < N_ARCHS && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", k_archs[i].name);
}

void arch_describe(const model_hparams *hp, char *buf, size_t cap) {
    const arch_traits *tr = hp->traits;
    size_t n = 0;
    buf[0] = 0;
#define PUT(...) (n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__))
#define SEP (n ? ", " : "")
    if (tr->qkv_bias) PUT("%sq/k/v bias", SEP);
    if (tr->qk_norm == QK_NORM_HEAD) PUT("%sq/k norm per head", SEP);
    if (tr->qk_norm == QK_NORM_ALL) PUT("%sq/k norm over the whole projection", SEP);
    if (tr->no_pre_norms) PUT("%sno pre-norms", SEP);
    if (tr->post_norms) PUT("%spost-norms", SEP);
    if (hp->embd_scale != 1.0f) PUT("%sembedding x %g", SEP, (double)hp->embd_scale);
    if (hp->residual_scale != 1.0f) PUT("%sresidual x %g", SEP, (double)hp->residual_scale);
    if (hp->logit_scale != 1.0f) PUT("%slogits x %g", SEP, (double)hp->logit_scale);
    if (hp->attn_softcap > 0) PUT("%sattention soft-cap %g", SEP, (double)hp->attn_softcap);
    if (hp->final_softcap > 0) PUT("%slogit soft-cap %g", SEP, (double)hp->final_softcap);
    int nope = 0;
    for (int il = 0; il < hp->n_layer; il++) nope += hp->no_rope[il];
    if (nope) PUT("%sno rope on %d of %d layers", SEP, nope, hp->n_layer);
    if (hp->rope_orig_ctx > 0) PUT("%sLongRoPE past %d tokens", SEP, hp->rope_orig_ctx);
    if (hp->rope_yarn_factor > 0)
        PUT("%sYaRN x %g past %d tokens", SEP, (double)hp->rope_yarn_factor, hp->rope_yarn_orig_ctx);
    if (tr->biases) PUT("%sattention sinks, output and expert biases", SEP);
    if (hp->mla_kv_rank > 0)
        PUT("%slatent attention (a %d-dim latent and %d rope dims cached%s)", SEP, hp->mla_kv_rank, hp->rope_dim,
            hp->mla_q_rank ? ", low-rank q" : "");
    if (hp->rope_dim < hp->head_dim_k) PUT("%srope on %d of %d dims", SEP, hp->rope_dim, hp->head_dim_k);
    if (tr->act == ACT_SWIGLU_OAI)
        PUT("%sclamped SwiGLU MLP (alpha %g, limit %g)", SEP, (double)hp->swiglu_alpha, (double)hp->swiglu_limit);
    else PUT("%s%s", SEP, tr->act == ACT_GELU_TANH ? "GELU (tanh) MLP" : "SiLU MLP");
    if (hp->n_expert > 0) {
        PUT("%s%d of %d experts (%s%s", SEP, hp->n_expert_used, hp->n_expert,
            hp->gating == GATING_SIGMOID ? "sigmoid" : "softmax", hp->expert_norm ? ", renormalized" : "");
        if (hp->expert_scale != 1.0f) PUT(", x %g", (double)hp->expert_scale);
        PUT(")");
        if (hp->n_expert_groups > 1) PUT(", from %d of %d groups", hp->n_group_used, hp->n_expert_groups);
        if (hp->n_ff_shexp > 0) PUT(", a shared expert");
    }
#undef SEP
#undef PUT
}

float mla_attn_scale(const model_hparams *hp, float yarn_attn) {
    float m = yarn_attn;
    if (hp->rope_yarn_factor > 1 && hp->rope_yarn_log_mul > 0) m *= 1.0f + hp->rope_yarn_log_mul * logf(hp->rope_yarn_factor);
    return m * m / sqrtf((float)(hp->mla_nope_dim + hp->rope_dim));
}

void hparams_nope_period(model_hparams *hp, int period) {
    for (int il = 0; il < hp->n_layer; il++) hp->no_rope[il] = period > 0 && (il + 1) % period == 0;
}

int meta_need_u32(const gguf_ctx *g, const char *arch, const char *suffix, int *out, int lo, int hi) {
    char key[128];
    uint32_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!gguf_get_u32(g, key, &v)) {
        if (gguf_find(g, key)) return err_set("metadata '%s' is not an unsigned integer", key);
        return err_set("missing required metadata key '%s'", key);
    }
    if ((int64_t)v < lo || (int64_t)v > hi)
        return err_set("metadata '%s' = %u is out of range [%d, %d]", key, v, lo, hi);
    *out = (int)v;
    return 0;
}

int meta_opt_u32(const gguf_ctx *g, const char *arch, const char *suffix, int *out, int lo, int hi) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!gguf_find(g, key)) return 0;
    return meta_need_u32(g, arch, suffix, out, lo, hi);
}

int meta_opt_f32(const gguf_ctx *g, const char *arch, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!gguf_find(g, key)) return 0;
    if (!gguf_get_f32(g, key, out) || !isfinite(*out)) return err_set("metadata '%s' is not a finite number", key);
    return 0;
}

/* {arch}.expert_* keys as llama.cpp reads them: an expert's width from
 * expert_feed_forward_length, else feed_forward_length (Mixtral, OLMoE). */
static int experts_from_gguf(const gguf_ctx *g, const char *arch, model_hparams *hp) {
    hp->expert_scale = 1.0f;
    hp->gating = GATING_SOFTMAX;
    if (meta_opt_u32(g, arch, "expert_count", &hp->n_expert, 0, CLLM_MAX_EXPERTS)) return -1;
    if (hp->n_expert == 0) return 0;
    int gating = GATING_SOFTMAX;
    hp->n_ff_exp = hp->n_ff;
    if (meta_need_u32(g, arch, "expert_used_count", &hp->n_expert_used, 1, hp->n_expert) ||
        meta_opt_u32(g, arch, "expert_feed_forward_length", &hp->n_ff_exp, 1, 1 << 20) ||
        meta_opt_u32(g, arch, "expert_shared_feed_forward_length", &hp->n_ff_shexp, 0, 1 << 20) ||
        meta_opt_f32(g, arch, "expert_weights_scale", &hp->expert_scale) ||
        meta_opt_u32(g, arch, "expert_gating_func", &gating, 0, 2))
        return -1;
    int n_shared = 0;
    if (meta_opt_u32(g, arch, "expert_shared_count", &n_shared, 0, 64) ||
        meta_opt_u32(g, arch, "expert_group_count", &hp->n_expert_groups, 0, hp->n_expert) ||
        meta_opt_u32(g, arch, "expert_group_used_count", &hp->n_group_used, 0, hp->n_expert))
        return -1;
    /* DeepSeek names a count of shared experts of the experts' width, not a width. */
    if (n_shared > 0 && hp->n_ff_shexp == 0) hp->n_ff_shexp = n_shared * hp->n_ff_exp;
    if (gating == 0) gating = GATING_SOFTMAX; /* llama.cpp: none given is softmax */
    hp->gating = (expert_gating)gating;
    if (hp->expert_scale == 0.0f) hp->expert_scale = 1.0f; /* llama.cpp: 0 is no scaling */
    hp->expert_norm = hp->traits->expert_norm;
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    if (gguf_find(g, key) && !gguf_get_bool(g, key, &hp->expert_norm))
        return err_set("metadata '%s' is not a boolean", key);
    return 0;
}

/* YaRN as llama.cpp reads it: the correction range always rounded
 * outwards, the attention factor yarn_attn_factor x (1 + 0.1 ln factor). */
static int yarn_from_gguf(const gguf_ctx *g, const char *arch, float factor, model_hparams *hp) {
    float attn = 1.0f, ext = 1.0f;
    hp->rope_yarn_factor = factor;
    hp->rope_yarn_orig_ctx = hp->n_ctx_train;
    hp->rope_yarn_beta_fast = 32.0f, hp->rope_yarn_beta_slow = 1.0f;
    hp->rope_yarn_truncate = true;
    if (meta_opt_u32(g, arch, "rope.scaling.original_context_length", &hp->rope_yarn_orig_ctx, 1, HPARAMS_MAX_CTX) ||
        meta_opt_f32(g, arch, "rope.scaling.yarn_beta_fast", &hp->rope_yarn_beta_fast) ||
        meta_opt_f32(g, arch, "rope.scaling.yarn_beta_slow", &hp->rope_yarn_beta_slow) ||
        meta_opt_f32(g, arch, "rope.scaling.yarn_attn_factor", &attn) ||
        meta_opt_f32(g, arch, "rope.scaling.yarn_ext_factor", &ext))
        return -1;
    /* cllm's own key, written for checkpoints that do not round (gpt-oss's config says truncate: false). */
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.yarn_truncate", arch);
    if (gguf_find(g, key) && !gguf_get_bool(g, key, &hp->rope_yarn_truncate))
        return err_set("metadata '%s' is not a boolean", key);
    if (!(factor >= 1.0f)) return err_set("YaRN rope.scaling.factor %g must be at least 1", (double)factor);
    if (ext != 1.0f) return err_set("YaRN rope.scaling.yarn_ext_factor %g is not supported (1)", (double)ext);
    hp->rope_attn_factor = attn * rope_yarn_mscale(factor);
    return 0;
}

/* DeepSeek-V2's latent attention as llama.cpp's converter writes it:
 * key_length / value_length are the cached latent's (kv_lora_rank + rope
 * dims, kv_lora_rank), key_length_mla / value_length_mla a head's; YaRN's
 * attention factor moves into the q.k scale (the rope then scales by 1). */
static int mla_from_gguf(const gguf_ctx *g, const char *arch, model_hparams *hp) {
    int k_head = 0;
    if (meta_need_u32(g, arch, "attention.kv_lora_rank", &hp->mla_kv_rank, 1, 4096) ||
        meta_opt_u32(g, arch, "attention.q_lora_rank", &hp->mla_q_rank, 0, 1 << 16) ||
        meta_need_u32(g, arch, "attention.key_length_mla", &k_head, hp->rope_dim + 1, 4096) ||
        meta_need_u32(g, arch, "attention.value_length_mla", &hp->mla_v_dim, 1, 4096) ||
        meta_opt_f32(g, arch, "rope.scaling.yarn_log_multiplier", &hp->rope_yarn_log_mul))
        return -1;
    if (hp->n_head_kv != 1 || hp->head_dim_k != hp->mla_kv_rank + hp->rope_dim || hp->head_dim_v != hp->mla_kv_rank)
        return err_set("latent attention needs head_count_kv 1, key_length kv_lora_rank + rope dims (%d) and "
                       "value_length kv_lora_rank (%d); the file has %d, %d and %d", hp->mla_kv_rank + hp->rope_dim,
                       hp->mla_kv_rank, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v);
    hp->mla_nope_dim = k_head - hp->rope_dim;
    float yarn_attn = hp->rope_yarn_factor > 0 ? hp->rope_attn_factor / rope_yarn_mscale(hp->rope_yarn_factor) : 1;
    hp->attn_scale = mla_attn_scale(hp, yarn_attn);
    if (hp->rope_yarn_factor > 0) hp->rope_attn_factor = 1.0f;
    return 0;
}

int hparams_from_gguf(const gguf_ctx *g, model_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    gguf_str arch_s;
    if (!gguf_get_str(g, "general.architecture", &arch_s))
        return err_set("missing required metadata key 'general.architecture'");
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(arch_s.len < 60 ? arch_s.len : 60), arch_s.ptr);
    hp->traits = arch_find(arch);
    if (!hp->traits) {
        char names[256];
        arch_names(names, sizeof names);
        return err_set("unknown architecture '%s' (supported: %s)", arch, names);
    }
    hp->rope = hp->traits->rope;

    if (meta_need_u32(g, arch, "block_count", &hp->n_layer, 1, CLLM_MAX_LAYERS) ||
        meta_need_u32(g, arch, "embedding_length", &hp->n_embd, 1, 1 << 16) ||
        meta_need_u32(g, arch, "feed_forward_length", &hp->n_ff, 1, 1 << 20) ||
        meta_need_u32(g, arch, "attention.head_count", &hp->n_head, 1, 1024) ||
        meta_need_u32(g, arch, "context_length", &hp->n_ctx_train, 1, HPARAMS_MAX_CTX))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (meta_opt_u32(g, arch, "attention.head_count_kv", &hp->n_head_kv, 1, hp->n_head)) return -1;
    if (hp->n_head % hp->n_head_kv)
        return err_set("attention.head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                       hp->n_head_kv);
    hp->head_dim_k = hp->n_embd / hp->n_head;
    if (meta_opt_u32(g, arch, "attention.key_length", &hp->head_dim_k, 1, 4096)) return -1;
    hp->head_dim_v = hp->head_dim_k;
    if (meta_opt_u32(g, arch, "attention.value_length", &hp->head_dim_v, 1, 4096)) return -1;
    if (hp->head_dim_k % 2) return err_set("head dimension %d is odd; rope needs pairs", hp->head_dim_k);
    hp->rope_dim = hp->head_dim_k;
    if (meta_opt_u32(g, arch, "rope.dimension_count", &hp->rope_dim, 2, hp->head_dim_k)) return -1;
    if (hp->rope_dim % 2) return err_set("rope.dimension_count %d is odd", hp->rope_dim);

    hp->norm_eps = 1e-5f;
    if (meta_opt_f32(g, arch, "attention.layer_norm_rms_epsilon", &hp->norm_eps)) return -1;
    hp->rope_base = 10000.0f;
    if (meta_opt_f32(g, arch, "rope.freq_base", &hp->rope_base)) return -1;
    hp->rope_base_swa = hp->traits->rope_base_swa > 0 ? hp->traits->rope_base_swa : hp->rope_base;
    if (meta_opt_f32(g, arch, "rope.freq_base_swa", &hp->rope_base_swa)) return -1;
    if (hp->rope_base <= 0 || hp->rope_base_swa <= 0) return err_set("rope.freq_base must be positive");

    hp->rope_pos_scale = hp->rope_attn_factor = 1.0f;
    if (hp->traits->longrope &&
        (meta_opt_u32(g, arch, "rope.scaling.original_context_length", &hp->rope_orig_ctx, 1, HPARAMS_MAX_CTX) ||
         meta_opt_f32(g, arch, "rope.scaling.attn_factor", &hp->rope_attn_factor)))
        return -1;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gguf_str scaling;
    if (gguf_get_str(g, key, &scaling) && !gguf_str_eq(scaling, "none")) {
        float factor = 1.0f;
        if (meta_opt_f32(g, arch, "rope.scaling.factor", &factor)) return -1;
        if (gguf_str_eq(scaling, "linear")) {
            if (factor <= 0) return err_set("rope.scaling.factor must be positive");
            hp->rope_pos_scale = 1.0f / factor;
        } else if (gguf_str_eq(scaling, "yarn")) {
            if (yarn_from_gguf(g, arch, factor, hp)) return -1;
        } else {
            return err_set("unsupported rope scaling type '%.*s' (supported: none, linear, yarn)",
                           (int)scaling.len, scaling.ptr);
        }
    }

    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    if (meta_opt_f32(g, arch, "attention.scale", &hp->attn_scale)) return -1;
    if (!(hp->attn_scale > 0)) return err_set("%s.attention.scale must be positive", arch);
    hp->embd_scale = hp->traits->embd_scale_sqrt ? sqrtf((float)hp->n_embd) : 1.0f;
    hp->residual_scale = hp->logit_scale = 1.0f;
    if (hp->traits->multipliers) {
        /* Granite: llama.cpp divides the logits by logit_scale. */
        float logit_div = 1.0f;
        if (meta_opt_f32(g, arch, "embedding_scale", &hp->embd_scale) ||
            meta_opt_f32(g, arch, "residual_scale", &hp->residual_scale) ||
            meta_opt_f32(g, arch, "logit_scale", &logit_div))
            return -1;
        if (!(logit_div > 0)) return err_set("%s.logit_scale must be positive", arch);
        hp->logit_scale = 1.0f / logit_div;
    }
    if (hp->traits->softcaps) {
        /* Gemma 2's values where the file names none, as llama.cpp assumes. */
        hp->attn_softcap = 50.0f, hp->final_softcap = 30.0f;
        if (meta_opt_f32(g, arch, "attn_logit_softcapping", &hp->attn_softcap) ||
            meta_opt_f32(g, arch, "final_logit_softcapping", &hp->final_softcap))
            return -1;
        /* Gemma 2 27B (46 layers) scales q by (n_embd / n_head)^-0.5, its query_pre_attn_scalar, which
         * llama.cpp's converter does not store: llama.cpp knows it by the layer count, and so does cllm. */
        snprintf(key, sizeof key, "%s.attention.scale", arch);
        if (hp->n_layer == 46 && !gguf_find(g, key)) hp->attn_scale = 1.0f / sqrtf((float)hp->n_embd / hp->n_head);
    }
    hparams_nope_period(hp, hp->traits->nope_period);
    if (experts_from_gguf(g, arch, hp)) return -1;
    if (hp->traits->mla && mla_from_gguf(g, arch, hp)) return -1;
    if (hp->traits->act == ACT_SWIGLU_OAI) {
        /* llama.cpp fixes gpt-oss's values; cllm quantize writes them when a checkpoint's differ. */
        hp->swiglu_alpha = 1.702f, hp->swiglu_limit = 7.0f;
        if (meta_opt_f32(g, arch, "swiglu_alpha", &hp->swiglu_alpha) ||
            meta_opt_f32(g, arch, "swiglu_limit", &hp->swiglu_limit))
            return -1;
    }

    if (hp->traits->swa_pattern > 0) {
        /* Gemma 2 files may leave out the window: llama.cpp then takes 4096. */
        if (hp->traits->softcaps) hp->n_swa = 4096;
        if (meta_opt_u32(g, arch, "attention.sliding_window", &hp->n_swa, 0, 1 << 24)) return -1;
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
        /* One flag per layer, or (as llama.cpp's set_swa_pattern) a period n:
         * layer il slides unless il % n == n - 1; 0: no layer slides. */
        int period = hp->traits->swa_pattern;
        if (gguf_find(g, key) && !gguf_get_arr(g, key, GGUF_TYPE_BOOL) &&
            meta_need_u32(g, arch, "attention.sliding_window_pattern", &period, 0, CLLM_MAX_LAYERS))
            return err_set("%s is neither a list of booleans nor a layer period", key);
        const gguf_value *pat = gguf_get_arr(g, key, GGUF_TYPE_BOOL);
        if (pat && pat->arr.n != (uint64_t)hp->n_layer)
            return err_set("%s has %llu entries, the model has %d layers", key,
                           (unsigned long long)pat->arr.n, hp->n_layer);
        for (int il = 0; il < hp->n_layer; il++)
            hp->is_swa[il] = hp->n_swa > 0 && (pat ? gguf_arr_num(pat, (uint64_t)il) != 0
                                                   : period > 0 && il % period < period - 1);
    } else if (hp->traits->window_all_layers) {
        /* A window over every layer (Mistral from a Hugging Face folder, as
         * cllm quantize writes it; llama.cpp's converter writes none). */
        if (meta_opt_u32(g, arch, "attention.sliding_window", &hp->n_swa, 0, 1 << 24)) return -1;
        for (int il = 0; il < hp->n_layer; il++) hp->is_swa[il] = hp->n_swa > 0;
        hp->rope_base_swa = hp->rope_base;
    }
    return hparams_check(hp);
}

/* A float hyper-parameter must be finite and in [lo, hi] (lo itself excluded
 * when lo_open). */
static int check_range(const char *what, float v, double lo, double hi, bool lo_open) {
    if (!isfinite(v) || (lo_open ? v <= lo : v < lo) || v > hi)
        return err_set("%s = %g is out of range %s%g, %g]", what, (double)v, lo_open ? "(" : "[", lo, hi);
    return 0;
}

int hparams_check(const model_hparams *hp) {
    /* The norms divide by sqrt(mean(x^2) + eps): eps <= 0 gives inf and NaN
     * on a zero row, and from there NaN logits. The upper bounds are far
     * above any trained model's and only keep the arithmetic finite. */
    if (check_range("rms norm epsilon (attention.layer_norm_rms_epsilon, rms_norm_eps)", hp->norm_eps, 0, 1, true) ||
        check_range("rope frequency base (rope.freq_base, rope_theta)", hp->rope_base, 1, 1e12, false) ||
        check_range("rope frequency base of sliding layers (rope.freq_base_swa)", hp->rope_base_swa, 1, 1e12,
                    false) ||
        check_range("rope position scale (1 / rope scaling factor)", hp->rope_pos_scale, 1e-6, 1e6, false) ||
        check_range("rope attention factor (rope.scaling.attn_factor)", hp->rope_attn_factor, 0, 1e3, true) ||
        check_range("attention scale (attention.scale)", hp->attn_scale, 0, 1e4, true) ||
        check_range("embedding scale", hp->embd_scale, 0, 1e6, true) ||
        check_range("residual scale (residual_scale, residual_multiplier)", hp->residual_scale, 0, 1e6, true) ||
        check_range("logit scale (1 / logit_scale, 1 / logits_scaling)", hp->logit_scale, 0, 1e6, true) ||
        check_range("attention soft-cap (attn_logit_softcapping)", hp->attn_softcap, 0, 1e6, false) ||
        check_range("final logit soft-cap (final_logit_softcapping)", hp->final_softcap, 0, 1e6, false))
        return -1;
    if (hp->rope_yarn_factor > 0 &&
        (check_range("YaRN factor (rope.scaling.factor)", hp->rope_yarn_factor, 1, 1e6, false) ||
         check_range("YaRN beta_fast (rope.scaling.yarn_beta_fast)", hp->rope_yarn_beta_fast, 0, 1e6, true) ||
         check_range("YaRN beta_slow (rope.scaling.yarn_beta_slow)", hp->rope_yarn_beta_slow, 0, 1e6, true)))
        return -1;
    if (hp->rope_yarn_factor > 0 && (hp->rope_yarn_orig_ctx < 1 || hp->rope_yarn_orig_ctx > HPARAMS_MAX_CTX))
        return err_set("YaRN original context %d is out of range [1, %d]", hp->rope_yarn_orig_ctx, HPARAMS_MAX_CTX);
    if (hp->n_expert_groups > 1 && (hp->n_expert % hp->n_expert_groups || hp->n_group_used < 1 ||
                                    hp->n_group_used > hp->n_expert_groups ||
                                    hp->n_group_used * (hp->n_expert / hp->n_expert_groups) < hp->n_expert_used))
        return err_set("%d expert groups of which %d used cannot give %d of %d experts", hp->n_expert_groups,
                       hp->n_group_used, hp->n_expert_used, hp->n_expert);
    if (hp->traits->act == ACT_SWIGLU_OAI &&
        (check_range("SwiGLU alpha (swiglu_alpha)", hp->swiglu_alpha, 0, 1e3, true) ||
         check_range("SwiGLU limit (swiglu_limit)", hp->swiglu_limit, 0, 1e6, true)))
        return -1;
    if (hp->n_ctx_train < 1 || hp->n_ctx_train > HPARAMS_MAX_CTX)
        return err_set("trained context length %d is out of range [1, %d]", hp->n_ctx_train, HPARAMS_MAX_CTX);
    if (hp->n_swa < 0 || hp->n_swa > HPARAMS_MAX_CTX)
        return err_set("sliding window %d is out of range [0, %d]", hp->n_swa, HPARAMS_MAX_CTX);
    if (hp->n_expert < 0 || hp->n_expert > CLLM_MAX_EXPERTS)
        return err_set("%d experts is out of range [0, %d]", hp->n_expert, CLLM_MAX_EXPERTS);
    if (hp->n_expert > 0 && (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert))
        return err_set("%d experts per token is out of range [1, %d]", hp->n_expert_used, hp->n_expert);
    if (hp->n_expert > 0 && (hp->n_ff_exp < 1 || hp->n_ff_shexp < 0))
        return err_set("expert width %d / shared expert width %d is out of range", hp->n_ff_exp, hp->n_ff_shexp);
    if (hp->n_expert > 0 && check_range("expert weights scale (expert_weights_scale)", hp->expert_scale, 0, 1e6, true))
        return -1;
    return 0;
}

void model_kv_spec(const model_hparams *hp, kv_spec *spec) {
    *spec = (kv_spec){.n_layers = hp->n_layer, .n_kv_heads = hp->n_head_kv,
                      .head_dim_k = hp->head_dim_k, .head_dim_v = hp->head_dim_v,
                      .v_in_k = hp->mla_kv_rank > 0};
    for (int il = 0; il < hp->n_layer; il++) spec->window[il] = hp->is_swa[il] ? hp->n_swa : 0;
}
