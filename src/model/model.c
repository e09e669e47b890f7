/* Model loading. The source fills the tensor table under llama.cpp's names: a
 * GGUF file's tensors as they are, or a Hugging Face folder's renamed and
 * converted (hf_source.c), with the hyper-parameters from the GGUF metadata or
 * config.json. Then every tensor the family needs is looked up by name, its
 * shape and type checked, and bound: matrices as views, norm weights and
 * biases (tiny and read often) converted to f32 arrays the table owns. */
#include "model/model.h"

#include "format/gguf.h"
#include "model/hf_config.h"
#include "model/hf_source.h"
#include "model/shard.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The tensor's name in the file, for messages. */
static const char *file_name(const model *m, const char *name, char *buf, size_t cap) {
    if (!m->hf) return name;
    hf_source_name(m->hf, name, buf, cap);
    return buf;
}

static const model_tensor *find_tensor(const model *m, const char *name, bool required) {
    const model_tensor *t = tensors_find(&m->tensors, name);
    char buf[256];
    if (!t && required) err_set("missing required tensor '%s'", file_name(m, name, buf, sizeof buf));
    return t;
}

static int check_type(const model *m, const model_tensor *t, bool need_dot) {
    const wtype_traits *tr = wtype_get((wtype)t->type);
    char buf[256];
    if (!tr || (need_dot && !tr->vec_dot))
        return err_set("tensor '%s' has unsupported type %s", file_name(m, t->name, buf, sizeof buf),
                       wtype_name(t->type));
    return 0;
}

