/* Hugging Face checkpoint -> tensor table. Names map as convert_hf_to_gguf.py
 * maps them (gguf-py's TensorNameMap), for the layouts of LlamaForCausalLM,
 * MistralForCausalLM, Qwen2/Qwen3ForCausalLM, GraniteForCausalLM,
 * SmolLM3ForCausalLM, Olmo2ForCausalLM, Gemma2/Gemma3ForCausalLM, the
 * mixtures of experts (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, gpt-oss) and the
 * language model of Gemma3ForConditionalGeneration ("language_model.model."
 * or "model.language_model." prefix). Note post_attention_layernorm: Llama's
 * is the norm before the MLP (ffn_norm), Gemma's and OLMo 2's the norm after
 * attention (post_attention_norm; Gemma's MLP input norm is
 * pre_feedforward_layernorm, OLMo 2 has none).
 *
 * Conversions at load time:
 *  - matrices in F32/F16/BF16 stay views into the mapping ([out, in]
 *    row-major is GGUF's ne = [in, out]); one whose data is misaligned for its
 *    element size is copied;
 *  - Gemma norms become f32 (1 + w), as convert_hf_to_gguf.py stores them;
 *  - GPTQ/AWQ linear layers (*.qweight, *.qzeros, *.scales, *.g_idx) are
 *    repacked into GQ blocks (format/hf_quant.c);
 *  - Llama 3 rope scaling becomes a rope_freqs.weight tensor;
 *  - gpt-oss's experts (x @ W, gate and up columns interleaved) are
 *    transposed and split into llama.cpp's ffn_{gate,up,down}_exps. */
#include "model/hf_source.h"

#include "format/hf_quant.h"
#include "format/safetensors.h"
#include "kernels/wtype.h"
#include "util/error.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hf_source {
    st_set *st;
    char prefix[64]; /* before "layers.N.", "embed_tokens.weight", "norm.weight" */
    char head[64];   /* the output head, "lm_head.weight" or a prefixed one */
    const struct name_pair *norms; /* the family's norm names (k_norms_*) */
    size_t n_norms;
};

typedef enum {
    K_NORM,   /* vector; f32, + 1 for Gemma */
    K_VEC,    /* vector (bias) */
    K_LINEAR, /* matrix or quantized linear layer: the name has no ".weight" */
    K_MATRIX, /* a float matrix, never quantized (a router) */
} kind;

typedef struct name_pair {
    const char *gguf, *hf;
    kind k;
} name_pair;

static const name_pair k_layer_common[] = {
    {"attn_norm.weight", "input_layernorm.weight", K_NORM},
    {"attn_q", "self_attn.q_proj", K_LINEAR},
    {"attn_k", "self_attn.k_proj", K_LINEAR},
    {"attn_v", "self_attn.v_proj", K_LINEAR},
    {"attn_output", "self_attn.o_proj", K_LINEAR},
    {"attn_q.bias", "self_attn.q_proj.bias", K_VEC},
    {"attn_k.bias", "self_attn.k_proj.bias", K_VEC},
    {"attn_v.bias", "self_attn.v_proj.bias", K_VEC},
    {"attn_output.bias", "self_attn.o_proj.bias", K_VEC}, /* gpt-oss */
    {"attn_sinks.weight", "self_attn.sinks", K_VEC},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", K_NORM},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", K_NORM},
    {"attn_qkv", "self_attn.qkv_proj", K_LINEAR}, /* Phi-3: q, k, v fused */
    {"attn_q_a", "self_attn.q_a_proj", K_LINEAR}, /* DeepSeek-V2's latent attention */
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight", K_NORM},
    {"attn_q_b", "self_attn.q_b_proj", K_LINEAR},
    {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa", K_LINEAR},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight", K_NORM},
    {"ffn_gate", "mlp.gate_proj", K_LINEAR},
    {"ffn_up", "mlp.gate_up_proj", K_LINEAR}, /* Phi-3: gate and up fused, as llama.cpp names it */
    {"ffn_up", "mlp.up_proj", K_LINEAR},
    {"ffn_down", "mlp.down_proj", K_LINEAR},
};

