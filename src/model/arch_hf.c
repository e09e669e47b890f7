/* Hyper-parameters from a Hugging Face config.json (see hf_config.h). Keys and
 * their defaults follow transformers' LlamaConfig, MistralConfig, Qwen2Config,
 * Qwen3Config, Gemma2Config, Gemma3TextConfig, GraniteConfig, SmolLM3Config
 * Olmo2Config, the MoE configs and GptOssConfig; a null value counts as absent. Rope settings come as
 * transformers 4 writes them (rope_theta, rope_scaling) or as 5 does
 * (rope_parameters, per layer type where a family has two bases). Where the
 * checkpoint's conventions differ from GGUF's they are recorded for the loader:
 *  - Llama/Mistral q/k rows are in HF's order (rotate_half pairs dimension i
 *    with i + d/2), so the rope style is NEOX; llama.cpp's converter permutes
 *    them instead and uses adjacent pairs.
 *  - Gemma's norms compute x * (1 + w); the loader adds the 1.
 *  - Mistral's sliding_window applies to every layer (transformers'
 *    MistralModel); llama.cpp's converter does not carry it to GGUF.
 *  - Gemma's attention scale is query_pre_attn_scalar^-0.5.
 *  - "llama3" rope scaling becomes per-pair frequency factors, computed as
 *    convert_hf_to_gguf.py computes rope_freqs.weight;
 *  - "yarn" keeps transformers' truncate (gpt-oss: false), which llama.cpp's
 *    files cannot state (it always rounds). */
#include "model/hf_config.h"

#include "format/json_file.h"
#include "util/error.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *path; /* for messages */
    json_t *obj;
} cfg_obj;

static json_t *get(const cfg_obj *c, const char *key) {
    json_t *v = json_object_get(c->obj, key);
    return json_is_null(v) ? NULL : v;
}

static int get_int(const cfg_obj *c, const char *key, int *out, int lo, int hi, bool required) {
    json_t *v = get(c, key);
    if (!v) return required ? err_set("%s: missing required key \"%s\"", c->path, key) : 0;
    if (!json_is_integer(v)) return err_set("%s: \"%s\" is not an integer", c->path, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return err_set("%s: \"%s\" = %lld is out of range [%d, %d]", c->path, key, (long long)x, lo, hi);
    *out = (int)x;
    return 0;
}

static int get_num(const cfg_obj *c, const char *key, float *out) {
    json_t *v = get(c, key);
    if (!v) return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return err_set("%s: \"%s\" is not a finite number", c->path, key);
    *out = (float)json_number_value(v);
    return 0;
}

static int get_bool(const cfg_obj *c, const char *key, bool *out) {
    json_t *v = get(c, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return err_set("%s: \"%s\" is not true or false", c->path, key);
    *out = json_is_true(v);
    return 0;
}

/* NULL when absent; an error (and *bad) when present but not a string. */
static const char *get_str(const cfg_obj *c, const char *key, bool *bad) {
    json_t *v = get(c, key);
    if (v && !json_is_string(v)) {
        err_set("%s: \"%s\" is not a string", c->path, key);
        *bad = true;
    }
    return v ? json_string_value(v) : NULL;
}

/* --- rope ------------------------------------------------------------------ */

/* A list of n positive numbers: LongRoPE's factors. */
static int get_factors(const cfg_obj *c, const char *key, float *out, int n) {
    json_t *v = get(c, key);
    if (!json_is_array(v) || json_array_size(v) != (size_t)n)
        return err_set("%s: LongRoPE \"%s\" is not a list of %d numbers (half the rotary dims)", c->path, key, n);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_number(x) || !(json_number_value(x) > 0) || !isfinite(json_number_value(x)))
            return err_set("%s: %s[%d] is not a finite positive number", c->path, key, i);
        out[i] = (float)json_number_value(x);
    }
    return 0;
}

/* Phi-3's LongRoPE ("longrope", or "su"): the short and long factors, the
 * original context (in r, or at the top as transformers 4 has it), and the
 * attention factor transformers computes: sqrt(1 + ln(s) / ln(original)) for
 * s = max_position_embeddings / original > 1, unless r states one. */
static int read_longrope(const cfg_obj *top, const cfg_obj *r, model_hparams *hp, hf_config *cfg) {
    const int n = hp->rope_dim / 2;
    if (n > HF_ROPE_FACTORS_MAX) return err_set("%s: %d rotary dims are too many for LongRoPE", r->path, 2 * n);
    hp->rope_orig_ctx = 0;
    if (get_int(r, "original_max_position_embeddings", &hp->rope_orig_ctx, 1, HPARAMS_MAX_CTX, false) ||
        (!hp->rope_orig_ctx &&
         get_int(top, "original_max_position_embeddings", &hp->rope_orig_ctx, 1, HPARAMS_MAX_CTX, true)) ||
        get_factors(r, "short_factor", cfg->rope_short, n) || get_factors(r, "long_factor", cfg->rope_long, n))
        return -1;
    float scale = (float)hp->n_ctx_train / (float)hp->rope_orig_ctx, attn = 0;
    if (get_num(r, "factor", &scale) || get_num(r, "attention_factor", &attn)) return -1;
    hp->rope_attn_factor = attn > 0 ? attn : scale <= 1 ? 1.0f : sqrtf(1 + logf(scale) / logf((float)hp->rope_orig_ctx));
    cfg->longrope = true;
    return 0;
}