/* Binds a matrix of n_out rows by n_in columns. */
static int bind_weight(model *m, weight *w, const char *name, int64_t n_in, int64_t n_out, bool required) {
    memset(w, 0, sizeof *w);
    const model_tensor *t = find_tensor(m, name, required);
    if (!t) return required ? -1 : 0;
    char buf[256];
    if (t->n_dims > 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return err_set("tensor '%s' has shape [%" PRId64 ", %" PRId64 "%s], expected [%" PRId64 ", %" PRId64
                       "] (input, output)",
                       file_name(m, name, buf, sizeof buf), t->ne[0], t->ne[1], t->n_dims > 2 ? ", ..." : "", n_in,
                       n_out);
    if (check_type(m, t, true)) return -1;
    w->name = t->name;
    w->data = t->data;
    w->type = (wtype)t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = wtype_row_size(t->type, n_in);
    w->perm = t->perm;
    if (w->row_bytes == 0 || w->row_bytes * (size_t)n_out > t->nbytes)
        return err_set("tensor '%s': %s rows of %" PRId64 " elements do not fit its data",
                       file_name(m, name, buf, sizeof buf), wtype_name(t->type), n_in);
    return 0;
}

/* Binds rows [row0, row0 + n_out) of a fused matrix of total_out rows:
 * Phi-3's attn_qkv (q, k, v rows one after the other) and ffn_up (gate rows,
 * then up rows), as views into it. */
static int bind_part(model *m, weight *w, const char *name, int64_t n_in, int64_t row0, int64_t n_out,
                     int64_t total_out) {
    if (bind_weight(m, w, name, n_in, total_out, true)) return -1;
    w->data = (const uint8_t *)w->data + (size_t)row0 * w->row_bytes;
    w->n_out = n_out;
    if (w->perm) return err_set("tensor '%s': act-order weights cannot be split into q/k/v or gate/up", name);
    return 0;
}

/* q, k, v from their own tensors, or from a fused attn_qkv (Phi-3). */
static int bind_projections(model *m, layer_weights *l, int il, int64_t q_dim, int64_t k_dim, int64_t v_dim) {
    const model_hparams *hp = &m->hp;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    if (!tensors_find(&m->tensors, NAME("attn_q.weight")) && tensors_find(&m->tensors, NAME("attn_qkv.weight"))) {
        const int64_t all = q_dim + k_dim + v_dim;
        if (bind_part(m, &l->wq, name, hp->n_embd, 0, q_dim, all) ||
            bind_part(m, &l->wk, name, hp->n_embd, q_dim, k_dim, all) ||
            bind_part(m, &l->wv, name, hp->n_embd, q_dim + k_dim, v_dim, all))
            return -1;
    } else if (bind_weight(m, &l->wq, NAME("attn_q.weight"), hp->n_embd, q_dim, true) ||
               bind_weight(m, &l->wk, NAME("attn_k.weight"), hp->n_embd, k_dim, true) ||
               bind_weight(m, &l->wv, NAME("attn_v.weight"), hp->n_embd, v_dim, true)) {
        return -1;
    }
#undef NAME
    return 0;
}

static int bind_vector(model *m, const float **out, const char *name, int64_t n, bool required);

/* The experts of layer il: each a view into the merged 3-D tensors
 * (ffn_gate_exps, ffn_up_exps, ffn_down_exps, or ffn_gate_up_exps with each
 * expert's gate rows before its up rows), or the per-expert 2-D tensors
 * ffn_gate.E, ffn_up.E, ffn_down.E (older Mixtral files, and Hugging Face
 * folders). A quantized row never straddles two experts: blocks run along
 * the input dimension only. */
static int bind_views(model *m, weight *ws, const char *name, int64_t n_in, int64_t row0, int64_t n_out,
                      int64_t rows_per_expert, int n_exp) {
    const model_tensor *t = find_tensor(m, name, true);
    if (!t) return -1;
    char buf[256];
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != rows_per_expert || t->ne[2] != n_exp)
        return err_set("tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                       ", %" PRId64 ", %d] (input, output, expert)",
                       file_name(m, name, buf, sizeof buf), t->ne[0], t->ne[1], t->ne[2], n_in, rows_per_expert,
                       n_exp);
    if (check_type(m, t, true)) return -1;
    if (t->perm) return err_set("tensor '%s': act-order expert weights are not supported", name);
    const size_t row_bytes = wtype_row_size(t->type, n_in);
    if (row_bytes == 0 || row_bytes * (size_t)rows_per_expert * (size_t)n_exp > t->nbytes)
        return err_set("tensor '%s': %s rows of %" PRId64 " elements do not fit its data",
                       file_name(m, name, buf, sizeof buf), wtype_name(t->type), n_in);
    for (int e = 0; e < n_exp; e++)
        ws[e] = (weight){.name = t->name,
                         .data = (const uint8_t *)t->data + ((size_t)e * (size_t)rows_per_expert + (size_t)row0) * row_bytes,
                         .type = (wtype)t->type,
                         .n_in = n_in,
                         .n_out = n_out,
                         .row_bytes = row_bytes};
    return 0;
}

static int bind_expert_views(model *m, weight *ws, const char *name, int64_t n_in, int64_t row0, int64_t n_out,
                             int64_t rows_per_expert) {
    return bind_views(m, ws, name, n_in, row0, n_out, rows_per_expert, m->hp.n_expert);
}

/* Latent attention (DeepSeek-V2): the query (direct, or low-rank through
 * q_a, its norm and q_b), the latent and rope key (kv_a_mqa, the latent's
 * norm), and per head k_b (latent from the nope query dims, attn_k_b
 * [nope][kv_rank][n_head]) and v_b (value dims from the latent, attn_v_b
 * [kv_rank][v][n_head]), as llama.cpp's converter splits kv_b_proj. */