/* A mixture of experts' router and shared expert (Qwen2-MoE). */
static const name_pair k_layer_moe[] = {
    {"ffn_gate_inp.weight", "mlp.gate.weight", K_MATRIX},
    {"ffn_gate_inp.weight", "block_sparse_moe.gate.weight", K_MATRIX}, /* Mixtral */
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj", K_LINEAR},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj", K_LINEAR},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj", K_LINEAR},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", K_MATRIX},
    {"ffn_gate_shexp", "mlp.shared_experts.gate_proj", K_LINEAR}, /* DeepSeek-V2 */
    {"ffn_up_shexp", "mlp.shared_experts.up_proj", K_LINEAR},
    {"ffn_down_shexp", "mlp.shared_experts.down_proj", K_LINEAR},
    {"ffn_gate_inp.weight", "mlp.router.weight", K_MATRIX}, /* gpt-oss */
    {"ffn_gate_inp.bias", "mlp.router.bias", K_VEC},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias", K_VEC}, /* DeepSeek-V3 */
};

/* Each expert's matrices (%d: the expert), as transformers saves them, to
 * cllm's per-expert names (model.c binds them as it binds llama.cpp's
 * merged ffn_*_exps). */
static const name_pair k_expert[] = {
    {"ffn_gate.%d", "mlp.experts.%d.gate_proj", K_LINEAR},
    {"ffn_up.%d", "mlp.experts.%d.up_proj", K_LINEAR},
    {"ffn_down.%d", "mlp.experts.%d.down_proj", K_LINEAR},
    {"ffn_gate.%d", "block_sparse_moe.experts.%d.w1", K_LINEAR}, /* Mixtral */
    {"ffn_up.%d", "block_sparse_moe.experts.%d.w3", K_LINEAR},
    {"ffn_down.%d", "block_sparse_moe.experts.%d.w2", K_LINEAR},
};

/* The norms around the MLP, by where the family puts them: before it only
 * (Llama), before and after both blocks (Gemma), after both only (OLMo 2). */
static const name_pair k_norms_pre[] = {
    {"ffn_norm.weight", "post_attention_layernorm.weight", K_NORM},
};

static const name_pair k_norms_pre_post[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight", K_NORM},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight", K_NORM},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", K_NORM},
};

/* gpt-oss: the MLP's input norm under llama.cpp's name for it. */
static const name_pair k_norms_pre_as_post_attention[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight", K_NORM},
};

static const name_pair k_norms_post[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight", K_NORM},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", K_NORM},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const name_pair *family_pairs(const hf_source *s, size_t *n) {
    *n = s->n_norms;
    return s->norms;
}

/* --- names ----------------------------------------------------------------- */

static const name_pair *find_pair(const hf_source *s, const char *suffix, bool *linear_weight) {
    const name_pair *lists[3];
    size_t counts[3];
    lists[0] = k_layer_common, counts[0] = COUNT(k_layer_common);
    lists[1] = family_pairs(s, &counts[1]);
    lists[2] = k_layer_moe, counts[2] = COUNT(k_layer_moe);
    for (int li = 0; li < 3; li++)
        for (size_t i = 0; i < counts[li]; i++) {
            const name_pair *p = &lists[li][i];
            size_t n = strlen(p->gguf);
            if (!strcmp(suffix, p->gguf)) {
                *linear_weight = false;
                return p;
            }
            if (p->k == K_LINEAR && !strncmp(suffix, p->gguf, n) && !strcmp(suffix + n, ".weight")) {
                *linear_weight = true;
                return p;
            }
        }
    return NULL;
}