/* YaRN as transformers computes it (_compute_yarn_parameters): factor
 * (else max_position_embeddings / original), the attention factor as stated,
 * else from mscale and mscale_all_dim, else 1 + 0.1 ln factor. */
static int read_yarn(const cfg_obj *top, const cfg_obj *r, model_hparams *hp) {
    float factor = 0, attn = 0, mscale = 0, mscale_all = 0;
    hp->rope_yarn_orig_ctx = 0;
    hp->rope_yarn_beta_fast = 32.0f, hp->rope_yarn_beta_slow = 1.0f;
    hp->rope_yarn_truncate = true;
    if (get_int(r, "original_max_position_embeddings", &hp->rope_yarn_orig_ctx, 1, HPARAMS_MAX_CTX, false) ||
        (!hp->rope_yarn_orig_ctx &&
         get_int(top, "original_max_position_embeddings", &hp->rope_yarn_orig_ctx, 1, HPARAMS_MAX_CTX, true)) ||
        get_num(r, "factor", &factor) || get_num(r, "attention_factor", &attn) || get_num(r, "mscale", &mscale) ||
        get_num(r, "mscale_all_dim", &mscale_all) || get_num(r, "beta_fast", &hp->rope_yarn_beta_fast) ||
        get_num(r, "beta_slow", &hp->rope_yarn_beta_slow) || get_bool(r, "truncate", &hp->rope_yarn_truncate))
        return -1;
    if (factor == 0) factor = (float)hp->n_ctx_train / (float)hp->rope_yarn_orig_ctx;
    if (!(factor >= 1)) return err_set("%s: YaRN \"factor\" %g must be at least 1", r->path, (double)factor);
    hp->rope_yarn_factor = factor;
    hp->rope_yarn_log_mul = 0.1f * mscale_all;
    if (attn > 0) hp->rope_attn_factor = attn;
    else if (mscale > 0 && mscale_all > 0)
        hp->rope_attn_factor = (1.0f + 0.1f * mscale * logf(factor)) / (1.0f + 0.1f * mscale_all * logf(factor));
    else hp->rope_attn_factor = rope_yarn_mscale(factor);
    return 0;
}

/* The scaling described by rs (transformers 4's "rope_scaling", or 5's
 * rope_parameters; `what` names it). hp NULL: only "default" is accepted
 * (Gemma 3's sliding layers are never scaled). */
static int read_rope_scaling(const cfg_obj *c, json_t *rs, const char *what, model_hparams *hp, hf_config *cfg) {
    if (!rs) return 0;
    if (!json_is_object(rs)) return err_set("%s: \"%s\" is not an object", c->path, what);
    cfg_obj r = {c->path, rs};
    bool bad = false;
    const char *type = get_str(&r, "rope_type", &bad);
    if (!type && !bad) type = get_str(&r, "type", &bad);
    if (bad) return -1;
    if (!type || !strcmp(type, "default")) return 0;
    if (!hp) return err_set("%s: rope_parameters type '%.32s' on sliding layers is not supported", c->path, type);
    if (!strcmp(type, "longrope") || !strcmp(type, "su")) return read_longrope(c, &r, hp, cfg);
    if (!strcmp(type, "yarn")) return read_yarn(c, &r, hp);
    float factor = 0;
    if (get_num(&r, "factor", &factor)) return -1;
    if (!strcmp(type, "linear")) {
        if (!(factor > 0)) return err_set("%s: rope_scaling \"factor\" must be positive", c->path);
        hp->rope_pos_scale = 1.0f / factor;
        return 0;
    }
    if (!strcmp(type, "llama3")) {
        cfg->llama3_rope = true;
        cfg->rope_factor = 8.0f, cfg->rope_low_freq = 1.0f, cfg->rope_high_freq = 4.0f;
        cfg->rope_orig_ctx = 8192;
        if (get_num(&r, "factor", &cfg->rope_factor) || get_num(&r, "low_freq_factor", &cfg->rope_low_freq) ||
            get_num(&r, "high_freq_factor", &cfg->rope_high_freq) ||
            get_int(&r, "original_max_position_embeddings", &cfg->rope_orig_ctx, 1, 1 << 30, false))
            return -1;
        if (!(cfg->rope_factor > 0) || !(cfg->rope_low_freq > 0) || !(cfg->rope_high_freq > cfg->rope_low_freq))
            return err_set("%s: llama3 rope_scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0",
                           c->path);
        return 0;
    }
    return err_set("%s: unsupported %s type '%.32s' (supported: default, linear, llama3, longrope, yarn)", c->path, what,
                   type);
}

/* rope_theta, and rope_scaling, in either spelling (see the top). The
 * sliding layers' base (Gemma 3: rope_local_base_freq, or the
 * "sliding_attention" entry) goes to rope_base_swa. */