static int bind_mla(model *m, layer_weights *l, int il) {
    const model_hparams *hp = &m->hp;
    mla_weights *w = &l->mla;
    const int64_t e = hp->n_embd, H = hp->n_head, r = hp->mla_kv_rank, qk = hp->mla_nope_dim + hp->rope_dim;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    if (hp->mla_q_rank > 0 ? bind_weight(m, &w->q_a, NAME("attn_q_a.weight"), e, hp->mla_q_rank, true) ||
                                 bind_vector(m, &w->q_a_norm, NAME("attn_q_a_norm.weight"), hp->mla_q_rank, true) ||
                                 bind_weight(m, &w->q_b, NAME("attn_q_b.weight"), hp->mla_q_rank, H * qk, true)
                           : bind_weight(m, &l->wq, NAME("attn_q.weight"), e, H * qk, true))
        return -1;
    if (bind_weight(m, &w->kv_a, NAME("attn_kv_a_mqa.weight"), e, r + hp->rope_dim, true) ||
        bind_vector(m, &w->kv_a_norm, NAME("attn_kv_a_norm.weight"), r, true))
        return -1;
    if (!tensors_find(&m->tensors, NAME("attn_k_b.weight")) && tensors_find(&m->tensors, NAME("attn_kv_b.weight")))
        return err_set("'%s': a DeepSeek GGUF from an older converter (attn_kv_b, not attn_k_b and attn_v_b); convert "
                       "it again with a recent convert_hf_to_gguf.py", name);
    w->k_b = tensors_alloc(&m->tensors, 2 * (size_t)H * sizeof *w->k_b);
    if (!w->k_b) return -1;
    w->v_b = w->k_b + H;
    if (bind_views(m, w->k_b, NAME("attn_k_b.weight"), hp->mla_nope_dim, 0, r, r, (int)H) ||
        bind_views(m, w->v_b, NAME("attn_v_b.weight"), r, 0, hp->mla_v_dim, hp->mla_v_dim, (int)H))
        return -1;
#undef NAME
    return 0;
}

static int bind_floats(model *m, const float **out, const char *name, int64_t ne0, int64_t ne1, bool required);

/* gpt-oss's router and expert biases, and DeepSeek-V3's selection bias. */
static int bind_expert_biases(model *m, moe_weights *w, int il) {
    const model_hparams *hp = &m->hp;
    const bool req = hp->traits->biases;
    char name[96];
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    if (bind_floats(m, &w->router_bias, NAME("blk.%d.ffn_gate_inp.bias", il), hp->n_expert, 1, req) ||
        bind_floats(m, &w->gate_bias, NAME("blk.%d.ffn_gate_exps.bias", il), hp->n_ff_exp, hp->n_expert, req) ||
        bind_floats(m, &w->up_bias, NAME("blk.%d.ffn_up_exps.bias", il), hp->n_ff_exp, hp->n_expert, req) ||
        bind_floats(m, &w->down_bias, NAME("blk.%d.ffn_down_exps.bias", il), hp->n_embd, hp->n_expert, req) ||
        bind_floats(m, &w->select_bias, NAME("blk.%d.exp_probs_b.bias", il), hp->n_expert, 1, false))
        return -1;
#undef NAME
    if (!w->gate_bias != !w->up_bias || !w->up_bias != !w->down_bias)
        return err_set("layer %d has only some of the experts' gate, up and down biases", il);
    return 0;
}

