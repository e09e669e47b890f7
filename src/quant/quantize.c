/* The `cllm quantize` pipeline; see quantize.h.
 *
 *  1. plan: every input tensor becomes an output entry, in the order
 *     non-layer tensors first, then each layer's; the layers' linear maps are
 *     checked against the format (group size dividing the rows, ...) and the
 *     calibration file is read, all before the output file is begun;
 *  2. the writer begins (header, metadata, tensor infos), and the non-layer
 *     tensors are written (kept tensors converted to the keep type);
 *  3. per layer: its linear maps are dequantized to f32; for GPTQ/AWQ the
 *     layer runs on the calibration streams with those weights, collecting
 *     the inputs of its maps; the maps are quantized (RTN, GPTQ from the
 *     inputs' Hessian, or AWQ: scale search, folding 1/s into the norm or
 *     map that feeds them, then RTN); the layer's entries are written; the
 *     quantized weights replace the float ones in the model and the layer
 *     runs again to advance the streams;
 *  4. the writer finishes (rename from OUT.tmp), or on any error removes its
 *     temporary file.
 * A Hugging Face folder is written with metadata made from its hyper-
 * parameters and tokenizer (hparams_to_gguf, tokenizer_to_gguf), and its
 * Llama q/k rows, which are in HF's rotate-half order, are permuted on the way
 * out to the adjacent-pair order GGUF's llama expects. Quantization itself
 * runs in the folder's order: rows are quantized independently, so permuting
 * the quantized rows afterwards is exact. */
#include "quant/quantize.h"

#include "format/gguf.h"
#include "format/gguf_write.h"
#include "kernels/gq.h"
#include "kernels/matmul.h"
#include "kernels/wtype.h"
#include "model/forward.h"
#include "model/model.h"
#include "quant/awq.h"
#include "quant/calib.h"
#include "quant/gptq.h"
#include "quant/qformat.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/threadpool.h"
#include "util/time.h"
#include "util/array.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WT_I32 26 /* ggml's id; the registry knows its geometry */
#define AWQ_MAX_ROWS 512 /* calibration rows in the AWQ loss */

void quant_config_init(quant_config *c) {
    memset(c, 0, sizeof *c);
    c->bits = 4;
    c->group = 128;
    c->method = QUANT_RTN;
    c->keep_type = WT_Q8_0;
}

/* ---- the linear maps of a layer ---- */

enum { LIN_Q, LIN_K, LIN_V, LIN_O, LIN_GATE, LIN_UP, LIN_DOWN, N_LIN };

static const struct {
    const char *suffix;
    fwd_linear_input in;
    size_t off; /* of the weight in layer_weights */
} k_lin[N_LIN] = {
    {"attn_q.weight", FWD_IN_QKV, offsetof(layer_weights, wq)},
    {"attn_k.weight", FWD_IN_QKV, offsetof(layer_weights, wk)},
    {"attn_v.weight", FWD_IN_QKV, offsetof(layer_weights, wv)},
    {"attn_output.weight", FWD_IN_O, offsetof(layer_weights, wo)},
    {"ffn_gate.weight", FWD_IN_UPGATE, offsetof(layer_weights, w_gate)},
    {"ffn_up.weight", FWD_IN_UPGATE, offsetof(layer_weights, w_up)},
    {"ffn_down.weight", FWD_IN_DOWN, offsetof(layer_weights, w_down)},
};

/* Vectors AWQ rewrites (folding 1/s into them). */
enum { VEC_ATTN_NORM, VEC_FFN_NORM, VEC_V_BIAS, N_VEC };
static const char *const k_vec[N_VEC] = {"attn_norm.weight", "ffn_norm.weight", "attn_v.bias"};

static weight *layer_weight(model *m, int il, int lin) {
    return (weight *)((char *)&m->w.layers[il] + k_lin[lin].off);
}

static const float **layer_vec(model *m, int il, int v) {
    layer_weights *l = &m->w.layers[il];
    return v == VEC_ATTN_NORM ? &l->attn_norm : v == VEC_FFN_NORM ? &l->ffn_norm : &l->bv;
}

/* ---- the plan ---- */

typedef enum {
    E_COPY,   /* bytes as in the input */
    E_FLOAT,  /* a matrix converted to F16/F32 (--bits 16/32) */
    E_KEEP,   /* a kept tensor in the keep type */
    E_LINEAR, /* a layer's linear map, quantized */
    E_PERM,   /* its act-order permutation */
    E_VEC,    /* a vector AWQ rewrites (F32) */
    E_EXPERT, /* an expert's matrices (merged per layer), round-to-nearest or converted */
} entry_kind;

typedef struct {
    char *name;
    entry_kind kind;
    const model_tensor *src;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    int layer; /* -1 outside the layers */
    int lin;   /* E_LINEAR, E_PERM: which map; E_VEC: which vector */
    /* E_EXPERT from a Hugging Face folder: the per-expert tensors
     * "blk.L.ffn_<part>.E.weight" merged into llama.cpp's 3-D
     * "blk.L.ffn_<part>_exps.weight" (0: the entry's own tensor). */
    int n_merged;
    char part[8];
} entry;

typedef struct {
    float *w[N_LIN];       /* f32 working weights [n_out][n_in] */
    uint8_t *q[N_LIN];     /* the output rows */
    int32_t *perm[N_LIN];  /* act-order */
    float *vec[N_VEC];     /* AWQ's rewritten vectors */
} layer_state;