static int read_rope(const cfg_obj *c, model_hparams *hp, hf_config *cfg) {
    json_t *rp = get(c, "rope_parameters");
    if (!rp) {
        if (get_num(c, "rope_theta", &hp->rope_base)) return -1;
        hp->rope_base_swa = hp->traits->rope_base_swa > 0 ? hp->traits->rope_base_swa : hp->rope_base;
        if (get_num(c, "rope_local_base_freq", &hp->rope_base_swa)) return -1;
        return read_rope_scaling(c, get(c, "rope_scaling"), "rope_scaling", hp, cfg);
    }
    if (!json_is_object(rp)) return err_set("%s: \"rope_parameters\" is not an object", c->path);
    json_t *full = json_object_get(rp, "full_attention"), *swa = json_object_get(rp, "sliding_attention");
    if ((full && !json_is_object(full)) || (swa && !json_is_object(swa)))
        return err_set("%s: \"rope_parameters\" has an entry per layer type that is not an object", c->path);
    cfg_obj f = {c->path, full ? full : rp}, w = {c->path, swa};
    if (get_num(&f, "rope_theta", &hp->rope_base)) return -1;
    hp->rope_base_swa = hp->traits->rope_base_swa > 0 ? hp->traits->rope_base_swa : hp->rope_base;
    if (swa && (get_num(&w, "rope_theta", &hp->rope_base_swa) ||
                read_rope_scaling(c, swa, "rope_parameters", NULL, NULL)))
        return -1;
    return read_rope_scaling(c, f.obj, "rope_parameters", hp, cfg);
}

void hf_llama3_rope_factors(const model_hparams *hp, const hf_config *cfg, float *out) {
    const int n = hp->rope_dim / 2;
    const double low_wavelen = cfg->rope_orig_ctx / (double)cfg->rope_low_freq;
    const double high_wavelen = cfg->rope_orig_ctx / (double)cfg->rope_high_freq;
    for (int i = 0; i < n; i++) {
        /* The converter's freqs are float32: base ** (arange(0, dim, 2) / dim). */
        const float freq = (float)(1.0 / pow((double)hp->rope_base, (double)(2 * i) / hp->rope_dim));
        const double wavelen = 2 * M_PI / freq;
        if (wavelen < high_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            out[i] = cfg->rope_factor;
        } else {
            const double smooth =
                (cfg->rope_orig_ctx / wavelen - cfg->rope_low_freq) / (cfg->rope_high_freq - cfg->rope_low_freq);
            out[i] = (float)(1.0 / ((1 - smooth) / cfg->rope_factor + smooth));
        }
    }
}

/* --- alternating sliding layers (Gemma, gpt-oss) ------------------------------ */