static int bind_experts(model *m, moe_weights *w, int il) {
    const model_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, ff = hp->n_ff_exp;
    char name[96];
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    if (bind_weight(m, &w->router, NAME("blk.%d.ffn_gate_inp.weight", il), e, hp->n_expert, true) ||
        bind_expert_biases(m, w, il))
        return -1;
    const size_t n = (size_t)hp->n_expert;
    w->gate = tensors_alloc(&m->tensors, 3 * n * sizeof *w->gate);
    if (!w->gate) return -1;
    w->up = w->gate + n, w->down = w->gate + 2 * n;
    if (tensors_find(&m->tensors, NAME("blk.%d.ffn_gate_up_exps.weight", il))) {
        if (bind_expert_views(m, w->gate, name, e, 0, ff, 2 * ff) ||
            bind_expert_views(m, w->up, name, e, ff, ff, 2 * ff))
            return -1;
    } else if (tensors_find(&m->tensors, NAME("blk.%d.ffn_gate_exps.weight", il))) {
        if (bind_expert_views(m, w->gate, name, e, 0, ff, ff) ||
            bind_expert_views(m, w->up, NAME("blk.%d.ffn_up_exps.weight", il), e, 0, ff, ff))
            return -1;
    } else {
        for (int x = 0; x < hp->n_expert; x++)
            if (bind_weight(m, &w->gate[x], NAME("blk.%d.ffn_gate.%d.weight", il, x), e, ff, true) ||
                bind_weight(m, &w->up[x], NAME("blk.%d.ffn_up.%d.weight", il, x), e, ff, true) ||
                bind_weight(m, &w->down[x], NAME("blk.%d.ffn_down.%d.weight", il, x), ff, e, true))
                return -1;
    }
    if (!w->down[0].data && bind_expert_views(m, w->down, NAME("blk.%d.ffn_down_exps.weight", il), ff, 0, e, e))
        return -1;
    if (hp->n_ff_shexp > 0) {
        const int64_t sh = hp->n_ff_shexp;
        if (bind_weight(m, &w->sh_gate, NAME("blk.%d.ffn_gate_shexp.weight", il), e, sh, true) ||
            bind_weight(m, &w->sh_up, NAME("blk.%d.ffn_up_shexp.weight", il), e, sh, true) ||
            bind_weight(m, &w->sh_down, NAME("blk.%d.ffn_down_shexp.weight", il), sh, e, true) ||
            bind_vector(m, &w->sh_router, NAME("blk.%d.ffn_gate_inp_shexp.weight", il), e, false))
            return -1;
    }
#undef NAME
    return 0;
}

/* A dense FFN: gate and up from ffn_gate and ffn_up, or from an ffn_up of
 * twice the rows (Phi-3); or, in a mixture of experts' layer (one with a
 * router, ffn_gate_inp), the experts. */
static int bind_ffn(model *m, layer_weights *l, int il) {
    const model_hparams *hp = &m->hp;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    if (hp->n_expert > 0 && !hp->dense_ffn[il] && tensors_find(&m->tensors, NAME("ffn_gate_inp.weight")))
        return bind_experts(m, &l->moe, il);
    /* Fused only where ffn_up has both halves: a file missing its ffn_gate is told so. */
    const model_tensor *up = tensors_find(&m->tensors, NAME("ffn_up.weight"));
    if (!tensors_find(&m->tensors, NAME("ffn_gate.weight")) && up && up->ne[1] == 2 * (int64_t)hp->n_ff) {
        NAME("ffn_up.weight");
        if (bind_part(m, &l->w_gate, name, hp->n_embd, 0, hp->n_ff, 2 * (int64_t)hp->n_ff) ||
            bind_part(m, &l->w_up, name, hp->n_embd, hp->n_ff, hp->n_ff, 2 * (int64_t)hp->n_ff))
            return -1;
    } else if (bind_weight(m, &l->w_gate, NAME("ffn_gate.weight"), hp->n_embd, hp->n_ff, true) ||
               bind_weight(m, &l->w_up, NAME("ffn_up.weight"), hp->n_embd, hp->n_ff, true)) {
        return -1;
    }
    if (bind_weight(m, &l->w_down, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, true)) return -1;
#undef NAME
    return 0;
}

