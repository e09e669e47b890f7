/* Loading a BERT encoder (see encoder.h) from a Hugging Face folder: the
 * hyper-parameters from config.json, the pooling from sentence-transformers'
 * files, every tensor renamed to llama.cpp's "bert" names into the tensor
 * table, then bound with its shape checked. */
#include "model/encoder.h"

#include "format/gguf.h"
#include "format/json_file.h"
#include "model/arch.h"
#include "model/hf_source.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- config files -------------------------------------------------------------- */

/* DIR/FILE as JSON; NULL when absent (*rc stays 0) or malformed (*rc = -1). */
static json_t *read_json(const char *dir, const char *file, int *rc) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    bool absent;
    json_t *j = json_file_load(path, JSON_REJECT_DUPLICATES, &absent);
    if (!j) {
        if (!absent) *rc = -1;
        return NULL;
    }
    if (!json_is_object(j)) {
        *rc = err_set("%s: not a JSON object", path);
        json_decref(j);
        return NULL;
    }
    return j;
}

static int get_int(json_t *o, const char *path, const char *key, int *out, int lo, int hi, bool required) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return required ? err_set("%s: missing required key \"%s\"", path, key) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return err_set("%s: \"%s\" must be an integer from %d to %d", path, key, lo, hi);
    *out = (int)json_integer_value(v);
    return 0;
}