/* Sliding layers by layer_types, else every layer but each pattern-th. */
static int read_layer_windows(const cfg_obj *c, model_hparams *hp, int pattern) {
    hp->n_swa = 4096;
    if (get_int(c, "sliding_window", &hp->n_swa, 0, 1 << 24, false)) return -1;
    json_t *types = get(c, "layer_types");
    if (types) {
        if (!json_is_array(types) || json_array_size(types) != (size_t)hp->n_layer)
            return err_set("%s: \"layer_types\" is not a list of %d layer types", c->path, hp->n_layer);
        for (int il = 0; il < hp->n_layer; il++) {
            const char *t = json_string_value(json_array_get(types, (size_t)il));
            if (!t || (strcmp(t, "sliding_attention") && strcmp(t, "full_attention")))
                return err_set("%s: layer_types[%d] is not \"sliding_attention\" or \"full_attention\"", c->path,
                               il);
            hp->is_swa[il] = hp->n_swa > 0 && !strcmp(t, "sliding_attention");
        }
        return 0;
    }
    const char *key = get(c, "sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
    if (get_int(c, key, &pattern, 1, CLLM_MAX_LAYERS, false)) return -1;
    for (int il = 0; il < hp->n_layer; il++) hp->is_swa[il] = hp->n_swa > 0 && (il + 1) % pattern != 0;
    return 0;
}

/* --- quantization ------------------------------------------------------------ */

static int read_quant(const cfg_obj *q, hf_config *cfg) {
    hf_quant *qt = &cfg->quant;
    bool bad = false;
    const char *method = get_str(q, "quant_method", &bad);
    if (bad) return -1;
    if (!method || !strcasecmp(method, "gptq")) {
        qt->method = HF_QUANT_GPTQ;
        qt->bits = 4, qt->group_size = 128, qt->sym = true, qt->zeros_plus_one = true;
        if (get_int(q, "bits", &qt->bits, 1, 32, true) || get_int(q, "group_size", &qt->group_size, -1, 1 << 20, false) ||
            get_bool(q, "sym", &qt->sym) || get_bool(q, "desc_act", &qt->desc_act))
            return -1;
        if (qt->bits != 4 && qt->bits != 8)
            return err_set("%s: GPTQ with %d bits is not supported (4 or 8)", q->path, qt->bits);
        const char *fmt = get_str(q, "checkpoint_format", &bad);
        if (bad) return -1;
        bool marlin = false;
        if (get_bool(q, "is_marlin_format", &marlin)) return -1;
        if (marlin || (fmt && strcmp(fmt, "gptq") && strcmp(fmt, "gptq_v2")))
            return err_set("%s: GPTQ checkpoint format '%s' is not supported (gptq, gptq_v2)", q->path,
                           marlin ? "marlin" : fmt);
        qt->zeros_plus_one = !fmt || !strcmp(fmt, "gptq");
    } else if (!strcasecmp(method, "awq")) {
        qt->method = HF_QUANT_AWQ;
        qt->bits = 4, qt->group_size = 128;
        bool zero_point = true;
        const char *bits_key = get(q, "w_bit") ? "w_bit" : "bits";
        const char *group_key = get(q, "q_group_size") ? "q_group_size" : "group_size";
        if (get_int(q, bits_key, &qt->bits, 1, 32, false) ||
            get_int(q, group_key, &qt->group_size, -1, 1 << 20, false) || get_bool(q, "zero_point", &zero_point))
            return -1;
        if (qt->bits != 4) return err_set("%s: AWQ with %d bits is not supported (4)", q->path, qt->bits);
        if (!zero_point) return err_set("%s: AWQ without zero points is not supported", q->path);
        const char *version = get_str(q, "version", &bad);
        if (bad) return -1;
        if (version && strcasecmp(version, "gemm"))
            return err_set("%s: AWQ version '%s' is not supported (gemm)", q->path, version);
    } else if (!strcasecmp(method, "mxfp4")) { /* gpt-oss as it ships */
        return err_set("%s: MXFP4 checkpoints (gpt-oss's experts) load from GGUF, not from the folder: convert it "
                       "with llama.cpp's convert_hf_to_gguf.py, which keeps the experts in MXFP4",
                       q->path);
    } else {
        return err_set("%s: quantization method '%.32s' is not supported (gptq, awq)", q->path, method);
    }
    if (qt->group_size == 0 || qt->group_size < -1)
        return err_set("%s: group_size %d is invalid", q->path, qt->group_size);
    if (qt->group_size != -1 && qt->group_size != 32 && qt->group_size != 64 && qt->group_size != 128)
        return err_set("%s: group_size %d is not supported (32, 64, 128 or -1)", q->path, qt->group_size);
    return 0;
}

static int read_quant_config(const char *dir, json_t *root, hf_config *cfg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *q = json_object_get(root, "quantization_config");
    if (q && !json_is_null(q)) {
        if (!json_is_object(q)) return err_set("%s: \"quantization_config\" is not an object", path);
        cfg_obj c = {path, q};
        return read_quant(&c, cfg);
    }
    /* AutoGPTQ before transformers integration: a separate file. */
    snprintf(path, sizeof path, "%s/quantize_config.json", dir);
    bool absent;
    json_t *qroot = json_file_load(path, JSON_REJECT_DUPLICATES, &absent);
    if (!qroot) return absent ? 0 : -1;
    cfg_obj c = {path, qroot};
    int rc = json_is_object(qroot) ? read_quant(&c, cfg) : err_set("%s: not a JSON object", path);
    json_decref(qroot);
    return rc;
}

/* --- the whole config ---------------------------------------------------------- */

/* model_type -> the family (arch.c's name) whose forward pass computes it. */
static const struct {
    const char *model_type, *family;
} k_hf_families[] = {
    {"llama", "llama"},     {"mistral", "llama"},       {"qwen2", "qwen2"},     {"qwen3", "qwen3"},
    {"gemma2", "gemma2"},   {"gemma3", "gemma3"},       {"gemma3_text", "gemma3"}, {"granite", "granite"},
    {"smollm3", "smollm3"}, {"olmo2", "olmo2"},     {"phi3", "phi3"},
    {"mixtral", "llama"},   {"qwen2_moe", "qwen2moe"}, {"qwen3_moe", "qwen3moe"}, {"olmoe", "olmoe"},
    {"gpt_oss", "gpt-oss"}, {"deepseek_v2", "deepseek2"}, {"deepseek_v3", "deepseek2"},
};

#define N_HF_FAMILIES (sizeof k_hf_families / sizeof k_hf_families[0])

static const char *hf_family_of(const char *model_type) {
    for (size_t i = 0; i < N_HF_FAMILIES; i++)
        if (!strcmp(k_hf_families[i].model_type, model_type)) return k_hf_families[i].family;
    return NULL;
}

static bool hf_is_moe(const char *model_type) {
    return !strcmp(model_type, "mixtral") || !strcmp(model_type, "qwen2_moe") || !strcmp(model_type, "qwen3_moe") ||
           !strcmp(model_type, "olmoe") || !strcmp(model_type, "gpt_oss");
}

/* DeepSeek-V2: latent attention (kv_lora_rank, q_lora_rank, the nope, rope
 * and value dims of a head), experts (n_routed_experts of
 * moe_intermediate_size, n_shared_experts more of that width without a
 * gate, routed_scaling_factor, group-limited routing, dense layers before
 * first_k_dense_replace; transformers' router does not renormalize, whatever
 * norm_topk_prob says), and DeepSeek's YaRN q.k scale.
 * DeepSeek-V3 (v3): the same, routed as noaux_tc: sigmoid scores, a
 * selection bias (the tensor e_score_correction_bias, moe.c), groups ranked
 * by their two best scores, the weights renormalized as norm_topk_prob says;
 * its rope pairs adjacent dims unless rope_interleave is false. */
static int read_deepseek2(const cfg_obj *c, model_hparams *hp, bool v3) {
    int nope = 128, rope = 64, first_dense = v3 ? 3 : 0, n_shared = v3 ? 1 : 2;
    hp->mla_kv_rank = 512, hp->mla_q_rank = 1536, hp->mla_v_dim = 128;
    hp->n_expert = v3 ? 256 : 64, hp->n_expert_used = v3 ? 8 : 6, hp->n_ff_exp = v3 ? 2048 : 1407;
    hp->gating = v3 ? GATING_SIGMOID : GATING_SOFTMAX, hp->expert_norm = v3, hp->expert_scale = 1.0f;
    json_t *q_rank = json_object_get(c->obj, "q_lora_rank");
    if (json_is_null(q_rank)) hp->mla_q_rank = 0;
    bool bad = false;
    const char *method = get_str(c, "topk_method", &bad);
    if (bad || get_int(c, "kv_lora_rank", &hp->mla_kv_rank, 1, 4096, false) ||
        get_int(c, "q_lora_rank", &hp->mla_q_rank, 1, 1 << 16, false) ||
        get_int(c, "qk_nope_head_dim", &nope, 1, 4096, false) || get_int(c, "qk_rope_head_dim", &rope, 2, 4096, false) ||
        get_int(c, "v_head_dim", &hp->mla_v_dim, 1, 4096, false) ||
        get_int(c, "n_routed_experts", &hp->n_expert, 1, CLLM_MAX_EXPERTS, false) ||
        get_int(c, "num_experts_per_tok", &hp->n_expert_used, 1, hp->n_expert, false) ||
        get_int(c, "moe_intermediate_size", &hp->n_ff_exp, 1, 1 << 20, false) ||
        get_int(c, "n_shared_experts", &n_shared, 0, 64, false) ||
        get_int(c, "first_k_dense_replace", &first_dense, 0, CLLM_MAX_LAYERS, false) ||
        get_num(c, "routed_scaling_factor", &hp->expert_scale))
        return -1;
    if (rope % 2) return err_set("%s: qk_rope_head_dim %d is odd; rope needs pairs", c->path, rope);
    const char *want = v3 ? "noaux_tc" : NULL; /* V2: greedy or group_limited_greedy */
    if (method && (v3 ? strcmp(method, want) : strcmp(method, "greedy") && strcmp(method, "group_limited_greedy")))
        return err_set("%s: topk_method '%.32s' is not supported (%s)", c->path, method,
                       v3 ? "noaux_tc" : "greedy, group_limited_greedy");
    const char *scoring = get_str(c, "scoring_func", &bad);
    if (bad) return -1;
    if (scoring && strcmp(scoring, v3 ? "sigmoid" : "softmax"))
        return err_set("%s: scoring_func '%.32s' is not supported for %s (%s)", c->path, scoring,
                       v3 ? "deepseek_v3" : "deepseek_v2", v3 ? "sigmoid" : "softmax");
    if (v3 || (method && !strcmp(method, "group_limited_greedy"))) {
        hp->n_expert_groups = v3 ? 8 : 1, hp->n_group_used = v3 ? 4 : 1;
        if (get_int(c, "n_group", &hp->n_expert_groups, 1, hp->n_expert, !v3) ||
            get_int(c, "topk_group", &hp->n_group_used, 1, hp->n_expert_groups, !v3))
            return -1;
    }
    if (v3 && get_bool(c, "norm_topk_prob", &hp->expert_norm)) return -1;
    hp->n_ff_shexp = n_shared * hp->n_ff_exp;
    for (int il = 0; il < hp->n_layer; il++) hp->dense_ffn[il] = il < first_dense;
    hp->mla_nope_dim = nope;
    hp->rope_dim = rope;
    hp->n_head_kv = 1;
    hp->rope = ROPE_NORM; /* DeepSeek's checkpoints rotate adjacent pairs (complex numbers), as its GGUF files */
    bool interleave = true;
    if (v3 && get_bool(c, "rope_interleave", &interleave)) return -1;
    if (!interleave) hp->rope = ROPE_NEOX;
    hp->head_dim_k = hp->mla_kv_rank + rope;
    hp->head_dim_v = hp->mla_kv_rank;
    hp->attn_scale = mla_attn_scale(hp, 1.0f);
    return 0;
}

static void hf_model_types(char *buf, size_t cap) {
    buf[0] = 0;
    for (size_t i = 0, n = 0; i < N_HF_FAMILIES && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", k_hf_families[i].model_type);
}

/* Granite's multipliers: embeddings, residual branches, q.k (in place of
 * 1/sqrt(head_dim)), and the logits (divided by logits_scaling). */
static int read_granite(const cfg_obj *c, model_hparams *hp) {
    float logits_div = 1.0f;
    if (get_num(c, "embedding_multiplier", &hp->embd_scale) || get_num(c, "residual_multiplier", &hp->residual_scale) ||
        get_num(c, "attention_multiplier", &hp->attn_scale) || get_num(c, "logits_scaling", &logits_div))
        return -1;
    if (!(logits_div > 0)) return err_set("%s: \"logits_scaling\" must be positive", c->path);
    hp->logit_scale = 1.0f / logits_div;
    return 0;
}

/* SmolLM3's NoPE layers: no_rope_layers[i] is 1 where layer i uses rope, else
 * every no_rope_layer_interval-th layer has none. */
static int read_nope(const cfg_obj *c, model_hparams *hp) {
    json_t *list = get(c, "no_rope_layers");
    if (!list) {
        int interval = hp->traits->nope_period;
        if (get_int(c, "no_rope_layer_interval", &interval, 1, CLLM_MAX_LAYERS, false)) return -1;
        hparams_nope_period(hp, interval);
        return 0;
    }
    if (!json_is_array(list) || json_array_size(list) != (size_t)hp->n_layer)
        return err_set("%s: \"no_rope_layers\" is not a list of %d numbers", c->path, hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) {
        json_t *v = json_array_get(list, (size_t)il);
        if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1))
            return err_set("%s: no_rope_layers[%d] is not 0 or 1", c->path, il);
        hp->no_rope[il] = json_integer_value(v) == 0;
    }
    return 0;
}