/* Binds a [ne1][ne0] float table (ne1 = 1: a vector), converted to f32. */
static int bind_floats(model *m, const float **out, const char *name, int64_t ne0, int64_t ne1, bool required) {
    if (ne1 == 1) return bind_vector(m, out, name, ne0, required);
    *out = NULL;
    const model_tensor *t = find_tensor(m, name, required);
    if (!t) return required ? -1 : 0;
    char buf[256];
    if (t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        return err_set("tensor '%s' has shape [%" PRId64 ", %" PRId64 "] in %d dimensions, expected [%" PRId64
                       ", %" PRId64 "]", file_name(m, name, buf, sizeof buf), t->ne[0], t->ne[1], t->n_dims, ne0, ne1);
    if (check_type(m, t, false)) return -1;
    float *v = tensors_alloc(&m->tensors, (size_t)(ne0 * ne1) * sizeof *v);
    if (!v) return -1;
    wtype_get((wtype)t->type)->to_float(t->data, v, ne0 * ne1);
    *out = v;
    return 0;
}

/* Binds a vector of n elements, converted to f32. */
static int bind_vector(model *m, const float **out, const char *name, int64_t n, bool required) {
    *out = NULL;
    const model_tensor *t = find_tensor(m, name, required);
    if (!t) return required ? -1 : 0;
    char buf[256];
    if (!(t->n_dims == 1 || (t->n_dims == 2 && t->ne[1] == 1)) || t->ne[0] != n)
        return err_set("tensor '%s' has %" PRId64 " elements in %d dimensions, expected a vector of %" PRId64,
                       file_name(m, name, buf, sizeof buf), t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3], t->n_dims,
                       n);
    if (check_type(m, t, false)) return -1;
    float *v = tensors_alloc(&m->tensors, (size_t)n * sizeof *v);
    if (!v) return -1;
    wtype_get((wtype)t->type)->to_float(t->data, v, n);
    *out = v;
    return 0;
}

static int bind_layer(model *m, int il) {
    const model_hparams *hp = &m->hp;
    const arch_traits *tr = hp->traits;
    layer_weights *l = &m->w.layers[il];
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim_k;
    const int64_t k_dim = (int64_t)hp->n_head_kv * hp->head_dim_k;
    const int64_t v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const int64_t o_dim = (int64_t)hp->n_head * (tr->mla ? hp->mla_v_dim : hp->head_dim_v);
    /* Q/K norms per head, or over the whole projection (OLMo 2). */
    const bool qk_all = tr->qk_norm == QK_NORM_ALL, qk = tr->qk_norm != QK_NORM_NONE;
    const bool pre = !tr->no_pre_norms;
    /* gpt-oss's MLP input norm is called post_attention_norm; it then has no post-norm. */
    const char *ffn_norm = tr->ffn_norm ? tr->ffn_norm : "ffn_norm.weight";
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    if (bind_vector(m, &l->attn_norm, NAME("attn_norm.weight"), hp->n_embd, pre) ||
        (tr->mla ? bind_mla(m, l, il) : bind_projections(m, l, il, q_dim, k_dim, v_dim)) ||
        bind_weight(m, &l->wo, NAME("attn_output.weight"), o_dim, hp->n_embd, true) ||
        bind_vector(m, &l->bq, NAME("attn_q.bias"), q_dim, tr->qkv_bias) ||
        bind_vector(m, &l->bk, NAME("attn_k.bias"), k_dim, tr->qkv_bias) ||
        bind_vector(m, &l->bv, NAME("attn_v.bias"), v_dim, tr->qkv_bias) ||
        bind_vector(m, &l->q_norm, NAME("attn_q_norm.weight"), qk_all ? q_dim : hp->head_dim_k, qk) ||
        bind_vector(m, &l->k_norm, NAME("attn_k_norm.weight"), qk_all ? k_dim : hp->head_dim_k, qk) ||
        bind_vector(m, &l->bo, NAME("attn_output.bias"), hp->n_embd, tr->biases) ||
        bind_vector(m, &l->sinks, NAME("attn_sinks.weight"), hp->n_head, tr->biases) ||
        (!tr->ffn_norm &&
         bind_vector(m, &l->post_attn_norm, NAME("post_attention_norm.weight"), hp->n_embd, tr->post_norms)) ||
        bind_vector(m, &l->ffn_norm, NAME(ffn_norm), hp->n_embd, pre) ||
        bind_ffn(m, l, il) ||
        bind_vector(m, &l->post_ffn_norm, NAME("post_ffw_norm.weight"), hp->n_embd, tr->post_norms))
        return -1;
#undef NAME
    /* Q/K norms come as a pair or not at all; a lone one would be silently half-used. */
    if (!l->q_norm != !l->k_norm) return err_set("layer %d has only one of attn_q_norm and attn_k_norm", il);
    if (!l->post_attn_norm != !l->post_ffn_norm)
        return err_set("layer %d has only one of post_attention_norm and post_ffw_norm", il);
    return 0;
}