void hf_source_name(const hf_source *s, const char *gguf_name, char *buf, size_t cap) {
    int il, used = 0;
    if (!strcmp(gguf_name, "token_embd.weight")) {
        snprintf(buf, cap, "%sembed_tokens.weight", s->prefix);
    } else if (!strcmp(gguf_name, "output_norm.weight")) {
        snprintf(buf, cap, "%snorm.weight", s->prefix);
    } else if (!strcmp(gguf_name, "output.weight")) {
        snprintf(buf, cap, "%s", s->head);
    } else if (sscanf(gguf_name, "blk.%d.%n", &il, &used) == 1 && used > 0) {
        bool lw = false;
        const name_pair *p = find_pair(s, gguf_name + used, &lw);
        if (p) snprintf(buf, cap, "%slayers.%d.%s%s", s->prefix, il, p->hf, lw ? ".weight" : "");
        else snprintf(buf, cap, "%s", gguf_name);
    } else {
        snprintf(buf, cap, "%s", gguf_name);
    }
}

/* --- conversions ------------------------------------------------------------- */

static int float_type(const st_tensor *t, uint32_t *out) {
    switch (t->dtype) {
    case ST_F32: *out = WT_F32; return 0;
    case ST_F16: *out = WT_F16; return 0;
    case ST_BF16: *out = WT_BF16; return 0;
    default:
        return err_set("tensor '%s' has dtype %s (supported: F32, F16, BF16)", t->name, st_dtype_name(t->dtype));
    }
}

/* A view of the mapped data, or an aligned copy when it is misaligned. */
static const void *aligned_data(tensor_table *tt, const st_tensor *t) {
    size_t esz = st_dtype_size(t->dtype);
    if ((uintptr_t)t->data % esz == 0) return t->data;
    void *copy = tensors_alloc(tt, t->nbytes);
    if (copy) memcpy(copy, t->data, t->nbytes);
    return copy;
}

static int add_vector(tensor_table *tt, const char *gguf, const st_tensor *t, bool plus_one) {
    uint32_t type = WT_F32;
    if (float_type(t, &type)) return -1;
    if (t->n_dims != 1) return err_set("tensor '%s' has %d dimensions, expected 1", t->name, t->n_dims);
    const int64_t ne[1] = {t->shape[0]};
    if (!plus_one) {
        const void *data = aligned_data(tt, t);
        return data && tensors_add(tt, gguf, type, 1, ne, data, t->nbytes) ? 0 : -1;
    }
    float *v = tensors_alloc(tt, (size_t)ne[0] * sizeof *v);
    if (!v) return -1;
    /* HF's Gemma3RMSNorm: x * (1.0 + weight.float()), in f32. */
    wtype_get((wtype)type)->to_float(aligned_data(tt, t), v, ne[0]);
    for (int64_t i = 0; i < ne[0]; i++) v[i] += 1.0f;
    return tensors_add(tt, gguf, WT_F32, 1, ne, v, (size_t)ne[0] * sizeof *v) ? 0 : -1;
}

static int add_matrix(tensor_table *tt, const char *gguf, const st_tensor *t) {
    uint32_t type = WT_F32;
    if (float_type(t, &type)) return -1;
    if (t->n_dims != 2) return err_set("tensor '%s' has %d dimensions, expected 2", t->name, t->n_dims);
    const int64_t ne[2] = {t->shape[1], t->shape[0]};
    const void *data = aligned_data(tt, t);
    return data && tensors_add(tt, gguf, type, 2, ne, data, t->nbytes) ? 0 : -1;
}

int hf_add_float_tensor(tensor_table *tt, const char *gguf_name, const st_tensor *t) {
    return t->n_dims == 1 ? add_vector(tt, gguf_name, t, false) : add_matrix(tt, gguf_name, t);
}

