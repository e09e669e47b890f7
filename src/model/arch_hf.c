/* Hyper-parameters from a Hugging Face config.json (see hf_config.h). Keys and
 * their defaults follow transformers' LlamaConfig, MistralConfig, Qwen2Config
 * and Gemma3TextConfig; a null value counts as absent. Where the checkpoint's
 * conventions differ from GGUF's they are recorded for the loader:
 *  - Llama/Mistral q/k rows are in HF's order (rotate_half pairs dimension i
 *    with i + d/2), so the rope style is NEOX; llama.cpp's converter permutes
 *    them instead and uses adjacent pairs.
 *  - Gemma's norms compute x * (1 + w); the loader adds the 1.
 *  - Gemma's attention scale is query_pre_attn_scalar^-0.5.
 *  - "llama3" rope scaling becomes per-pair frequency factors, computed as
 *    convert_hf_to_gguf.py computes rope_freqs.weight. */
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

static int read_rope_scaling(const cfg_obj *c, model_hparams *hp, hf_config *cfg) {
    json_t *rs = get(c, "rope_scaling");
    if (!rs) return 0;
    if (!json_is_object(rs)) return err_set("%s: \"rope_scaling\" is not an object", c->path);
    cfg_obj r = {c->path, rs};
    bool bad = false;
    const char *type = get_str(&r, "rope_type", &bad);
    if (!type && !bad) type = get_str(&r, "type", &bad);
    if (bad) return -1;
    if (!type || !strcmp(type, "default")) return 0;
    float factor = 0;
    if (get_num(&r, "factor", &factor)) return -1;
    if (!strcmp(type, "linear")) {
        if (!(factor > 0)) return err_set("%s: rope_scaling \"factor\" must be positive", c->path);
        hp->rope_pos_scale = 1.0f / factor;
        return 0;
    }
    if (!strcmp(type, "llama3") && hp->traits == arch_find("llama")) {
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
    return err_set("%s: unsupported rope_scaling type '%.32s' (supported: linear, and llama3 for Llama)", c->path,
                   type);
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

/* --- Gemma 3 sliding layers -------------------------------------------------- */

static int read_gemma_swa(const cfg_obj *c, model_hparams *hp) {
    hp->n_swa = 4096;
    if (get_int(c, "sliding_window", &hp->n_swa, 0, 1 << 24, false)) return -1;
    hp->rope_base_swa = 10000.0f;
    if (get_num(c, "rope_local_base_freq", &hp->rope_base_swa)) return -1;
    if (!(hp->rope_base_swa > 0)) return err_set("%s: \"rope_local_base_freq\" must be positive", c->path);
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
    int pattern = 6;
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

static int read_text_config(const cfg_obj *c, bool gemma, model_hparams *hp, hf_config *cfg) {
    const bool req = !gemma; /* Gemma3TextConfig has defaults for everything */
    if (gemma) {
        hp->n_embd = 2304, hp->n_ff = 9216, hp->n_layer = 26, hp->n_head = 8, hp->n_head_kv = 4;
        hp->head_dim_k = 256, hp->n_ctx_train = 131072, hp->n_vocab = 262208;
    }
    if (get_int(c, "hidden_size", &hp->n_embd, 1, 1 << 16, req) ||
        get_int(c, "num_hidden_layers", &hp->n_layer, 1, CLLM_MAX_LAYERS, req) ||
        get_int(c, "intermediate_size", &hp->n_ff, 1, 1 << 20, req) ||
        get_int(c, "num_attention_heads", &hp->n_head, 1, 1024, req))
        return -1;
    if (!gemma) {
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
    if (!gemma) {
        if (hp->n_embd % hp->n_head)
            return err_set("%s: hidden_size %d is not a multiple of num_attention_heads %d", c->path, hp->n_embd,
                           hp->n_head);
        hp->head_dim_k = hp->n_embd / hp->n_head;
    }
    if (get_int(c, "head_dim", &hp->head_dim_k, 2, 4096, false)) return -1;
    if (hp->head_dim_k % 2) return err_set("%s: head_dim %d is odd; rope needs pairs", c->path, hp->head_dim_k);
    hp->head_dim_v = hp->head_dim_k;
    hp->rope_dim = hp->head_dim_k;
    float partial = 1.0f;
    if (get_num(c, "partial_rotary_factor", &partial)) return -1;
    if (partial != 1.0f) return err_set("%s: partial_rotary_factor %g is not supported", c->path, partial);

    hp->norm_eps = 1e-6f;
    hp->rope_base = gemma ? 1000000.0f : 10000.0f;
    if (get_num(c, "rms_norm_eps", &hp->norm_eps) || get_num(c, "rope_theta", &hp->rope_base)) return -1;
    if (!(hp->norm_eps > 0)) return err_set("%s: \"rms_norm_eps\" must be positive", c->path);
    if (!(hp->rope_base > 0)) return err_set("%s: \"rope_theta\" must be positive", c->path);
    hp->rope_base_swa = hp->rope_base;
    hp->rope_pos_scale = 1.0f;
    if (read_rope_scaling(c, hp, cfg)) return -1;

    bool bad = false;
    const char *act = get_str(c, gemma ? "hidden_activation" : "hidden_act", &bad);
    if (bad) return -1;
    const char *want = gemma ? "gelu_pytorch_tanh" : "silu";
    if (act && strcmp(act, want))
        return err_set("%s: activation '%.32s' is not supported for this family (%s)", c->path, act, want);

    bool flag = false;
    if (get_bool(c, "attention_bias", &flag)) return -1;
    if (flag) return err_set("%s: attention_bias is not supported", c->path);
    if (get_bool(c, "mlp_bias", &flag)) return -1;
    if (flag) return err_set("%s: mlp_bias is not supported", c->path);
    if (get_bool(c, "use_sliding_window", &flag)) return -1;
    if (flag) return err_set("%s: use_sliding_window is not supported", c->path);
    if (get(c, "final_logit_softcapping") || get(c, "attn_logit_softcapping"))
        return err_set("%s: logit soft-capping is not supported", c->path);

    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    if (gemma) {
        float qpas = 256.0f;
        if (get_num(c, "query_pre_attn_scalar", &qpas)) return -1;
        if (!(qpas > 0)) return err_set("%s: \"query_pre_attn_scalar\" must be positive", c->path);
        hp->attn_scale = 1.0f / sqrtf(qpas);
        if (read_gemma_swa(c, hp)) return -1;
    }
    hp->embd_scale = hp->traits->embd_scale_sqrt ? sqrtf((float)hp->n_embd) : 1.0f;
    cfg->tie_word_embeddings = gemma;
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
    if (!rc) {
        if (!strcmp(type, "llama") || !strcmp(type, "mistral")) family = "llama";
        else if (!strcmp(type, "qwen2")) family = "qwen2";
        else if (!strcmp(type, "gemma3") || !strcmp(type, "gemma3_text")) family = "gemma3";
        else rc = err_set("%s: model_type '%.32s' is not supported (llama, mistral, qwen2, gemma3, gemma3_text)", path,
                          type);
    }
    if (!rc) {
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", type);
        hp->traits = arch_find(family);
        hp->rope = ROPE_NEOX; /* HF order for every family, see the top of the file */
        cfg->norm_plus_one = !strcmp(family, "gemma3");
        cfg_obj text = top;
        json_t *tc = json_object_get(root, "text_config");
        if (!strcmp(type, "gemma3") && tc && !json_is_null(tc)) {
            if (!json_is_object(tc)) rc = err_set("%s: \"text_config\" is not an object", path);
            text.obj = tc;
        }
        if (!rc) rc = read_text_config(&text, cfg->norm_plus_one, hp, cfg);
        if (!rc && hparams_check(hp)) rc = err_prefix("%s: ", path);
        /* Gemma3ForConditionalGeneration may state the tie at the top level. */
        if (!rc && text.obj != root) rc = get_bool(&top, "tie_word_embeddings", &cfg->tie_word_embeddings);
    }
    if (!rc) rc = read_quant_config(dir, root, cfg);
    json_decref(root);
    return rc;
}