typedef struct {
    const quant_config *c;
    model *m;
    qformat fmt;
    bool quantizing; /* bits <= 8 */
    bool calibrated; /* GPTQ or AWQ */
    entry *e;
    int n_e;
    size_t cap_e;
    int (*lin_entry)[N_LIN]; /* [n_layer] entry index of each map */
    gguf_writer *wr;
    threadpool *threads;
    calib_set calib;
    calib_runner *runner;
    layer_state *ls;
    char dequantized_types[160];
    bool permute_qk; /* HF Llama q/k rows -> GGUF's order */
    double t0;
} job;

static int add_entry(job *j, const model_tensor *src, const char *name, entry_kind kind, uint32_t type, int layer,
                     int lin) {
    if (array_reserve((void **)&j->e, &j->cap_e, (size_t)j->n_e + 1, sizeof *j->e)) return -1;
    entry *e = &j->e[j->n_e];
    *e = (entry){.name = strdup(name), .kind = kind, .src = src, .type = type, .n_dims = src->n_dims,
                 .layer = layer, .lin = lin};
    if (!e->name) return err_oom("out of memory");
    for (int d = 0; d < 4; d++) e->ne[d] = src->ne[d];
    j->n_e++;
    return 0;
}

static bool is_float_type(uint32_t t) { return t == WT_F32 || t == WT_F16 || t == WT_BF16; }

static double bits_per_weight(uint32_t t) {
    const int bs = wtype_block_size(t);
    return bs > 0 ? 8.0 * (double)wtype_row_size(t, bs) / bs : 0;
}

/* The layer index and the map (or vector) a tensor name is, or -1. */
static int parse_layer_name(const char *name, int *lin, int *vec) {
    int il = -1, pos = 0;
    *lin = *vec = -1;
    if (sscanf(name, "blk.%d.%n", &il, &pos) != 1 || pos == 0) return -1;
    for (int i = 0; i < N_LIN; i++)
        if (!strcmp(name + pos, k_lin[i].suffix)) *lin = i;
    for (int i = 0; i < N_VEC; i++)
        if (!strcmp(name + pos, k_vec[i])) *vec = i;
    return il;
}