/* A required companion tensor of a quantized layer, with its dtype and shape. */
static const st_tensor *quant_part(const hf_source *s, const char *base, const char *part, st_dtype want,
                                   int n_dims, int64_t d0, int64_t d1) {
    char name[256];
    snprintf(name, sizeof name, "%s.%s", base, part);
    const st_tensor *t = st_find(s->st, name);
    if (!t) {
        err_set("missing tensor '%s' (a quantized layer needs it)", name);
        return NULL;
    }
    bool type_ok = t->dtype == want || (want == ST_I32 && t->dtype == ST_U32);
    if (!type_ok) {
        err_set("tensor '%s' has dtype %s, expected %s", name, st_dtype_name(t->dtype), st_dtype_name(want));
        return NULL;
    }
    if (t->n_dims != n_dims || t->shape[0] != d0 || (n_dims > 1 && t->shape[1] != d1)) {
        char want_s[64];
        if (n_dims > 1) snprintf(want_s, sizeof want_s, "[%" PRId64 ", %" PRId64 "]", d0, d1);
        else snprintf(want_s, sizeof want_s, "[%" PRId64 "]", d0);
        err_set("tensor '%s' has shape [%" PRId64 "%s], expected %s", name, t->shape[0],
                t->n_dims > 1 ? ", ..." : "", want_s);
        return NULL;
    }
    return t;
}

static int add_quantized(const hf_source *s, tensor_table *tt, const char *gguf, const char *base,
                         const st_tensor *qw, const hf_config *cfg) {
    const hf_quant *q = &cfg->quant;
    if (q->method == HF_QUANT_NONE)
        return err_set("tensor '%s' is quantized, but config.json has no quantization_config", qw->name);
    if (qw->n_dims != 2 || (qw->dtype != ST_I32 && qw->dtype != ST_U32))
        return err_set("tensor '%s' is not a 2-D I32 tensor", qw->name);
    const bool awq = q->method == HF_QUANT_AWQ;
    const int pack = 32 / q->bits;
    gq_layer l = {.bits = q->bits, .group_size = q->group_size};
    l.n_in = awq ? qw->shape[0] : qw->shape[0] * pack;
    l.n_out = awq ? qw->shape[1] * pack : qw->shape[1];
    if (gq_layer_check(&l, awq, base)) return -1;
    const int64_t n_groups = gq_layer_n_groups(&l);
    const st_tensor *qz = quant_part(s, base, "qzeros", ST_I32, 2, n_groups, l.n_out / pack);
    const st_tensor *sc = qz ? quant_part(s, base, "scales", ST_F16, 2, n_groups, l.n_out) : NULL;
    if (!sc) return -1;
    char name[256];
    snprintf(name, sizeof name, "%s.g_idx", base);
    const st_tensor *gi = awq ? NULL : st_find(s->st, name);
    if (gi && !quant_part(s, base, "g_idx", ST_I32, 1, l.n_in, 0)) return -1;
    if (!awq && q->desc_act && !gi) return err_set("missing tensor '%s' (desc_act is set)", name);

    const size_t row_bytes = gq_layer_row_bytes(&l);
    void *out = tensors_alloc(tt, (size_t)l.n_out * row_bytes);
    int32_t *perm = awq ? NULL : tensors_alloc(tt, (size_t)l.n_in * sizeof *perm);
    if (!out || (!awq && !perm)) return -1;
    int rc = awq ? awq_to_gq(&l, qw->data, qz->data, sc->data, out, base)
                 : gptq_to_gq(&l, q->zeros_plus_one, qw->data, qz->data, sc->data, gi ? gi->data : NULL, out, perm,
                              base);
    if (rc < 0) return -1;
    const int64_t ne[2] = {l.n_in, l.n_out};
    model_tensor *t = tensors_add(tt, gguf, (uint32_t)gq_layer_type(&l), 2, ne, out, (size_t)l.n_out * row_bytes);
    if (!t) return -1;
    t->perm = rc == 1 ? perm : NULL;
    return 0;
}

/* A linear layer `base` (no suffix): quantized if base.qweight exists. */
static int add_linear(const hf_source *s, tensor_table *tt, const char *gguf_base, const char *base,
                      const hf_config *cfg) {
    char name[256], gguf[128];
    snprintf(gguf, sizeof gguf, "%s.weight", gguf_base);
    snprintf(name, sizeof name, "%s.qweight", base);
    const st_tensor *qw = st_find(s->st, name);
    if (qw) return add_quantized(s, tt, gguf, base, qw, cfg);
    snprintf(name, sizeof name, "%s.weight", base);
    const st_tensor *w = st_find(s->st, name);
    return w ? add_matrix(tt, gguf, w) : 0; /* absent: the binder names what is missing */
}

