/* Model loading: hyper-parameters from metadata, then every tensor the family
 * needs is looked up by llama.cpp's names, its shape and type checked, and
 * bound as a view into the mapping. Norm weights and biases, which are tiny and
 * read often, are converted to owned f32 arrays. */
#include "model/model.h"

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const gguf_tensor_info *find_tensor(const model *m, const char *name, bool required) {
    const gguf_tensor_info *t = gguf_find_tensor(m->gguf, name);
    if (!t && required) err_set("missing required tensor '%s'", name);
    return t;
}

static int check_type(const gguf_tensor_info *t, bool need_dot) {
    const wtype_traits *tr = wtype_get((wtype)t->type);
    if (!tr || (need_dot && !tr->vec_dot))
        return err_set("tensor '%s' has unsupported type %s", t->name, wtype_name(t->type));
    return 0;
}

/* Binds a matrix of n_out rows by n_in columns. */
static int bind_weight(model *m, weight *w, const char *name, int64_t n_in, int64_t n_out, bool required) {
    memset(w, 0, sizeof *w);
    const gguf_tensor_info *t = find_tensor(m, name, required);
    if (!t) return required ? -1 : 0;
    if (t->n_dims > 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return err_set("tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                       ", %" PRId64 "]",
                       name, t->ne[0], t->ne[1], t->ne[2], n_in, n_out);
    if (check_type(t, true)) return -1;
    w->name = t->name;
    w->data = t->data;
    w->type = (wtype)t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = wtype_row_size(t->type, n_in);
    return 0;
}

/* Binds a vector of n elements, converted to f32. */
static int bind_vector(model *m, const float **out, const char *name, int64_t n, bool required) {
    *out = NULL;
    const gguf_tensor_info *t = find_tensor(m, name, required);
    if (!t) return required ? -1 : 0;
    if (t->n_dims != 1 || t->ne[0] != n)
        return err_set("tensor '%s' has %" PRId64 " elements in %d dimensions, expected a vector of %" PRId64,
                       name, t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3], t->n_dims, n);
    if (check_type(t, false)) return -1;
    float *v = malloc((size_t)n * sizeof *v);
    float **grown = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *grown);
    if (!v || !grown) {
        free(v);
        if (grown) m->owned = grown;
        return err_set("out of memory");
    }
    m->owned = grown;
    m->owned[m->n_owned++] = v;
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
    const int64_t o_dim = (int64_t)hp->n_head * hp->head_dim_v;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d.%s", il, suffix), name)
    if (bind_vector(m, &l->attn_norm, NAME("attn_norm.weight"), hp->n_embd, true) ||
        bind_weight(m, &l->wq, NAME("attn_q.weight"), hp->n_embd, q_dim, true) ||
        bind_weight(m, &l->wk, NAME("attn_k.weight"), hp->n_embd, k_dim, true) ||
        bind_weight(m, &l->wv, NAME("attn_v.weight"), hp->n_embd, v_dim, true) ||
        bind_weight(m, &l->wo, NAME("attn_output.weight"), o_dim, hp->n_embd, true) ||
        bind_vector(m, &l->bq, NAME("attn_q.bias"), q_dim, tr->qkv_bias) ||
        bind_vector(m, &l->bk, NAME("attn_k.bias"), k_dim, tr->qkv_bias) ||
        bind_vector(m, &l->bv, NAME("attn_v.bias"), v_dim, tr->qkv_bias) ||
        bind_vector(m, &l->q_norm, NAME("attn_q_norm.weight"), hp->head_dim_k, tr->qk_norm) ||
        bind_vector(m, &l->k_norm, NAME("attn_k_norm.weight"), hp->head_dim_k, tr->qk_norm) ||
        bind_vector(m, &l->post_attn_norm, NAME("post_attention_norm.weight"), hp->n_embd, tr->post_norms) ||
        bind_vector(m, &l->ffn_norm, NAME("ffn_norm.weight"), hp->n_embd, true) ||
        bind_weight(m, &l->w_gate, NAME("ffn_gate.weight"), hp->n_embd, hp->n_ff, true) ||
        bind_weight(m, &l->w_up, NAME("ffn_up.weight"), hp->n_embd, hp->n_ff, true) ||
        bind_weight(m, &l->w_down, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, true) ||
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
    const gguf_tensor_info *emb = find_tensor(m, "token_embd.weight", true);
    if (!emb) return -1;
    if (emb->n_dims != 2 || emb->ne[0] != hp->n_embd)
        return err_set("tensor 'token_embd.weight' has rows of %" PRId64 ", expected n_embd = %d", emb->ne[0],
                       hp->n_embd);
    if (emb->ne[1] > (1 << 24)) return err_set("vocabulary of %" PRId64 " tokens is too large", emb->ne[1]);
    hp->n_vocab = (int)emb->ne[1];
    if (bind_weight(m, &m->w.tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab, true) ||
        bind_vector(m, &m->w.output_norm, "output_norm.weight", hp->n_embd, true) ||
        bind_weight(m, &m->w.output, "output.weight", hp->n_embd, hp->n_vocab, false) ||
        bind_vector(m, &m->w.rope_freqs, "rope_freqs.weight", hp->rope_dim / 2, false))
        return -1;
    m->tied_output = m->w.output.data == NULL;
    if (m->tied_output) m->w.output = m->w.tok_embd;
    for (int il = 0; il < hp->n_layer; il++)
        if (bind_layer(m, il)) return -1;
    return 0;
}

static void count_params(model *m) {
    for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(m->gguf, i);
        m->weight_bytes += t->nbytes;
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
}

model *model_load(const char *path) {
    wtype_init();
    model *m = calloc(1, sizeof *m);
    if (!m) {
        err_set("out of memory");
        return NULL;
    }
    m->path = strdup(path);
    m->gguf = gguf_open(path);
    if (!m->gguf) goto fail_quiet;
    if (hparams_from_gguf(m->gguf, &m->hp) || bind_all(m)) goto fail;
    m->tok = tokenizer_from_gguf(m->gguf);
    if (!m->tok) goto fail;
    if (tokenizer_n_vocab(m->tok) > m->hp.n_vocab) {
        err_set("tokenizer has %d tokens but the embedding only %d rows", tokenizer_n_vocab(m->tok),
                m->hp.n_vocab);
        goto fail;
    }
    gguf_str s;
    if (gguf_get_str(m->gguf, "tokenizer.chat_template", &s)) m->chat_template = gguf_str_dup(s);
    m->name = gguf_get_str(m->gguf, "general.name", &s) ? gguf_str_dup(s) : strdup(m->hp.traits->name);
    count_params(m);
    return m;
fail:
    err_prefix("%s: ", path);
fail_quiet:
    model_free(m);
    return NULL;
}

void model_free(model *m) {
    if (!m) return;
    tokenizer_free(m->tok);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    gguf_close(m->gguf);
    free(m->chat_template);
    free(m->name);
    free(m->path);
    free(m);
}