static bool is_kept(const job *j, const char *name) {
    for (int i = 0; i < j->c->n_keep; i++)
        if (!strcmp(j->c->keep[i], name)) return true;
    return !j->c->keep_none && (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight"));
}

static void note_dequantized(job *j, uint32_t t) {
    if (is_float_type(t) || t == WT_I32) return;
    const char *name = wtype_name(t);
    if (strstr(j->dequantized_types, name)) return;
    size_t n = strlen(j->dequantized_types);
    snprintf(j->dequantized_types + n, sizeof j->dequantized_types - n, "%s%s", n ? ", " : "", name);
}

/* A mixture of experts' tensors: a router (ffn_gate_inp*, kept in F32 as
 * llama.cpp keeps it: 1), an expert matrix (merged ffn_*_exps or a shared
 * expert's ffn_*_shexp: 2; one expert's "ffn_<part>.E.weight": 3, with part
 * and E), or neither (0). */
static int expert_tensor(const char *name, char part[8], int *expert) {
    int il, pos = 0, e, end = 0;
    if (sscanf(name, "blk.%d.%n", &il, &pos) != 1 || pos == 0) return 0;
    const char *s = name + pos;
    if (!strncmp(s, "ffn_gate_inp", 12)) return 1;
    if (strstr(s, "_exps.weight") || strstr(s, "_shexp.weight")) return 2;
    if (sscanf(s, "ffn_%7[a-z].%d.weight%n", part, &e, &end) == 2 && end > 0 && !s[end] && e >= 0) {
        *expert = e;
        return 3;
    }
    return 0;
}

/* The experts' entry of a tensor: quantized (RTN: no calibration runs the
 * experts) or converted to the float type; one expert's tensor stands for
 * the merged tensor of its layer, which the first expert's plans. */
static int plan_expert(job *j, const model_tensor *t, int il, int kind, const char *part, int expert) {
    const quant_config *c = j->c;
    if (kind == 1) return add_entry(j, t, t->name, t->type == WT_F32 ? E_COPY : E_KEEP, WT_F32, il, -1);
    if (kind == 3 && expert > 0) return 0;
    const uint32_t type = j->quantizing ? (uint32_t)j->fmt.type : c->bits == 16 ? WT_F16 : WT_F32;
    if (j->quantizing && qformat_check(&j->fmt, t->ne[0], t->name)) return -1;
    if (kind == 2) return add_entry(j, t, t->name, E_EXPERT, type, il, -1);
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", il, part);
    if (add_entry(j, t, name, E_EXPERT, type, il, -1)) return -1;
    entry *e = &j->e[j->n_e - 1];
    e->n_merged = j->m->hp.n_expert;
    snprintf(e->part, sizeof e->part, "%s", part);
    e->n_dims = 3;
    e->ne[2] = e->n_merged;
    return 0;
}

/* One input tensor's entries (a map also gets its permutation). */
static int plan_tensor(job *j, const model_tensor *t, int pass_layer) {
    const size_t len = strlen(t->name);
    if (len > 5 && !strcmp(t->name + len - 5, ".perm")) return 0; /* permutations are redone */
    int lin, vec;
    const int il = parse_layer_name(t->name, &lin, &vec);
    if (il != pass_layer) return 0;
    const quant_config *c = j->c;
    char part[8];
    int expert = -1;
    const int kind = expert_tensor(t->name, part, &expert);
    if (kind) return plan_expert(j, t, il, kind, part, expert);
    /* gpt-oss's experts' biases are [n_expert][n] tables: f32, as every bias (llama.cpp adds only f32 ones). */
    const bool bias_table = t->n_dims == 2 && len > 5 && !strcmp(t->name + len - 5, ".bias");
    if (bias_table) return add_entry(j, t, t->name, t->type == WT_F32 ? E_COPY : E_FLOAT, WT_F32, il, -1);
    const bool matrix = t->n_dims == 2;
    if (lin >= 0 && j->quantizing && !is_kept(j, t->name)) {
        if (qformat_check(&j->fmt, t->ne[0], t->name)) return -1;
        note_dequantized(j, t->type);
        if (add_entry(j, t, t->name, E_LINEAR, j->fmt.type, il, lin)) return -1;
        j->lin_entry[il][lin] = j->n_e - 1;
        if (c->desc_act) {
            char name[300];
            snprintf(name, sizeof name, "%s.perm", t->name);
            if (add_entry(j, t, name, E_PERM, WT_I32, il, lin)) return -1;
            entry *e = &j->e[j->n_e - 1];
            e->n_dims = 1;
            e->ne[1] = 1;
        }
        return 0;
    }
    if (vec >= 0 && c->method == QUANT_AWQ) return add_entry(j, t, t->name, E_VEC, WT_F32, il, vec);
    if (matrix && is_kept(j, t->name) && j->quantizing) {
        uint32_t type = c->keep_type < 0 ? t->type : (uint32_t)c->keep_type;
        /* Never re-quantize into more bits than the input holds. */
        if (!is_float_type(t->type) && bits_per_weight(t->type) <= bits_per_weight(type)) type = t->type;
        if (!wtype_row_size(type, t->ne[0]))
            return err_set("%s: the keep type %s cannot hold rows of %" PRId64 " elements (try --keep-type q8_0)",
                           t->name, wtype_name(type), t->ne[0]);
        if (type != t->type) note_dequantized(j, t->type);
        return add_entry(j, t, t->name, type == t->type ? E_COPY : E_KEEP, type, il, -1);
    }
    if (matrix && !j->quantizing) {
        const uint32_t type = c->bits == 16 ? WT_F16 : WT_F32;
        if (t->type != type) note_dequantized(j, t->type);
        return add_entry(j, t, t->name, t->type == type ? E_COPY : E_FLOAT, type, il, -1);
    }
    return add_entry(j, t, t->name, E_COPY, t->type, il, -1);
}

static int plan(job *j) {
    const model *m = j->m;
    j->lin_entry = malloc((size_t)m->hp.n_layer * sizeof *j->lin_entry);
    if (!j->lin_entry) return err_oom("out of memory");
    memset(j->lin_entry, 0xff, (size_t)m->hp.n_layer * sizeof *j->lin_entry);
    /* Non-layer tensors, then each layer's, in file order within each. */
    for (int pass = -1; pass < m->hp.n_layer; pass++) {
        if (!m->gguf) { /* a folder: the table's (name) order */
            for (int64_t i = 0; i < m->tensors.n; i++)
                if (plan_tensor(j, &m->tensors.v[i], pass)) return -1;
            continue;
        }
        for (int64_t i = 0; i < gguf_n_tensors(m->gguf); i++) {
            const model_tensor *t = tensors_find(&m->tensors, gguf_tensor_at(m->gguf, i)->name);
            if (t && plan_tensor(j, t, pass)) return -1;
        }
    }
    return 0;
}

/* ---- tensor data ---- */

/* Rows [r0, r0 + n) of a tensor as f32 (in input column order). */
static int rows_to_f32(const model_tensor *t, int64_t r0, int64_t n, float *out) {
    const wtype_traits *tr = wtype_get((wtype)t->type);
    const size_t rb = wtype_row_size(t->type, t->ne[0]);
    if (!tr || !rb) return err_set("tensor '%s' has type %s, which cannot be converted", t->name, wtype_name(t->type));
    const int64_t k = t->ne[0];
    float *tmp = t->perm ? malloc((size_t)k * sizeof *tmp) : NULL;
    if (t->perm && !tmp) return err_oom("out of memory");
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *src = (const uint8_t *)t->data + (size_t)(r0 + r) * rb;
        float *dst = out + r * k;
        if (!t->perm) {
            tr->to_float(src, dst, k);
            continue;
        }
        tr->to_float(src, tmp, k);
        for (int64_t c = 0; c < k; c++) dst[t->perm[c]] = tmp[c];
    }
    free(tmp);
    return 0;
}