/* Gemma 2's soft-caps: its config's defaults, null for none. */
static int read_softcaps(const cfg_obj *c, model_hparams *hp) {
    hp->attn_softcap = 50.0f, hp->final_softcap = 30.0f;
    json_t *a = json_object_get(c->obj, "attn_logit_softcapping"), *f = json_object_get(c->obj, "final_logit_softcapping");
    if (json_is_null(a)) hp->attn_softcap = 0;
    if (json_is_null(f)) hp->final_softcap = 0;
    if (get_num(c, "attn_logit_softcapping", &hp->attn_softcap) ||
        get_num(c, "final_logit_softcapping", &hp->final_softcap))
        return -1;
    if (hp->attn_softcap < 0 || hp->final_softcap < 0) return err_set("%s: soft-capping must not be negative", c->path);
    return 0;
}

/* Mixtures of experts, with transformers' defaults: Mixtral (every layer,
 * intermediate_size wide, the chosen weights always renormalized), OLMoE
 * (the same, renormalized when norm_topk_prob), Qwen2-MoE and Qwen3-MoE
 * (moe_intermediate_size wide; a layer is dense when listed in
 * mlp_only_layers or off the decoder_sparse_step period; Qwen2-MoE adds a
 * shared expert with a sigmoid gate). */
static int read_experts(const cfg_obj *c, const char *model_type, model_hparams *hp) {
    const bool gpt_oss = !strcmp(model_type, "gpt_oss"), mixtral = !strcmp(model_type, "mixtral");
    const bool olmoe = !strcmp(model_type, "olmoe"), qwen2 = !strcmp(model_type, "qwen2_moe");
    /* Mixtral and gpt-oss always renormalize; their experts, like OLMoE's, are intermediate_size wide. */
    const bool always_norm = mixtral || gpt_oss, width_is_ff = mixtral || olmoe || gpt_oss;
    hp->n_expert = mixtral ? 8 : olmoe ? 64 : qwen2 ? 60 : 128;
    hp->n_expert_used = mixtral ? 2 : qwen2 || gpt_oss ? 4 : 8;
    hp->n_ff_exp = width_is_ff ? hp->n_ff : qwen2 ? 1408 : 768;
    hp->n_ff_shexp = qwen2 ? 5632 : 0;
    hp->gating = GATING_SOFTMAX;
    hp->expert_scale = 1.0f;
    hp->expert_norm = always_norm;
    int step = 1;
    /* transformers 5 may save either name of the count (its configs map one to the other). */
    if (get_int(c, "num_local_experts", &hp->n_expert, 1, CLLM_MAX_EXPERTS, false) ||
        get_int(c, "num_experts", &hp->n_expert, 1, CLLM_MAX_EXPERTS, false) ||
        get_int(c, "num_experts_per_tok", &hp->n_expert_used, 1, hp->n_expert, false) ||
        (!width_is_ff && get_int(c, "moe_intermediate_size", &hp->n_ff_exp, 1, 1 << 20, false)) ||
        (qwen2 && get_int(c, "shared_expert_intermediate_size", &hp->n_ff_shexp, 0, 1 << 20, false)) ||
        (!always_norm && get_bool(c, "norm_topk_prob", &hp->expert_norm)) ||
        get_int(c, "decoder_sparse_step", &step, 1, CLLM_MAX_LAYERS, false))
        return -1;
    json_t *only = get(c, "mlp_only_layers");
    if (only && !json_is_array(only)) return err_set("%s: \"mlp_only_layers\" is not a list", c->path);
    for (int il = 0; il < hp->n_layer; il++) hp->dense_ffn[il] = (il + 1) % step != 0;
    for (size_t i = 0; only && i < json_array_size(only); i++) {
        json_t *v = json_array_get(only, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= hp->n_layer)
            return err_set("%s: mlp_only_layers[%zu] is not a layer index", c->path, i);
        hp->dense_ffn[json_integer_value(v)] = true;
    }
    bool flag = true;
    if (qwen2 && get_bool(c, "qkv_bias", &flag)) return -1;
    if (!flag) return err_set("%s: qkv_bias false is not supported for qwen2_moe", c->path);
    if (olmoe && get(c, "clip_qkv")) return err_set("%s: clip_qkv is not supported", c->path);
    if (gpt_oss) {
        hp->swiglu_alpha = 1.702f, hp->swiglu_limit = 7.0f;
        if (get_num(c, "swiglu_alpha", &hp->swiglu_alpha) || get_num(c, "swiglu_limit", &hp->swiglu_limit))
            return -1;
    }
    return 0;
}