static bool is_bert(json_t *cfg) {
    const char *type = json_string_value(json_object_get(cfg, "model_type"));
    return type && !strcmp(type, "bert");
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool gguf_is_bert(const gguf_ctx *g) {
    gguf_str arch;
    return gguf_get_str(g, "general.architecture", &arch) && gguf_str_eq(arch, "bert");
}

bool encoder_is_encoder_model(const char *path) {
    struct stat st;
    if (stat(path, &st) || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
        return false; /* not opened: a FIFO would be read here instead of by the model's loader */
    if (!S_ISDIR(st.st_mode)) {
        gguf_ctx *g = gguf_open(path);
        const bool yes = g && gguf_is_bert(g);
        gguf_close(g);
        return yes;
    }
    int rc = 0;
    json_t *cfg = read_json(path, "config.json", &rc);
    const bool yes = cfg && is_bert(cfg);
    json_decref(cfg);
    return yes;
}

static int read_config(encoder *enc, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = 0;
    json_t *c = read_json(dir, "config.json", &rc);
    if (!c) return rc ? -1 : err_set("%s: missing (a Hugging Face model folder needs config.json)", path);
    encoder_hparams *hp = &enc->hp;
    hp->n_pos = 512, hp->n_types = 2, hp->norm_eps = 1e-12f;
    if (!is_bert(c)) rc = err_set("%s: model_type is not \"bert\"", path);
    if (!rc && (get_int(c, path, "vocab_size", &hp->n_vocab, 1, 1 << 24, true) ||
                get_int(c, path, "hidden_size", &hp->n_embd, 1, 1 << 16, true) ||
                get_int(c, path, "num_hidden_layers", &hp->n_layer, 1, ENCODER_MAX_LAYERS, true) ||
                get_int(c, path, "num_attention_heads", &hp->n_head, 1, 1024, true) ||
                get_int(c, path, "intermediate_size", &hp->n_ff, 1, 1 << 20, true) ||
                get_int(c, path, "max_position_embeddings", &hp->n_pos, 1, 1 << 20, false) ||
                get_int(c, path, "type_vocab_size", &hp->n_types, 1, 1 << 10, false)))
        rc = -1;
    json_t *eps = json_object_get(c, "layer_norm_eps");
    if (!rc && eps) {
        if (!json_is_number(eps) || !(json_number_value(eps) > 0) || json_number_value(eps) > 1)
            rc = err_set("%s: \"layer_norm_eps\" must be a number in (0, 1]", path);
        else hp->norm_eps = (float)json_number_value(eps);
    }
    const char *act = json_string_value(json_object_get(c, "hidden_act"));
    if (!rc && act && strcmp(act, "gelu"))
        rc = err_set("%s: hidden_act '%.32s' is not supported (gelu)", path, act);
    const char *pos = json_string_value(json_object_get(c, "position_embedding_type"));
    if (!rc && pos && strcmp(pos, "absolute"))
        rc = err_set("%s: position_embedding_type '%.32s' is not supported (absolute)", path, pos);
    if (!rc && hp->n_embd % hp->n_head)
        rc = err_set("%s: hidden_size %d is not a multiple of num_attention_heads %d", path, hp->n_embd, hp->n_head);
    hp->head_dim = rc ? 0 : hp->n_embd / hp->n_head;
    json_t *mdims = json_object_get(c, "matryoshka_dimensions");
    enc->matryoshka = json_is_true(json_object_get(c, "is_matryoshka")) || json_is_array(mdims);
    size_t i;
    json_t *d;
    json_array_foreach(mdims, i, d) {
        if (rc) break;
        if (i >= ENCODER_MAX_MATRYOSHKA || !json_is_integer(d) || json_integer_value(d) < 1 ||
            json_integer_value(d) > hp->n_embd)
            rc = err_set("%s: matryoshka_dimensions must be at most %d integers from 1 to %d", path,
                         ENCODER_MAX_MATRYOSHKA, hp->n_embd);
        else enc->matryoshka_dims[enc->n_matryoshka_dims++] = (int)json_integer_value(d);
    }
    json_decref(c);
    return rc;
}

/* sentence-transformers: modules.json lists Transformer, Pooling (its config
 * in the module's folder) and Normalize; sentence_bert_config.json caps the
 * input length. Without them: mean pooling, normalized, as vLLM does. */
static int read_sentence_transformers(encoder *enc, const char *dir) {
    enc->pooling = POOL_MEAN;
    enc->normalize = true;
    enc->max_len = enc->hp.n_pos;
    int rc = 0;
    json_t *sb = read_json(dir, "sentence_bert_config.json", &rc);
    if (sb && get_int(sb, "sentence_bert_config.json", "max_seq_length", &enc->max_len, 1, enc->hp.n_pos, false))
        rc = -1;
    json_decref(sb);
    if (rc) return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/modules.json", dir);
    bool absent;
    json_t *mods = json_file_load(path, 0, &absent);
    if (!mods) return absent ? 0 : -1;
    if (!json_is_array(mods)) {
        json_decref(mods);
        return err_set("%s: not a JSON list", path);
    }
    enc->normalize = false;
    size_t i;
    json_t *m;
    json_array_foreach(mods, i, m) {
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *sub = json_string_value(json_object_get(m, "path"));
        if (!type) continue;
        if (strstr(type, "Normalize")) enc->normalize = true;
        if (!strstr(type, "Pooling") || !sub) continue;
        char pdir[4096];
        snprintf(pdir, sizeof pdir, "%s/%s", dir, sub);
        json_t *pc = read_json(pdir, "config.json", &rc);
        if (pc && json_is_true(json_object_get(pc, "pooling_mode_cls_token"))) enc->pooling = POOL_CLS;
        if (pc && !json_is_true(json_object_get(pc, "pooling_mode_mean_tokens")) && enc->pooling != POOL_CLS)
            rc = err_set("%s/config.json: only mean or CLS pooling is supported", pdir);
        json_decref(pc);
    }
    json_decref(mods);
    return rc;
}

/* --- tensors ---------------------------------------------------------------------- */

static const struct {
    const char *gguf, *hf;
} k_globals[] = {
    {"token_embd.weight", "embeddings.word_embeddings.weight"},
    {"position_embd.weight", "embeddings.position_embeddings.weight"},
    {"token_types.weight", "embeddings.token_type_embeddings.weight"},
    {"token_embd_norm.weight", "embeddings.LayerNorm.weight"},
    {"token_embd_norm.bias", "embeddings.LayerNorm.bias"},
};

static const struct {
    const char *gguf, *hf;
} k_layer[] = {
    {"attn_q", "attention.self.query"},          {"attn_k", "attention.self.key"},
    {"attn_v", "attention.self.value"},          {"attn_output", "attention.output.dense"},
    {"attn_output_norm", "attention.output.LayerNorm"}, {"ffn_up", "intermediate.dense"},
    {"ffn_down", "output.dense"},                {"layer_output_norm", "output.LayerNorm"},
};

static int add_tensors(encoder *enc) {
    /* BertModel saves without a prefix; BertFor* checkpoints under "bert.". */
    const char *prefix = st_find(enc->st, "bert.embeddings.word_embeddings.weight") ? "bert." : "";
    char hf[256], gguf[128];
    for (size_t i = 0; i < sizeof k_globals / sizeof *k_globals; i++) {
        snprintf(hf, sizeof hf, "%s%s", prefix, k_globals[i].hf);
        const st_tensor *t = st_find(enc->st, hf);
        if (t && hf_add_float_tensor(&enc->tensors, k_globals[i].gguf, t)) return -1;
    }
    static const char *const parts[] = {"weight", "bias"};
    for (int il = 0; il < enc->hp.n_layer; il++)
        for (size_t i = 0; i < sizeof k_layer / sizeof *k_layer; i++)
            for (int p = 0; p < 2; p++) {
                snprintf(hf, sizeof hf, "%sencoder.layer.%d.%s.%s", prefix, il, k_layer[i].hf, parts[p]);
                snprintf(gguf, sizeof gguf, "blk.%d.%s.%s", il, k_layer[i].gguf, parts[p]);
                const st_tensor *t = st_find(enc->st, hf);
                if (t && hf_add_float_tensor(&enc->tensors, gguf, t)) return -1;
            }
    return tensors_finish(&enc->tensors);
}

static const model_tensor *need(const encoder *enc, const char *name) {
    const model_tensor *t = tensors_find(&enc->tensors, name);
    if (!t) err_set("missing required tensor '%s'", name);
    return t;
}

static int bind_matrix(encoder *enc, weight *w, const char *name, int64_t n_in, int64_t n_out) {
    const model_tensor *t = need(enc, name);
    if (!t) return -1;
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return err_set("tensor '%s' has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64
                       "] (input, output)",
                       name, t->ne[0], t->ne[1], n_in, n_out);
    const wtype_traits *tr = wtype_get((wtype)t->type);
    if (!tr || !tr->vec_dot) return err_set("tensor '%s' has unsupported type %s", name, wtype_name(t->type));
    *w = (weight){.name = t->name, .data = t->data, .type = (wtype)t->type, .n_in = n_in, .n_out = n_out,
                  .row_bytes = wtype_row_size(t->type, n_in)};
    if (w->row_bytes * (size_t)n_out > t->nbytes) return err_set("tensor '%s': its data is too short", name);
    return 0;
}

static int bind_vector(encoder *enc, const float **out, const char *name, int64_t n) {
    const model_tensor *t = need(enc, name);
    if (!t) return -1;
    if (t->n_dims != 1 || t->ne[0] != n)
        return err_set("tensor '%s' has %" PRId64 " elements, expected a vector of %" PRId64, name, t->ne[0], n);
    float *v = tensors_alloc(&enc->tensors, (size_t)n * sizeof *v);
    if (!v) return -1;
    wtype_get((wtype)t->type)->to_float(t->data, v, n);
    *out = v;
    return 0;
}

/* A matrix with its bias: blk.N.<base>.weight and blk.N.<base>.bias. */
static int bind_linear(encoder *enc, int il, const char *base, weight *w, const float **b, int64_t n_in,
                       int64_t n_out) {
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s.weight", il, base);
    if (bind_matrix(enc, w, name, n_in, n_out)) return -1;
    snprintf(name, sizeof name, "blk.%d.%s.bias", il, base);
    return bind_vector(enc, b, name, n_out);
}

static int bind_norm(encoder *enc, int il, const char *base, const float **w, const float **b) {
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s.weight", il, base);
    if (bind_vector(enc, w, name, enc->hp.n_embd)) return -1;
    snprintf(name, sizeof name, "blk.%d.%s.bias", il, base);
    return bind_vector(enc, b, name, enc->hp.n_embd);
}

static int bind_all(encoder *enc) {
    const encoder_hparams *hp = &enc->hp;
    if (bind_matrix(enc, &enc->tok_embd, "token_embd.weight", hp->n_embd, hp->n_vocab) ||
        bind_matrix(enc, &enc->pos_embd, "position_embd.weight", hp->n_embd, hp->n_pos) ||
        bind_matrix(enc, &enc->type_embd, "token_types.weight", hp->n_embd, hp->n_types) ||
        bind_vector(enc, &enc->embd_norm_w, "token_embd_norm.weight", hp->n_embd) ||
        bind_vector(enc, &enc->embd_norm_b, "token_embd_norm.bias", hp->n_embd))
        return -1;
    for (int il = 0; il < hp->n_layer; il++) {
        encoder_layer *l = &enc->layers[il];
        if (bind_linear(enc, il, "attn_q", &l->wq, &l->bq, hp->n_embd, hp->n_embd) ||
            bind_linear(enc, il, "attn_k", &l->wk, &l->bk, hp->n_embd, hp->n_embd) ||
            bind_linear(enc, il, "attn_v", &l->wv, &l->bv, hp->n_embd, hp->n_embd) ||
            bind_linear(enc, il, "attn_output", &l->wo, &l->bo, hp->n_embd, hp->n_embd) ||
            bind_norm(enc, il, "attn_output_norm", &l->attn_norm_w, &l->attn_norm_b) ||
            bind_linear(enc, il, "ffn_up", &l->w_up, &l->b_up, hp->n_embd, hp->n_ff) ||
            bind_linear(enc, il, "ffn_down", &l->w_down, &l->b_down, hp->n_ff, hp->n_embd) ||
            bind_norm(enc, il, "layer_output_norm", &l->out_norm_w, &l->out_norm_b))
            return -1;
    }
    for (int64_t i = 0; i < enc->tensors.n; i++) {
        const model_tensor *t = &enc->tensors.v[i];
        enc->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return 0;
}

int encoder_tokenize(const encoder *enc, const char *text, size_t len, int max_tokens, int32_t **out) {
    int n = tokenizer_encode(enc->tok, text, len, true, true, out);
    if (n > max_tokens && max_tokens > 0) {
        const bool closes = tokenizer_eos(enc->tok) >= 0 && (*out)[n - 1] == tokenizer_eos(enc->tok);
        if (closes && max_tokens > 1) (*out)[max_tokens - 1] = (*out)[n - 1];
        n = max_tokens;
    }
    return n;
}

/* llama.cpp's "bert": the hyper-parameters from bert.*, the tensors under
 * their own names, the vocabulary as tokenizer.ggml.model "bert". */
static int load_gguf(encoder *enc, const char *path) {
    gguf_ctx *g = enc->gguf = gguf_open(path);
    if (!g) return -1;
    if (!gguf_is_bert(g)) return err_set("general.architecture is not \"bert\"");
    encoder_hparams *hp = &enc->hp;
    int pooling = 1; /* llama.cpp's LLAMA_POOLING_TYPE_MEAN; 2 is CLS */
    hp->norm_eps = 1e-12f;
    if (meta_need_u32(g, "bert", "block_count", &hp->n_layer, 1, ENCODER_MAX_LAYERS) ||
        meta_need_u32(g, "bert", "embedding_length", &hp->n_embd, 1, 1 << 16) ||
        meta_need_u32(g, "bert", "feed_forward_length", &hp->n_ff, 1, 1 << 20) ||
        meta_need_u32(g, "bert", "attention.head_count", &hp->n_head, 1, 1024) ||
        meta_need_u32(g, "bert", "context_length", &hp->n_pos, 1, 1 << 20) ||
        meta_opt_f32(g, "bert", "attention.layer_norm_epsilon", &hp->norm_eps) ||
        meta_opt_u32(g, "bert", "pooling_type", &pooling, 0, 16))
        return -1;
    if (pooling != 1 && pooling != 2) return err_set("bert.pooling_type %d is not supported (1: mean, 2: CLS)", pooling);
    if (!(hp->norm_eps > 0)) return err_set("bert.attention.layer_norm_epsilon must be positive");
    if (hp->n_embd % hp->n_head)
        return err_set("embedding_length %d is not a multiple of head_count %d", hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    enc->pooling = pooling == 2 ? POOL_CLS : POOL_MEAN;
    enc->normalize = true;
    enc->max_len = hp->n_pos;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(g, i);
        if (!tensors_add(&enc->tensors, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes)) return -1;
    }
    if (tensors_finish(&enc->tensors)) return -1;
    const model_tensor *emb = need(enc, "token_embd.weight"), *types = need(enc, "token_types.weight");
    if (!emb || !types) return -1;
    hp->n_vocab = (int)emb->ne[1];
    hp->n_types = (int)types->ne[1];
    if (!(enc->tok = tokenizer_from_gguf(g))) return -1;
    gguf_str name;
    if (gguf_get_str(g, "general.name", &name)) {
        free(enc->name);
        enc->name = gguf_str_dup(name);
    }
    return 0;
}

static int load_hf(encoder *enc, const char *dir) {
    if (read_config(enc, dir) || read_sentence_transformers(enc, dir)) return -1;
    if (!(enc->st = st_open_dir(dir)) || add_tensors(enc)) return -1;
    return (enc->tok = tokenizer_from_hf(dir)) ? 0 : -1;
}

encoder *encoder_load(const char *path) {
    wtype_init();
    encoder *enc = calloc(1, sizeof *enc);
    if (!enc) {
        err_oom("out of memory");
        return NULL;
    }
    enc->path = strdup(path);
    enc->name = path_last_name(path);
    if (!enc->path || !enc->name) {
        err_oom("out of memory");
        goto fail;
    }
    if ((is_dir(path) ? load_hf(enc, path) : load_gguf(enc, path)) || bind_all(enc)) goto fail;
    if (!enc->name) {
        err_oom("out of memory");
        goto fail;
    }
    if (tokenizer_n_vocab(enc->tok) > enc->hp.n_vocab) {
        err_set("tokenizer has %d tokens but the embedding only %d rows", tokenizer_n_vocab(enc->tok),
                enc->hp.n_vocab);
        goto fail;
    }
    return enc;
fail:
    if (strncmp(err_get(), path, strlen(path))) err_prefix("%s: ", path);
    encoder_free(enc);
    return NULL;
}

void encoder_free(encoder *enc) {
    if (!enc) return;
    tokenizer_free(enc->tok);
    tensors_free(&enc->tensors);
    st_close(enc->st);
    gguf_close(enc->gguf);
    free(enc->name);
    free(enc->path);
    free(enc);
}