static int bind_all(model *m) {
    model_hparams *hp = &m->hp;
    const model_tensor *emb = find_tensor(m, "token_embd.weight", true);
    if (!emb) return -1;
    char buf[256];
    if (emb->n_dims != 2 || emb->ne[0] != hp->n_embd)
        return err_set("tensor '%s' has rows of %" PRId64 ", expected n_embd = %d",
                       file_name(m, emb->name, buf, sizeof buf), emb->ne[0], hp->n_embd);
    if (emb->ne[1] > (1 << 24)) return err_set("vocabulary of %" PRId64 " tokens is too large", emb->ne[1]);
    hp->n_vocab = (int)emb->ne[1];
    if (bind_weight(m, &m->w.tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, true) ||
        bind_vector(m, &m->w.output_norm, "output_norm.weight", hp->n_embd, true) ||
        bind_weight(m, &m->w.output, "output.weight", hp->n_embd, hp->n_vocab, false) ||
        bind_vector(m, &m->w.rope_freqs, "rope_freqs.weight", hp->rope_dim / 2, false) ||
        bind_vector(m, &m->w.rope_long, "rope_factors_long.weight", hp->rope_dim / 2, false) ||
        bind_vector(m, &m->w.rope_short, "rope_factors_short.weight", hp->rope_dim / 2, false))
        return -1;
    /* Rope frequency factors divide the frequencies: each must be a finite
     * positive number, or every rotated position is NaN. */
    const char *names[] = {"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"};
    const float *factors[] = {m->w.rope_freqs, m->w.rope_long, m->w.rope_short};
    for (int k = 0; k < 3; k++)
        for (int i = 0; factors[k] && i < hp->rope_dim / 2; i++)
            if (!(factors[k][i] > 0) || !isfinite(factors[k][i]))
                return err_set("tensor '%s' holds %g at %d; rope frequency factors must be finite and positive",
                               names[k], (double)factors[k][i], i);
    if (!m->w.rope_long != !m->w.rope_short)
        return err_set("the model has only one of rope_factors_long and rope_factors_short");
    if (hp->rope_yarn_factor > 0) {
        if (m->w.rope_freqs || m->w.rope_long)
            return err_set("the model has YaRN rope scaling and rope frequency factor tensors; one or the other");
        float *f = tensors_alloc(&m->tensors, (size_t)(hp->rope_dim / 2) * sizeof *f);
        if (!f) return -1;
        rope_yarn_factors(hp, f);
        m->w.rope_freqs = f;
    }
    if (m->w.rope_long && hp->rope_orig_ctx < 1)
        return err_set("LongRoPE factors without the original context length (rope.scaling.original_context_length)");
    m->tied_output = m->w.output.data == NULL;
    if (m->tied_output) m->w.output = m->w.tok_embd;
    for (int il = 0; il < hp->n_layer; il++)
        if (bind_layer(m, il)) return -1;
    return 0;
}