/* Mistral and Phi-3: a sliding window over every layer where
 * sliding_window is set (transformers' MistralModel and Phi3Model). */
static int read_window_all_layers(const cfg_obj *c, model_hparams *hp) {
    if (get_int(c, "sliding_window", &hp->n_swa, 0, 1 << 24, false)) return -1;
    for (int il = 0; il < hp->n_layer; il++) hp->is_swa[il] = hp->n_swa > 0;
    hp->rope_base_swa = hp->rope_base;
    return 0;
}

static int read_text_config(const cfg_obj *c, const char *model_type, model_hparams *hp, hf_config *cfg) {
    const arch_traits *tr = hp->traits;
    const bool gemma3 = tr == arch_find("gemma3"), gemma = tr->embd_scale_sqrt;
    const bool req = !gemma3; /* Gemma3TextConfig has defaults for everything */
    if (gemma3) {
        hp->n_embd = 2304, hp->n_ff = 9216, hp->n_layer = 26, hp->n_head = 8, hp->n_head_kv = 4;
        hp->head_dim_k = 256, hp->n_ctx_train = 131072, hp->n_vocab = 262208;
    }
    if (get_int(c, "hidden_size", &hp->n_embd, 1, 1 << 16, req) ||
        get_int(c, "num_hidden_layers", &hp->n_layer, 1, CLLM_MAX_LAYERS, req) ||
        get_int(c, "intermediate_size", &hp->n_ff, 1, 1 << 20, req) ||
        get_int(c, "num_attention_heads", &hp->n_head, 1, 1024, req))
        return -1;
    if (!gemma3) {
        hp->n_head_kv = hp->n_head;
        hp->n_ctx_train = 2048;
        hp->n_vocab = 32000;
    }
    if (get_int(c, "num_key_value_heads", &hp->n_head_kv, 1, hp->n_head, false) ||
        get_int(c, "max_position_embeddings", &hp->n_ctx_train, 1, HPARAMS_MAX_CTX, false) ||
        get_int(c, "vocab_size", &hp->n_vocab, 1, 1 << 24, false))
        return -1;
    if (hp->n_head % hp->n_head_kv)
        return err_set("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", c->path,
                       hp->n_head, hp->n_head_kv);
    if (!gemma3) {
        if (hp->n_embd % hp->n_head)
            return err_set("%s: hidden_size %d is not a multiple of num_attention_heads %d", c->path, hp->n_embd,
                           hp->n_head);
        hp->head_dim_k = hp->n_embd / hp->n_head;
    }
    if (get_int(c, "head_dim", &hp->head_dim_k, 2, 4096, false)) return -1;
    if (hp->head_dim_k % 2) return err_set("%s: head_dim %d is odd; rope needs pairs", c->path, hp->head_dim_k);
    hp->head_dim_v = hp->head_dim_k;
    /* Partial rotary (Phi-4-mini): the first head_dim * factor dims rotate. */
    float partial = 1.0f;
    json_t *rp = get(c, "rope_parameters");
    cfg_obj rpo = {c->path, json_is_object(rp) ? rp : NULL};
    if (get_num(c, "partial_rotary_factor", &partial) || (rpo.obj && get_num(&rpo, "partial_rotary_factor", &partial)))
        return -1;
    hp->rope_dim = (int)((float)hp->head_dim_k * partial);
    if (!(partial > 0 && partial <= 1) || hp->rope_dim < 2 || hp->rope_dim % 2)
        return err_set("%s: partial_rotary_factor %g gives %d rotary dims of %d; need an even number >= 2", c->path,
                       partial, hp->rope_dim, hp->head_dim_k);

    hp->norm_eps = 1e-6f;
    hp->rope_base = gemma3 ? 1000000.0f : 10000.0f;
    if (get_num(c, "rms_norm_eps", &hp->norm_eps)) return -1;
    if (!(hp->norm_eps > 0)) return err_set("%s: \"rms_norm_eps\" must be positive", c->path);
    hp->rope_pos_scale = hp->rope_attn_factor = 1.0f;
    if (read_rope(c, hp, cfg)) return -1;
    if (!(hp->rope_base > 0) || !(hp->rope_base_swa > 0)) return err_set("%s: \"rope_theta\" must be positive", c->path);

    bool bad = false;
    const char *act = get_str(c, gemma ? "hidden_activation" : "hidden_act", &bad);
    if (bad) return -1;
    const char *want = tr->act == ACT_GELU_TANH ? "gelu_pytorch_tanh" : "silu";
    if (act && strcmp(act, want))
        return err_set("%s: activation '%.32s' is not supported for this family (%s)", c->path, act, want);

    bool flag = tr->biases;
    if (get_bool(c, "attention_bias", &flag)) return -1;
    if (flag != tr->biases)
        return err_set("%s: attention_bias %s is not supported for this family", c->path, flag ? "true" : "false");
    flag = false;
    if (get_bool(c, "mlp_bias", &flag)) return -1;
    if (flag) return err_set("%s: mlp_bias is not supported", c->path);
    if (get_bool(c, "use_sliding_window", &flag)) return -1;
    if (flag) return err_set("%s: use_sliding_window is not supported", c->path);
    if (!tr->softcaps && (get(c, "final_logit_softcapping") || get(c, "attn_logit_softcapping")))
        return err_set("%s: logit soft-capping is not supported for this family", c->path);

    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->embd_scale = tr->embd_scale_sqrt ? sqrtf((float)hp->n_embd) : 1.0f;
    hp->residual_scale = hp->logit_scale = 1.0f;
    if (gemma) {
        float qpas = 256.0f;
        if (get_num(c, "query_pre_attn_scalar", &qpas)) return -1;
        if (!(qpas > 0)) return err_set("%s: \"query_pre_attn_scalar\" must be positive", c->path);
        hp->attn_scale = 1.0f / sqrtf(qpas);
        if (read_layer_windows(c, hp, tr->swa_pattern)) return -1;
    }
    if (!gemma && tr->swa_pattern > 0 && read_layer_windows(c, hp, tr->swa_pattern)) return -1;
    if (tr->mla && read_deepseek2(c, hp, !strcmp(model_type, "deepseek_v3"))) return -1;
    if ((tr->softcaps && read_softcaps(c, hp)) || (tr->multipliers && read_granite(c, hp)) ||
        (tr->nope_period && read_nope(c, hp)) ||
        ((!strcmp(model_type, "mistral") || !strcmp(model_type, "phi3") || !strcmp(model_type, "mixtral")) &&
         read_window_all_layers(c, hp)) ||
        (hf_is_moe(model_type) && read_experts(c, model_type, hp)))
        return -1;
    cfg->tie_word_embeddings = gemma || !strcmp(model_type, "smollm3");
    return get_bool(c, "tie_word_embeddings", &cfg->tie_word_embeddings);
}