static int64_t n_rows(const model_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* A whole tensor converted to `type`, in row chunks. */
static void *convert_tensor(const model_tensor *t, uint32_t type) {
    const wtype_traits *to = wtype_get((wtype)type);
    const int64_t k = t->ne[0], rows = n_rows(t), chunk = 256;
    const size_t rb = wtype_row_size(type, k);
    uint8_t *out = malloc(rb * (size_t)rows);
    float *buf = malloc((size_t)chunk * (size_t)k * sizeof *buf);
    if (!out || !buf || !to || !to->from_float) {
        free(out);
        free(buf);
        if (to && to->from_float) err_oom("out of memory converting to %s", wtype_name(type));
        else err_set("cannot write type %s", wtype_name(type));
        return NULL;
    }
    for (int64_t r = 0; r < rows; r += chunk) {
        const int64_t n = rows - r < chunk ? rows - r : chunk;
        if (rows_to_f32(t, r, n, buf)) {
            free(out);
            free(buf);
            return NULL;
        }
        for (int64_t i = 0; i < n; i++) to->from_float(buf + i * k, out + (size_t)(r + i) * rb, k);
    }
    free(buf);
    return out;
}

/* ---- per layer ---- */

/* H = 2 X^T X / n over the rows of x [n][k], as a matmul of X^T with itself. */
static int hessian(threadpool *threads, const float *x, int64_t n, int64_t k, double *h) {
    float *xt = malloc((size_t)n * (size_t)k * sizeof *xt);
    float *hf = malloc((size_t)k * (size_t)k * sizeof *hf);
    if (!xt || !hf) {
        free(xt);
        free(hf);
        return err_oom("out of memory for a %" PRId64 " x %" PRId64 " Hessian", k, k);
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < k; c++) xt[c * n + t] = x[t * k + c];
    const int rc = quant_matmul_f32(threads, xt, k, n, xt, k, hf);
    for (int64_t i = 0; i < k * k; i++) h[i] = 2.0 * hf[i] / (double)n;
    free(xt);
    free(hf);
    return rc;
}

static int alloc_outputs(job *j, int il, int lin) {
    layer_state *s = &j->ls[il];
    const model_tensor *t = j->e[j->lin_entry[il][lin]].src;
    s->q[lin] = malloc(qformat_row_bytes(&j->fmt, t->ne[0]) * (size_t)t->ne[1]);
    s->perm[lin] = malloc((size_t)t->ne[0] * sizeof(int32_t));
    if (!s->q[lin] || !s->perm[lin]) return err_oom("out of memory");
    for (int64_t c = 0; c < t->ne[0]; c++) s->perm[lin][c] = (int32_t)c;
    return 0;
}

static int quantize_rtn_layer(job *j, int il) {
    for (int k = 0; k < N_LIN; k++) {
        if (j->lin_entry[il][k] < 0) continue;
        const model_tensor *t = j->e[j->lin_entry[il][k]].src;
        if (alloc_outputs(j, il, k) || quant_rtn(&j->fmt, j->ls[il].w[k], t->ne[1], t->ne[0], j->ls[il].q[k], NULL))
            return -1;
    }
    return 0;
}

static int quantize_gptq_layer(job *j, int il, const calib_inputs *in) {
    const gptq_opts o = {.damp = j->c->damp, .block = 128, .act_order = j->c->desc_act};
    for (int which = 0; which < 4; which++) {
        const int64_t k = in->n_in[which], n = in->n_rows[which];
        double *h = NULL, *h2 = NULL;
        for (int lin = 0; lin < N_LIN; lin++) {
            if ((int)k_lin[lin].in != which || j->lin_entry[il][lin] < 0) continue;
            const model_tensor *t = j->e[j->lin_entry[il][lin]].src;
            if (!h) {
                h = malloc((size_t)k * (size_t)k * sizeof *h);
                h2 = malloc((size_t)k * (size_t)k * sizeof *h2);
                if (!h || !h2 || hessian(j->threads, in->x[which], n, k, h)) {
                    free(h);
                    free(h2);
                    return h && h2 ? -1 : err_oom("out of memory");
                }
            }
            memcpy(h2, h, (size_t)k * (size_t)k * sizeof *h);
            if (alloc_outputs(j, il, lin) || gptq_quantize(&j->fmt, j->ls[il].w[lin], t->ne[1], k, h2, &o, j->threads,
                                                           j->ls[il].q[lin], NULL, j->ls[il].perm[lin])) {
                free(h);
                free(h2);
                return err_prefix("%s: ", t->name);
            }
        }
        free(h);
        free(h2);
    }
    return 0;
}

/* A vector of the layer as f32 (norm weights are f32 already in the model). */
static float *vec_copy(job *j, int il, int v, int64_t n) {
    const float *src = *layer_vec(j->m, il, v);
    if (!src) return NULL;
    float *out = malloc((size_t)n * sizeof *out);
    if (out) memcpy(out, src, (size_t)n * sizeof *out);
    return out;
}

/* AWQ for the maps fed by one input: search, scale their columns by s, and
 * divide the producer (a vector, or the rows of map `prev`) by s. *sample
 * receives the calibration rows the search used, divided by s (for the clip
 * search); NULL when the input's maps were left as they are. */
static int awq_group(job *j, int il, const calib_inputs *in, int which, int vec, int prev, float **sample,
                     int64_t *sample_rows) {
    const int64_t k = in->n_in[which], n = in->n_rows[which];
    layer_state *s = &j->ls[il];
    const float *w[3];
    int64_t n_out[3];
    int lins[3], n_lin = 0;
    for (int lin = 0; lin < N_LIN; lin++)
        if ((int)k_lin[lin].in == which && j->lin_entry[il][lin] >= 0) {
            lins[n_lin] = lin;
            w[n_lin] = s->w[lin];
            n_out[n_lin++] = j->e[j->lin_entry[il][lin]].src->ne[1];
        }
    /* Scaling needs every map of the input (a kept one would miss its
     * columns' scale) and a producer of matching shape (not grouped-query
     * v -> o, whose v rows feed several heads). */
    *sample = NULL;
    for (int lin = 0; lin < N_LIN; lin++)
        if ((int)k_lin[lin].in == which && j->lin_entry[il][lin] < 0) return 0;
    if (!n_lin || (prev >= 0 && (j->lin_entry[il][prev] < 0 || j->e[j->lin_entry[il][prev]].src->ne[1] != k)))
        return 0;
    float *mean = malloc((size_t)k * sizeof *mean), *scales = malloc((size_t)k * sizeof *scales);
    /* An even sample of the calibration rows for the loss. */
    const int64_t rows = n < AWQ_MAX_ROWS ? n : AWQ_MAX_ROWS;
    float *x = malloc((size_t)rows * (size_t)k * sizeof *x);
    int rc = -1;
    if (!mean || !scales || !x) {
        err_oom("out of memory");
        goto done;
    }
    for (int64_t r = 0; r < rows; r++) memcpy(x + r * k, in->x[which] + (r * n / rows) * k, (size_t)k * sizeof *x);
    awq_act_mean(in->x[which], n, k, mean);
    const awq_opts o = {.n_grid = j->c->awq_grid};
    awq_result res;
    if (awq_search(&j->fmt, w, n_out, n_lin, k, x, rows, mean, &o, j->threads, scales, &res)) goto done;
    if (j->c->verbose)
        fprintf(stderr, "layer %d: AWQ on the input of %s: alpha %.2f, output error %.4g (round to nearest %.4g)\n", il,
                k_lin[lins[0]].suffix, res.alpha, res.loss, res.loss_rtn);
    for (int i = 0; i < n_lin; i++) {
        float *wi = s->w[lins[i]];
        for (int64_t r = 0; r < n_out[i]; r++)
            for (int64_t c = 0; c < k; c++) wi[r * k + c] *= scales[c];
    }
    if (vec >= 0) {
        for (int64_t c = 0; c < k; c++) s->vec[vec][c] /= scales[c];
    } else {
        const int64_t pk = j->e[j->lin_entry[il][prev]].src->ne[0];
        for (int64_t r = 0; r < k; r++)
            for (int64_t c = 0; c < pk; c++) s->w[prev][r * pk + c] /= scales[r];
        if (prev == LIN_V && s->vec[VEC_V_BIAS])
            for (int64_t r = 0; r < k; r++) s->vec[VEC_V_BIAS][r] /= scales[r];
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < k; c++) x[r * k + c] /= scales[c];
    *sample = x;
    *sample_rows = rows;
    x = NULL;
    rc = 0;
done:
    free(mean);
    free(scales);
    free(x);
    return rc;
}

static int quantize_awq_layer(job *j, int il, const calib_inputs *in) {
    const model_hparams *hp = &j->m->hp;
    layer_state *s = &j->ls[il];
    const int64_t v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
    if (!(s->vec[VEC_ATTN_NORM] = vec_copy(j, il, VEC_ATTN_NORM, hp->n_embd)) ||
        !(s->vec[VEC_FFN_NORM] = vec_copy(j, il, VEC_FFN_NORM, hp->n_embd)))
        return err_oom("out of memory");
    if (*layer_vec(j->m, il, VEC_V_BIAS) && !(s->vec[VEC_V_BIAS] = vec_copy(j, il, VEC_V_BIAS, v_dim)))
        return err_oom("out of memory");
    /* Order matters: v's rows take o's scales after v's columns took the
     * attention norm's, and up's rows take down's after gate/up's search. */
    float *sample[4] = {NULL, NULL, NULL, NULL};
    int64_t rows[4] = {0, 0, 0, 0};
    int rc = awq_group(j, il, in, FWD_IN_QKV, VEC_ATTN_NORM, -1, &sample[FWD_IN_QKV], &rows[FWD_IN_QKV]) ||
             awq_group(j, il, in, FWD_IN_O, -1, LIN_V, &sample[FWD_IN_O], &rows[FWD_IN_O]) ||
             awq_group(j, il, in, FWD_IN_UPGATE, VEC_FFN_NORM, -1, &sample[FWD_IN_UPGATE], &rows[FWD_IN_UPGATE]) ||
             awq_group(j, il, in, FWD_IN_DOWN, -1, LIN_UP, &sample[FWD_IN_DOWN], &rows[FWD_IN_DOWN]);
    /* Then the clip search on the scaled maps (not q and k: their errors go
     * through the softmax, where matching outputs is not the goal; AutoAWQ
     * skips them too). */
    for (int lin = 0; !rc && lin < N_LIN; lin++) {
        const fwd_linear_input which = k_lin[lin].in;
        if (lin == LIN_Q || lin == LIN_K || j->lin_entry[il][lin] < 0 || !sample[which]) continue;
        const model_tensor *t = j->e[j->lin_entry[il][lin]].src;
        rc = awq_clip(&j->fmt, s->w[lin], t->ne[1], t->ne[0], sample[which], rows[which], j->threads);
    }
    for (int i = 0; i < 4; i++) free(sample[i]);
    return rc ? -1 : quantize_rtn_layer(j, il);
}

/* Puts layer il's float weights (calibrate) or its quantized ones (advance)
 * into the model. */
static void bind_layer(job *j, int il, bool quantized) {
    layer_state *s = &j->ls[il];
    for (int k = 0; k < N_LIN; k++) {
        if (j->lin_entry[il][k] < 0) continue;
        const model_tensor *t = j->e[j->lin_entry[il][k]].src;
        weight *w = layer_weight(j->m, il, k);
        w->perm = NULL;
        if (quantized) {
            w->data = s->q[k];
            w->type = (wtype)j->fmt.type;
            w->row_bytes = qformat_row_bytes(&j->fmt, t->ne[0]);
            if (j->c->desc_act) w->perm = s->perm[k];
        } else {
            w->data = s->w[k];
            w->type = WT_F32;
            w->row_bytes = (size_t)t->ne[0] * sizeof(float);
        }
    }
    if (quantized)
        for (int v = 0; v < N_VEC; v++)
            if (s->vec[v]) *layer_vec(j->m, il, v) = s->vec[v];
}

/* Heads of a q or k weight or bias whose rows need permuting, else 0. */
static int qk_heads(const job *j, const entry *e) {
    if (e->layer < 0 || e->kind == E_PERM) return 0;
    const char *dot = strchr(strchr(e->name, '.') + 1, '.') + 1; /* past "blk.N." */
    if (!strcmp(dot, "attn_q.weight") || !strcmp(dot, "attn_q.bias")) return j->m->hp.n_head;
    if (!strcmp(dot, "attn_k.weight") || !strcmp(dot, "attn_k.bias")) return j->m->hp.n_head_kv;
    return 0;
}

/* Rows of each head from rotate-half order (dimension i pairs with i + d/2)
 * to adjacent pairs (2i with 2i + 1), as convert_hf_to_gguf.py permutes:
 * out row 2i + h of a head is in row h * d/2 + i. */
static void permute_rope_rows(const void *in, void *out, uint64_t row_bytes, int n_head, int head_dim) {
    const uint8_t *src = in;
    uint8_t *dst = out;
    const int half = head_dim / 2;
    for (int hd = 0; hd < n_head; hd++)
        for (int i = 0; i < half; i++)
            for (int h = 0; h < 2; h++)
                memcpy(dst + ((uint64_t)hd * head_dim + 2 * i + h) * row_bytes,
                       src + ((uint64_t)hd * head_dim + h * half + i) * row_bytes, row_bytes);
}

/* An E_EXPERT entry's bytes: each expert's rows quantized (round to
 * nearest) or converted, one expert at a time. */
static void *expert_bytes(job *j, const entry *e) {
    const int n_exp = e->n_merged ? e->n_merged : (int)(e->src->ne[2] * e->src->ne[3]);
    const int64_t k = e->ne[0], rows = e->ne[1];
    const size_t rb = j->quantizing ? qformat_row_bytes(&j->fmt, k) : wtype_row_size(e->type, k);
    const wtype_traits *to = wtype_get((wtype)e->type);
    uint8_t *out = malloc(rb * (size_t)rows * (size_t)n_exp);
    float *w = malloc((size_t)rows * (size_t)k * sizeof *w);
    if (!out || !w) {
        err_oom("out of memory for the experts of '%s'", e->name);
        goto fail;
    }
    for (int x = 0; x < n_exp; x++) {
        const model_tensor *t = e->src;
        int64_t r0 = (int64_t)x * rows;
        if (e->n_merged) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", e->layer, e->part, x);
            t = tensors_find(&j->m->tensors, name);
            if (!t || t->ne[0] != k || t->ne[1] != rows || t->n_dims != 2) {
                err_set("'%s' is missing or not [%" PRId64 ", %" PRId64 "] as expert 0's", name, k, rows);
                goto fail;
            }
            r0 = 0;
        }
        if (rows_to_f32(t, r0, rows, w)) goto fail;
        uint8_t *dst = out + (size_t)x * (size_t)rows * rb;
        if (j->quantizing) {
            if (quant_rtn(&j->fmt, w, rows, k, dst, NULL)) goto fail;
        } else {
            for (int64_t r = 0; r < rows; r++) to->from_float(w + r * k, dst + (size_t)r * rb, k);
        }
    }
    free(w);
    return out;
fail:
    free(out);
    free(w);
    return NULL;
}