/* pattern with its "%d" (if any) replaced by expert. */
static void put_expert(char *out, size_t cap, const char *pattern, int expert) {
    const char *at = strstr(pattern, "%d");
    if (!at || expert < 0) snprintf(out, cap, "%s", pattern);
    else snprintf(out, cap, "%.*s%d%s", (int)(at - pattern), pattern, expert, at + 2);
}

/* expert: the %d of an expert's names (k_expert), else -1. */
static int add_pair(const hf_source *s, tensor_table *tt, int il, const name_pair *p, const hf_config *cfg,
                    int expert) {
    char gguf[128], hf[256], g_suffix[64], h_suffix[128];
    put_expert(g_suffix, sizeof g_suffix, p->gguf, expert);
    put_expert(h_suffix, sizeof h_suffix, p->hf, expert);
    snprintf(gguf, sizeof gguf, "blk.%d.%s", il, g_suffix);
    snprintf(hf, sizeof hf, "%slayers.%d.%s", s->prefix, il, h_suffix);
    if (p->k == K_LINEAR) return add_linear(s, tt, gguf, hf, cfg);
    const st_tensor *t = st_find(s->st, hf);
    if (!t) return 0;
    if (p->k == K_MATRIX) return add_matrix(tt, gguf, t);
    return add_vector(tt, gguf, t, p->k == K_NORM && cfg->norm_plus_one);
}

/* transformers 5's fused experts, [n_expert][rows][cols] without ".weight":
 * mlp.experts.gate_up_proj (each expert's gate rows, then its up rows) and
 * mlp.experts.down_proj, as llama.cpp's merged 3-D tensors. */
static int add_fused_experts(const hf_source *s, tensor_table *tt, int il) {
    static const char *const names[2][2] = {{"gate_up_proj", "ffn_gate_up_exps.weight"},
                                            {"down_proj", "ffn_down_exps.weight"}};
    for (int i = 0; i < 2; i++) {
        char hf[256], gguf[96];
        snprintf(hf, sizeof hf, "%slayers.%d.mlp.experts.%s", s->prefix, il, names[i][0]);
        const st_tensor *t = st_find(s->st, hf);
        if (!t) continue;
        uint32_t type = WT_F32;
        if (float_type(t, &type)) return -1;
        if (t->n_dims != 3) return err_set("tensor '%s' has %d dimensions, expected 3", t->name, t->n_dims);
        snprintf(gguf, sizeof gguf, "blk.%d.%s", il, names[i][1]);
        const int64_t ne[3] = {t->shape[2], t->shape[1], t->shape[0]};
        const void *data = aligned_data(tt, t);
        if (!data || !tensors_add(tt, gguf, type, 3, ne, data, t->nbytes)) return -1;
    }
    return 0;
}

/* dst[e][j][i] = src[e][i][col0 + j * col_step] for j < n_cols, i < n_rows:
 * each expert's [n_rows][src_cols] block transposed (a column subset), in
 * elements of esz bytes. */
static void transpose_experts(uint8_t *dst, const uint8_t *src, int64_t n_exp, int64_t n_rows, int64_t src_cols,
                              int64_t col0, int64_t col_step, int64_t n_cols, size_t esz) {
    for (int64_t e = 0; e < n_exp; e++)
        for (int64_t j = 0; j < n_cols; j++)
            for (int64_t i = 0; i < n_rows; i++)
                memcpy(dst + ((e * n_cols + j) * n_rows + i) * esz,
                       src + ((e * n_rows + i) * src_cols + col0 + j * col_step) * esz, esz);
}