int hf_config_load(const char *dir, model_hparams *hp, hf_config *cfg) {
    memset(hp, 0, sizeof *hp);
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    bool absent;
    json_t *root = json_file_load(path, JSON_REJECT_DUPLICATES, &absent);
    if (!root) return absent ? err_set("%s: missing (a Hugging Face model folder needs config.json)", path) : -1;
    int rc = 0;
    cfg_obj top = {path, root};
    bool bad = false;
    const char *type = json_is_object(root) ? get_str(&top, "model_type", &bad) : NULL;
    if (!json_is_object(root)) rc = err_set("%s: not a JSON object", path);
    else if (bad) rc = -1;
    else if (!type) rc = err_set("%s: missing required key \"model_type\"", path);
    const char *family = NULL;
    if (!rc && !(family = hf_family_of(type))) {
        char names[256];
        hf_model_types(names, sizeof names);
        rc = err_set("%s: model_type '%.32s' is not supported (%s)", path, type, names);
    }
    if (!rc) {
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", type);
        hp->traits = arch_find(family);
        hp->rope = ROPE_NEOX; /* HF order for every family, see the top of the file */
        cfg->norm_plus_one = hp->traits->embd_scale_sqrt; /* Gemma */
        cfg_obj text = top;
        json_t *tc = json_object_get(root, "text_config");
        if (!strcmp(type, "gemma3") && tc && !json_is_null(tc)) {
            if (!json_is_object(tc)) rc = err_set("%s: \"text_config\" is not an object", path);
            text.obj = tc;
        }
        if (!rc) rc = read_text_config(&text, type, hp, cfg);
        if (!rc && hparams_check(hp)) rc = err_prefix("%s: ", path);
        /* Gemma3ForConditionalGeneration may state the tie at the top level. */
        if (!rc && text.obj != root) rc = get_bool(&top, "tie_word_embeddings", &cfg->tie_word_embeddings);
    }
    if (!rc) rc = read_quant_config(dir, root, cfg);
    json_decref(root);
    return rc;
}