static int write_entry(job *j, int i) {
    const entry *e = &j->e[i];
    const void *data = NULL;
    void *owned = NULL;
    switch (e->kind) {
    case E_COPY:
        data = e->src->data;
        break;
    case E_FLOAT:
    case E_KEEP:
        data = owned = convert_tensor(e->src, e->type);
        break;
    case E_LINEAR:
        data = j->ls[e->layer].q[e->lin];
        break;
    case E_PERM:
        data = j->ls[e->layer].perm[e->lin];
        break;
    case E_VEC:
        data = j->ls[e->layer].vec[e->lin];
        if (!data) data = owned = convert_tensor(e->src, WT_F32);
        break;
    case E_EXPERT:
        data = owned = expert_bytes(j, e);
        break;
    }
    if (!data) return -1;
    const int heads = j->permute_qk ? qk_heads(j, e) : 0;
    if (heads > 0) {
        const uint64_t bytes = gguf_writer_tensor_bytes(j->wr, i);
        uint8_t *p = malloc(bytes ? bytes : 1);
        if (!p) {
            free(owned);
            return err_oom("out of memory");
        }
        const int64_t rows = e->n_dims == 1 ? e->ne[0] : e->ne[1];
        permute_rope_rows(data, p, bytes / (uint64_t)rows, heads, (int)(rows / heads));
        free(owned);
        data = owned = p;
    }
    const int rc = gguf_writer_write_tensor(j->wr, i, data);
    free(owned);
    return rc;
}