/* A [n_exp][rows][cols] expert tensor of the wanted shape, or an error. */
static const st_tensor *expert_tensor(const hf_source *s, int il, const char *what, int n_dims, int64_t d0, int64_t d1,
                                      int64_t d2) {
    char hf[256];
    snprintf(hf, sizeof hf, "%slayers.%d.mlp.experts.%s", s->prefix, il, what);
    const st_tensor *t = st_find(s->st, hf);
    if (!t) {
        err_set("missing tensor '%s'", hf);
        return NULL;
    }
    if (t->n_dims != n_dims || t->shape[0] != d0 || t->shape[1] != d1 || (n_dims == 3 && t->shape[2] != d2)) {
        err_set("tensor '%s' does not have gpt-oss's expert shape [%" PRId64 ", %" PRId64 "%s]", hf, d0, d1,
                n_dims == 3 ? ", ..." : "");
        return NULL;
    }
    return t;
}

/* gpt-oss's experts as transformers holds them: gate_up_proj [n_expert]
 * [n_embd][2 n_ff] with gate and up columns interleaved (gate even, up odd),
 * down_proj [n_expert][n_ff][n_embd], both multiplied from the left (x @ W),
 * and their biases [n_expert][2 n_ff] (interleaved too) and [n_expert]
 * [n_embd]. They become llama.cpp's ffn_{gate,up,down}_exps and their .bias,
 * as its converter splits and transposes them (copies, in the file's dtype).
 * Checkpoints that ship the experts in MXFP4 (*_blocks, *_scales) are for
 * llama.cpp's converter, which repacks them into GGUF's MXFP4. */