static void count_params(model *m) {
    for (int64_t i = 0; i < m->tensors.n; i++) {
        const model_tensor *t = &m->tensors.v[i];
        m->weight_bytes += t->nbytes;
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
}

/* --- sources ----------------------------------------------------------------- */

/* An I32 tensor "<name>.perm" holds the input column order of an act-order
 * GQ tensor <name> (format/qgroup.h): attach it as that tensor's perm, after
 * checking it is a permutation of its row. */
static int attach_perms(model *m) {
    for (int64_t i = 0; i < m->tensors.n; i++) {
        const model_tensor *p = &m->tensors.v[i];
        const size_t len = strlen(p->name);
        if (len < 6 || strcmp(p->name + len - 5, ".perm")) continue;
        char base_name[300];
        snprintf(base_name, sizeof base_name, "%.*s", (int)(len - 5), p->name);
        /* The table owns its entries; find returns them const for binders. */
        model_tensor *base = (model_tensor *)tensors_find(&m->tensors, base_name);
        if (!base) return err_set("tensor '%s' permutes a tensor the file does not have", p->name);
        const int64_t n = base->ne[0];
        if (p->type != 26 /* I32 */ || p->n_dims != 1 || p->ne[0] != n)
            return err_set("tensor '%s' must be an I32 vector of %" PRId64 " elements", p->name, n);
        uint8_t *seen = calloc((size_t)n, 1);
        if (!seen) return err_oom("out of memory");
        const int32_t *perm = p->data;
        for (int64_t k = 0; k < n; k++) {
            int32_t v;
            memcpy(&v, perm + k, sizeof v);
            if (v < 0 || v >= n || seen[v]) {
                free(seen);
                return err_set("tensor '%s' is not a permutation of 0..%" PRId64, p->name, n - 1);
            }
            seen[v] = 1;
        }
        free(seen);
        base->perm = perm;
    }
    return 0;
}

static int load_gguf(model *m, const char *path) {
    m->gguf = gguf_open(path);
    if (!m->gguf) return -1;
    if (hparams_from_gguf(m->gguf, &m->hp)) return -1;
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(m->gguf, i);
        if (!tensors_add(&m->tensors, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes)) return -1;
    }
    if (tensors_finish(&m->tensors) || attach_perms(m) || bind_all(m)) return -1;
    m->tok = tokenizer_from_gguf(m->gguf);
    if (!m->tok) return -1;
    gguf_str s;
    if (gguf_get_str(m->gguf, "tokenizer.chat_template", &s)) m->chat_template = gguf_str_dup(s);
    m->name = gguf_get_str(m->gguf, "general.name", &s) ? gguf_str_dup(s) : strdup(m->hp.traits->name);
    return 0;
}

static int load_hf(model *m, const char *dir) {
    hf_config cfg;
    if (hf_config_load(dir, &m->hp, &cfg)) return -1;
    m->hf = hf_source_open(dir, &m->hp, &cfg, &m->tensors);
    if (!m->hf || bind_all(m)) return -1;
    m->tok = tokenizer_from_hf(dir);
    if (!m->tok || tokenizer_hf_chat_template(dir, &m->chat_template)) return -1;
    m->name = path_last_name(dir);
    return 0;
}

/* The matrices matmul multiplies: the output head, then each layer's (its
 * router and experts in a mixture of experts). With ws NULL, only counts. */
static int matmul_weights(model *m, weight **ws) {
    int n = 0;
#define PUT(w) (ws ? (void)(ws[n] = (w)) : (void)0, n++)
    PUT(&m->w.output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        layer_weights *l = &m->w.layers[il];
        weight *lw[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down,
                        &l->moe.router, &l->moe.sh_gate, &l->moe.sh_up, &l->moe.sh_down};
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++)
            if (lw[i]->data) PUT(lw[i]);
        for (int e = 0; l->moe.gate && e < m->hp.n_expert; e++) {
            PUT(&l->moe.gate[e]);
            PUT(&l->moe.up[e]);
            PUT(&l->moe.down[e]);
        }
    }
#undef PUT
    return n;
}

/* matmul_weights into an array the caller frees; NULL when out of memory. */
static weight **all_matmul_weights(model *m, int *n) {
    *n = matmul_weights(m, NULL);
    weight **ws = malloc((size_t)*n * sizeof *ws);
    if (ws) matmul_weights(m, ws);
    else err_oom("out of memory");
    return ws;
}