static void progress(const job *j, int done, int total, const char *what) {
    if (j->c->quiet) return;
    const int width = 30, fill = total ? done * width / total : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[width] = 0;
    const bool tty = isatty(2);
    fprintf(stderr, "%s[%s] %d/%d layers %6.1f s  %s%s", tty ? "\r" : "", bar, done, total, now_seconds() - j->t0, what,
            tty && done < total ? "\033[K" : "\n");
    fflush(stderr);
}

static int run_layer(job *j, int il) {
    const model *m = j->m;
    layer_state *s = &j->ls[il];
    for (int k = 0; k < N_LIN; k++) {
        if (j->lin_entry[il][k] < 0) continue;
        const model_tensor *t = j->e[j->lin_entry[il][k]].src;
        if (!(s->w[k] = malloc((size_t)t->ne[0] * (size_t)t->ne[1] * sizeof(float)))) return err_oom("out of memory");
        if (rows_to_f32(t, 0, t->ne[1], s->w[k])) return -1;
    }
    calib_inputs in = {0};
    int rc = 0;
    const double t0 = now_seconds();
    if (j->calibrated) {
        bind_layer(j, il, false);
        rc = calib_run_layer(j->runner, il, &in, false);
    }
    const double t1 = now_seconds();
    if (!rc) {
        switch (j->c->method) {
        case QUANT_RTN: rc = quantize_rtn_layer(j, il); break;
        case QUANT_GPTQ: rc = quantize_gptq_layer(j, il, &in); break;
        case QUANT_AWQ: rc = quantize_awq_layer(j, il, &in); break;
        }
    }
    calib_inputs_free(&in);
    for (int k = 0; k < N_LIN; k++) {
        free(s->w[k]);
        s->w[k] = NULL;
    }
    if (rc) return err_prefix("layer %d: ", il);
    for (int i = 0; i < j->n_e; i++)
        if (j->e[i].layer == il && write_entry(j, i)) return -1;
    const double t2 = now_seconds();
    if (j->calibrated && il + 1 < m->hp.n_layer) {
        bind_layer(j, il, true);
        if (calib_run_layer(j->runner, il, NULL, true)) return -1;
    }
    if (j->c->verbose)
        fprintf(stderr, "layer %d: calibration pass %.1f s, quantize and write %.1f s, advance pass %.1f s\n", il,
                t1 - t0, t2 - t1, now_seconds() - t2);
    return 0;
}