static int add_gpt_oss_experts(const hf_source *s, tensor_table *tt, const model_hparams *hp, int il) {
    const int64_t E = hp->n_expert, d = hp->n_embd, ff = hp->n_ff_exp;
    char name[256];
    snprintf(name, sizeof name, "%slayers.%d.mlp.experts.gate_up_proj_blocks", s->prefix, il);
    if (st_find(s->st, name))
        return err_set("'%s': gpt-oss's MXFP4 experts load from GGUF (llama.cpp's convert_hf_to_gguf.py keeps them "
                       "in MXFP4), not from the safetensors folder", name);
    const st_tensor *gu = expert_tensor(s, il, "gate_up_proj", 3, E, d, 2 * ff);
    const st_tensor *dn = gu ? expert_tensor(s, il, "down_proj", 3, E, ff, d) : NULL;
    const st_tensor *gub = dn ? expert_tensor(s, il, "gate_up_proj_bias", 2, E, 2 * ff, 0) : NULL;
    const st_tensor *dnb = gub ? expert_tensor(s, il, "down_proj_bias", 2, E, d, 0) : NULL;
    if (!dnb) return -1;
    static const char *const mats[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    static const char *const biases[3] = {"ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"};
    for (int k = 0; k < 3; k++) {
        const st_tensor *w = k < 2 ? gu : dn, *b = k < 2 ? gub : dnb;
        uint32_t type = WT_F32, btype = WT_F32;
        if (float_type(w, &type) || float_type(b, &btype)) return -1;
        const size_t esz = st_dtype_size(w->dtype), besz = st_dtype_size(b->dtype);
        const int64_t n_in = k < 2 ? d : ff, n_out = k < 2 ? ff : d;
        const int64_t col0 = k == 1 ? 1 : 0, step = k < 2 ? 2 : 1, src_cols = k < 2 ? 2 * ff : d;
        uint8_t *wm = tensors_alloc(tt, (size_t)(E * n_in * n_out) * esz);
        uint8_t *bv = tensors_alloc(tt, (size_t)(E * n_out) * besz);
        if (!wm || !bv) return -1;
        transpose_experts(wm, w->data, E, n_in, src_cols, col0, step, n_out, esz);
        transpose_experts(bv, b->data, E, 1, src_cols, col0, step, n_out, besz); /* a bias: a 1-row block each */
        const int64_t ne3[3] = {n_in, n_out, E}, ne2[2] = {n_out, E};
        snprintf(name, sizeof name, "blk.%d.%s", il, mats[k]);
        if (!tensors_add(tt, name, type, 3, ne3, wm, (size_t)(E * n_in * n_out) * esz)) return -1;
        snprintf(name, sizeof name, "blk.%d.%s", il, biases[k]);
        if (!tensors_add(tt, name, btype, 2, ne2, bv, (size_t)(E * n_out) * besz)) return -1;
    }
    return 0;
}

/* DeepSeek-V2's kv_b_proj [n_head][nope + v][kv_rank] split as llama.cpp's
 * converter splits it: attn_k_b [n_head][kv_rank][nope] (each head's nope
 * rows transposed) and attn_v_b [n_head][v][kv_rank] (copies, in the
 * file's dtype). */
static int add_mla_kv_b(const hf_source *s, tensor_table *tt, const model_hparams *hp, int il) {
    char hf[256], name[96];
    snprintf(hf, sizeof hf, "%slayers.%d.self_attn.kv_b_proj.weight", s->prefix, il);
    const st_tensor *t = st_find(s->st, hf);
    const int64_t H = hp->n_head, nope = hp->mla_nope_dim, vd = hp->mla_v_dim, r = hp->mla_kv_rank;
    if (!t) return err_set("missing tensor '%s' (latent attention needs it; a quantized one is not supported)", hf);
    uint32_t type = WT_F32;
    if (float_type(t, &type)) return -1;
    if (t->n_dims != 2 || t->shape[0] != H * (nope + vd) || t->shape[1] != r)
        return err_set("tensor '%s' does not have the shape [%" PRId64 ", %" PRId64 "] (heads x (nope + v dims), "
                       "kv_lora_rank)", hf, H * (nope + vd), r);
    const size_t esz = st_dtype_size(t->dtype);
    uint8_t *kb = tensors_alloc(tt, (size_t)(H * r * nope) * esz), *vb = tensors_alloc(tt, (size_t)(H * vd * r) * esz);
    if (!kb || !vb) return -1;
    const uint8_t *src = t->data;
    for (int64_t h = 0; h < H; h++) {
        const uint8_t *head = src + (size_t)(h * (nope + vd) * r) * esz;
        transpose_experts(kb + (size_t)(h * r * nope) * esz, head, 1, nope, r, 0, 1, r, esz);
        memcpy(vb + (size_t)(h * vd * r) * esz, head + (size_t)(nope * r) * esz, (size_t)(vd * r) * esz);
    }
    const int64_t ne_k[3] = {nope, r, H}, ne_v[3] = {r, vd, H};
    snprintf(name, sizeof name, "blk.%d.attn_k_b.weight", il);
    if (!tensors_add(tt, name, type, 3, ne_k, kb, (size_t)(H * r * nope) * esz)) return -1;
    snprintf(name, sizeof name, "blk.%d.attn_v_b.weight", il);
    return tensors_add(tt, name, type, 3, ne_v, vb, (size_t)(H * vd * r) * esz) ? 0 : -1;
}

/* --- the folder ---------------------------------------------------------------- */

static int find_prefix(hf_source *s) {
    static const char *const prefixes[] = {"model.", "language_model.model.", "model.language_model.", ""};
    for (size_t i = 0; i < COUNT(prefixes); i++) {
        char name[128];
        snprintf(name, sizeof name, "%sembed_tokens.weight", prefixes[i]);
        if (st_find(s->st, name)) {
            snprintf(s->prefix, sizeof s->prefix, "%s", prefixes[i]);
            const char *head = !strcmp(prefixes[i], "language_model.model.") ? "language_model.lm_head.weight"
                                                                             : "lm_head.weight";
            snprintf(s->head, sizeof s->head, "%s", head);
            return 0;
        }
    }
    return err_set("no token embedding (model.embed_tokens.weight) in the checkpoint");
}

static int add_globals(const hf_source *s, tensor_table *tt, const model_hparams *hp, const hf_config *cfg) {
    char name[128];
    snprintf(name, sizeof name, "%sembed_tokens.weight", s->prefix);
    if (add_matrix(tt, "token_embd.weight", st_find(s->st, name))) return -1;
    snprintf(name, sizeof name, "%snorm.weight", s->prefix);
    const st_tensor *norm = st_find(s->st, name);
    if (norm && add_vector(tt, "output_norm.weight", norm, cfg->norm_plus_one)) return -1;
    if (!cfg->tie_word_embeddings) {
        char base[64];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(s->head) - strlen(".weight")), s->head);
        snprintf(name, sizeof name, "%s.qweight", base);
        if (!st_find(s->st, s->head) && !st_find(s->st, name))
            return err_set("missing tensor '%s' (config.json says tie_word_embeddings is false)", s->head);
        if (add_linear(s, tt, "output", base, cfg)) return -1;
    }
    if (cfg->longrope) {
        const int64_t ne[1] = {hp->rope_dim / 2};
        const float *src[2] = {cfg->rope_long, cfg->rope_short};
        const char *names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
        for (int k = 0; k < 2; k++) {
            float *f = tensors_alloc(tt, (size_t)ne[0] * sizeof *f);
            if (!f) return -1;
            memcpy(f, src[k], (size_t)ne[0] * sizeof *f);
            if (!tensors_add(tt, names[k], WT_F32, 1, ne, f, (size_t)ne[0] * sizeof *f)) return -1;
        }
    }
    if (cfg->llama3_rope) {
        const int64_t ne[1] = {hp->rope_dim / 2};
        float *f = tensors_alloc(tt, (size_t)ne[0] * sizeof *f);
        if (!f) return -1;
        hf_llama3_rope_factors(hp, cfg, f);
        if (!tensors_add(tt, "rope_freqs.weight", WT_F32, 1, ne, f, (size_t)ne[0] * sizeof *f)) return -1;
    }
    return 0;
}