static bool repack_allowed(void) {
    const char *off = getenv("CLLM_NO_REPACK");
    return !(off && *off && strcmp(off, "0"));
}

size_t model_repack_bytes(const model *m) {
    if (!repack_allowed()) return 0;
    int n;
    weight **ws = all_matmul_weights((model *)m, &n);
    size_t bytes = 0;
    for (int i = 0; ws && i < n; i++) bytes += weight_repack_size(ws[i]);
    free(ws);
    return bytes;
}

/* Lays each matrix that the active kernels read faster in the x8 layout
 * out that way, in memory the model owns. The file's pages it was read from
 * are handed back (they stay mapped, for the embedding rows of a tied
 * output), so the model's memory grows by little more than a weight. */
static int repack_weights(model *m) {
    if (!repack_allowed()) return 0;
    int n;
    weight **ws = all_matmul_weights(m, &n);
    if (!ws) return -1;
    threadpool *threads = NULL;
    for (int i = 0; i < n; i++) {
        const size_t bytes = weight_repack_size(ws[i]);
        if (!bytes) continue;
        void *buf = tensors_alloc(&m->tensors, bytes);
        if (!buf) {
            err_oom("out of memory repacking '%s' (%zu bytes)", ws[i]->name, bytes);
            threadpool_free(threads);
            free(ws);
            return -1;
        }
        if (!threads) threads = threadpool_create(0); /* NULL: repack on this thread */
        weight_repack(ws[i], buf, threads);
        m->repacked_bytes += bytes;
        if (m->gguf) gguf_release_pages(m->gguf, ws[i]->data, (size_t)ws[i]->n_out * ws[i]->row_bytes);
    }
    threadpool_free(threads);
    free(ws);
    return 0;
}

static model *load(const char *path, bool repack, int tp_rank, int threadpool_size) {
    wtype_init();
    model *m = calloc(1, sizeof *m);
    if (!m) {
        err_oom("out of memory");
        return NULL;
    }
    m->path = strdup(path);
    struct stat st;
    const bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (dir ? load_hf(m, path) : load_gguf(m, path)) goto fail;
    if (tokenizer_n_vocab(m->tok) > m->hp.n_vocab) {
        err_set("tokenizer has %d tokens but the embedding only %d rows", tokenizer_n_vocab(m->tok),
                m->hp.n_vocab);
        goto fail;
    }
    if (!m->name || !m->path) {
        err_oom("out of memory");
        goto fail;
    }
    count_params(m);
    if (model_shard(m, tp_rank, threadpool_size)) goto fail;
    model_kv_spec(&m->hp, &m->kv);
    if (repack && repack_weights(m)) goto fail;
    return m;
fail:
    /* gguf_open's and the source's messages name the file already. */
    if (m->gguf || (dir && strncmp(err_get(), path, strlen(path)))) err_prefix("%s: ", path);
    model_free(m);
    return NULL;
}

model *model_load(const char *path) { return load(path, true, 0, 1); }

const float *model_rope_factors(const model *m, int n_ctx) {
    if (!m->w.rope_long) return m->w.rope_freqs;
    if (n_ctx <= 0) n_ctx = m->hp.n_ctx_train;
    return n_ctx > m->hp.rope_orig_ctx ? m->w.rope_long : m->w.rope_short;
}

model *model_load_shard(const char *path, int rank, int size) { return load(path, true, rank, size); }

model *model_load_as_stored(const char *path) { return load(path, false, 0, 1); }

void model_free(model *m) {
    if (!m) return;
    tokenizer_free(m->tok);
    tensors_free(&m->tensors);
    hf_source_close(m->hf);
    gguf_close(m->gguf);
    free(m->chat_template);
    free(m->name);
    free(m->path);
    free(m);
}