/* ---- metadata ---- */

/* A folder's metadata, as convert_hf_to_gguf.py would write it. */
static int write_folder_metadata(job *j) {
    const model *m = j->m;
    if (hparams_to_gguf(&m->hp, j->wr) || gguf_writer_set_str(j->wr, "general.name", m->name) ||
        tokenizer_to_gguf(m->tok, j->wr))
        return -1;
    return m->chat_template ? gguf_writer_set_str(j->wr, "tokenizer.chat_template", m->chat_template) : 0;
}

static int write_metadata(job *j) {
    const gguf_ctx *g = j->m->gguf;
    const quant_config *c = j->c;
    if (!g && write_folder_metadata(j)) return -1;
    for (int64_t i = 0; g && i < gguf_n_kv(g); i++) {
        const gguf_kv *kv = gguf_kv_at(g, i);
        char *key = gguf_str_dup(kv->key);
        if (!key) return err_oom("out of memory");
        const int rc = gguf_writer_set_value(j->wr, key, &kv->value);
        free(key);
        if (rc) return -1;
    }
    /* llama.cpp's file type when every matrix is one standard type. */
    bool any_quant = false, gq = false;
    for (int i = 0; i < j->n_e; i++) {
        const uint32_t t = j->e[i].type;
        gq |= gq_is_type(t);
        any_quant |= !gq_is_type(t) && !is_float_type(t) && t != WT_I32;
    }
    int file_type = -1;
    if (!j->quantizing) file_type = c->bits == 16 ? 1 : 0;
    else if (!gq) file_type = j->fmt.type == WT_Q8_0 ? 7 : j->fmt.type == WT_Q4_0 ? 2 : 3;
    if (file_type >= 0) {
        if (gguf_writer_set_u32(j->wr, "general.file_type", (uint32_t)file_type)) return -1;
    } else {
        gguf_writer_remove(j->wr, "general.file_type");
    }
    if (any_quant && gguf_writer_set_u32(j->wr, "general.quantization_version", 2)) return -1;
    static const char *const methods[] = {"rtn", "gptq", "awq"};
    if (gguf_writer_set_str(j->wr, "cllm.quantize.method", j->quantizing ? methods[c->method] : "none") ||
        gguf_writer_set_i32(j->wr, "cllm.quantize.bits", c->bits))
        return -1;
    if (j->quantizing &&
        (gguf_writer_set_i32(j->wr, "cllm.quantize.group_size", c->per_tensor ? 0 : c->group) ||
         gguf_writer_set_str(j->wr, "cllm.quantize.scheme", c->sym ? "sym" : "asym") ||
         gguf_writer_set_str(j->wr, "cllm.quantize.type", wtype_name(j->fmt.type)) ||
         gguf_writer_set_bool(j->wr, "cllm.quantize.desc_act", c->desc_act)))
        return -1;
    if (j->calibrated) {
        const char *base = strrchr(c->calib_path, '/');
        if (gguf_writer_set_str(j->wr, "cllm.quantize.calibration", base ? base + 1 : c->calib_path) ||
            gguf_writer_set_u32(j->wr, "cllm.quantize.calibration_tokens", (uint32_t)j->calib.n_tokens))
            return -1;
    }
    return 0;
}