hf_source *hf_source_open(const char *dir, const model_hparams *hp, const hf_config *cfg, tensor_table *tt) {
    hf_source *s = calloc(1, sizeof *s);
    if (!s) {
        err_oom("out of memory");
        return NULL;
    }
    const arch_traits *tr = hp->traits;
    s->norms = !tr->post_norms ? k_norms_pre : tr->no_pre_norms ? k_norms_post : k_norms_pre_post;
    s->n_norms = !tr->post_norms ? COUNT(k_norms_pre) : tr->no_pre_norms ? COUNT(k_norms_post) : COUNT(k_norms_pre_post);
    if (tr->ffn_norm) s->norms = k_norms_pre_as_post_attention, s->n_norms = COUNT(k_norms_pre_as_post_attention);
    s->st = st_open_dir(dir);
    if (!s->st || find_prefix(s) || add_globals(s, tt, hp, cfg)) goto fail;
    size_t n_family;
    const name_pair *family = family_pairs(s, &n_family);
    for (int il = 0; il < hp->n_layer; il++) {
        for (size_t i = 0; i < COUNT(k_layer_common); i++)
            if (add_pair(s, tt, il, &k_layer_common[i], cfg, -1)) goto fail;
        for (size_t i = 0; i < n_family; i++)
            if (add_pair(s, tt, il, &family[i], cfg, -1)) goto fail;
        if (tr->mla && add_mla_kv_b(s, tt, hp, il)) goto fail;
        if (hp->n_expert == 0 || hp->dense_ffn[il]) continue;
        for (size_t i = 0; i < COUNT(k_layer_moe); i++)
            if (add_pair(s, tt, il, &k_layer_moe[i], cfg, -1)) goto fail;
        for (int e = 0; e < hp->n_expert; e++)
            for (size_t i = 0; i < COUNT(k_expert); i++)
                if (add_pair(s, tt, il, &k_expert[i], cfg, e)) goto fail;
        if (!strcmp(cfg->model_type, "gpt_oss") ? add_gpt_oss_experts(s, tt, hp, il) : add_fused_experts(s, tt, il))
            goto fail;
    }
    if (tensors_finish(tt)) goto fail;
    return s;
fail:
    hf_source_close(s);
    return NULL;
}

void hf_source_close(hf_source *s) {
    if (!s) return;
    st_close(s->st);
    free(s);
}