/* ---- the whole ---- */

static int check_config(const quant_config *c) {
    const bool quantizing = c->bits <= 8;
    if (c->bits != 2 && c->bits != 3 && c->bits != 4 && c->bits != 8 && c->bits != 16 && c->bits != 32)
        return err_set("unsupported --bits %d (supported: 8, 4, 3, 2; 16 or 32 for a float copy)", c->bits);
    if (quantizing && gq_group_code(c->per_tensor ? -1 : c->group) < 0)
        return err_set("unsupported --group-size %d (supported: 32, 64, 128, -1 for one group per row)", c->group);
    if (!quantizing && c->method != QUANT_RTN) return err_set("--bits %d writes floats: it takes no --method", c->bits);
    if (c->method != QUANT_RTN && !c->calib_path)
        return err_set("--method %s needs a calibration text (--calib FILE)", c->method == QUANT_GPTQ ? "gptq" : "awq");
    if (c->desc_act && c->method != QUANT_GPTQ) return err_set("--desc-act applies to --method gptq only");
    return 0;
}

int quantize_model(const char *in_path, const char *out_path, const quant_config *c) {
    if (check_config(c)) return -1;
    job j = {.c = c, .quantizing = c->bits <= 8, .calibrated = c->method != QUANT_RTN, .t0 = now_seconds()};
    int rc = -1;
    j.m = model_load_as_stored(in_path);
    if (!j.m) return -1;
    j.permute_qk = j.m->hp.rope != j.m->hp.traits->rope;
    if (j.permute_qk && (j.m->hp.rope_dim != j.m->hp.head_dim_k || j.m->hp.traits->rope != ROPE_NORM)) {
        err_set("%s: cannot reorder q/k rows for %s's rope", in_path, j.m->hp.traits->name);
        goto done;
    }
    if (j.calibrated && j.m->hp.n_expert > 0) {
        err_set("%s: --method %s does not calibrate a mixture of experts' experts yet; use --method rtn", in_path,
                c->method == QUANT_GPTQ ? "gptq" : "awq");
        goto done;
    }
    if (j.quantizing && qformat_init(&j.fmt, c->bits, c->group, c->sym, c->per_tensor, !c->desc_act)) goto done;
    if (plan(&j)) goto done;
    j.ls = calloc((size_t)j.m->hp.n_layer, sizeof *j.ls);
    j.threads = threadpool_create(c->threads);
    if (!j.ls || !j.threads) {
        err_oom("out of memory");
        goto done;
    }
    if (j.calibrated) {
        int ctx = c->calib_ctx > 0 ? c->calib_ctx : 512;
        if (ctx > j.m->hp.n_ctx_train) ctx = j.m->hp.n_ctx_train;
        if (calib_load(&j.calib, j.m, c->calib_path, c->calib_samples > 0 ? c->calib_samples : 128, ctx)) goto done;
        if (!(j.runner = calib_runner_new(j.m, &j.calib, j.threads))) goto done;
    }
    if (j.dequantized_types[0] && !c->quiet)
        fprintf(stderr, "cllm quantize: warning: the input holds quantized tensors (%s); they are dequantized "
                "first, so the output cannot be more accurate than the input\n", j.dequantized_types);
    if (!(j.wr = gguf_writer_new()) || write_metadata(&j)) goto done;
    for (int i = 0; i < j.n_e; i++)
        if (gguf_writer_add_tensor(j.wr, j.e[i].name, j.e[i].type, j.e[i].n_dims, j.e[i].ne, NULL)) goto done;
    if (gguf_writer_begin(j.wr, out_path)) goto done;
    for (int i = 0; i < j.n_e; i++)
        if (j.e[i].layer < 0 && write_entry(&j, i)) goto done;
    if (!c->quiet && j.calibrated)
        fprintf(stderr, "cllm quantize: calibrating on %d samples, %" PRId64 " tokens\n", j.calib.n_samples,
                j.calib.n_tokens);
    progress(&j, 0, j.m->hp.n_layer, "");
    for (int il = 0; il < j.m->hp.n_layer; il++) {
        if (run_layer(&j, il)) goto done;
        progress(&j, il + 1, j.m->hp.n_layer, "");
    }
    if (gguf_writer_finish(j.wr)) goto done;
    rc = 0;
done:
    gguf_writer_free(j.wr); /* removes OUT.tmp unless finished */
    calib_runner_free(j.runner);
    calib_free(&j.calib);
    if (j.ls)
        for (int il = 0; il < j.m->hp.n_layer; il++)
            for (int k = 0; k < N_LIN; k++) {
                free(j.ls[il].w[k]);
                free(j.ls[il].q[k]);
                free(j.ls[il].perm[k]);
                if (k < N_VEC) free(j.ls[il].vec[k]);
            }
    free(j.ls);
    for (int i = 0; i < j.n_e; i++) free(j.e[i].name);
    free(j.e);
    free(j.lin_entry);
    threadpool_free(j.threads);
    model_free(j.m);
    return rc;
}
