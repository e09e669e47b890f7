/* Medusa heads: the file, and proposing drafts; see medusa.h. */
#include "model/medusa.h"

#include "format/gguf.h"
#include "format/gguf_write.h"
#include "kernels/ops.h"
#include "kernels/wtype.h"
#include "util/big_alloc.h"
#include "util/error.h"
#include "util/top_k.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int medusa_params_init(medusa_params *p, int n_heads, int n_embd, const int32_t *vocab, int n_vocab, bool chained) {
    memset(p, 0, sizeof *p);
    if (n_heads < 1 || n_heads > MEDUSA_MAX_HEADS) return err_set("%d Medusa heads (1..%d)", n_heads, MEDUSA_MAX_HEADS);
    if (n_vocab < 1) return err_set("an empty draft vocabulary");
    p->n_heads = n_heads;
    p->n_embd = n_embd;
    p->chained = chained;
    p->n_in = chained ? 2 * n_embd : n_embd;
    p->n_draft_vocab = n_vocab;
    p->draft_vocab = malloc((size_t)n_vocab * sizeof *p->draft_vocab);
    bool ok = p->draft_vocab != NULL;
    for (int k = 0; k < n_heads && ok; k++) {
        p->w[k] = calloc((size_t)n_embd * p->n_in, sizeof(float));
        p->b[k] = calloc((size_t)n_embd, sizeof(float));
        ok = p->w[k] && p->b[k];
    }
    if (!ok) {
        medusa_params_free(p);
        return err_set("out of memory for %d Medusa heads", n_heads);
    }
    memcpy(p->draft_vocab, vocab, (size_t)n_vocab * sizeof *vocab);
    return 0;
}

void medusa_unit_rms(const float *v, int n, float *out) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)v[i] * v[i];
    const float r = ss > 0 ? (float)(1.0 / sqrt(ss / n)) : 0.0f;
    for (int i = 0; i < n; i++) out[i] = v[i] * r;
}

void medusa_token_input(const model *m, int32_t token, float *out) {
    weight_row_to_float(&m->w.tok_embd, token, out);
    medusa_unit_rms(out, m->hp.n_embd, out);
}

void medusa_params_keep_vocab(medusa_params *p, int n) {
    if (n > 0 && n < p->n_draft_vocab) p->n_draft_vocab = n > 8 ? n - n % 8 : n;
}

void medusa_params_free(medusa_params *p) {
    free(p->draft_vocab);
    for (int k = 0; k < MEDUSA_MAX_HEADS; k++) {
        free(p->w[k]);
        free(p->b[k]);
    }
    memset(p, 0, sizeof *p);
}

/* ---- the file ---- */

int medusa_save(const medusa_params *p, const model *m, const char *path, wtype type) {
    const wtype_traits *t = wtype_get(type);
    if (type != WT_F32 && (!t || !t->from_float || p->n_in % t->block_size))
        return err_set("Medusa heads cannot be stored as %s", wtype_name(type));
    gguf_writer *w = gguf_writer_new();
    if (!w) return err_set("out of memory");
    const size_t rb = wtype_row_size(type, p->n_in);
    void *packed = type != WT_F32 ? malloc((size_t)p->n_heads * p->n_embd * rb) : NULL;
    int rc = type != WT_F32 && !packed ? err_set("out of memory") : 0;
    rc = rc || gguf_writer_set_str(w, "general.architecture", "medusa") ||
         gguf_writer_set_str(w, "medusa.base_model", m->name ? m->name : "") ||
         gguf_writer_set_str(w, "medusa.kind", p->exit_layer ? "exit" : p->chained ? "hydra" : "medusa") ||
         (p->exit_layer && gguf_writer_set_u32(w, "medusa.exit_layer", (uint32_t)p->exit_layer)) ||
         gguf_writer_set_u32(w, "medusa.n_heads", (uint32_t)p->n_heads) ||
         gguf_writer_set_u32(w, "medusa.n_embd", (uint32_t)p->n_embd) ||
         gguf_writer_set_u32(w, "medusa.n_vocab", (uint32_t)m->hp.n_vocab) ||
         gguf_writer_set_arr(w, "medusa.draft_vocab", GGUF_TYPE_INT32, p->draft_vocab, (uint64_t)p->n_draft_vocab) ||
         gguf_writer_set_arr(w, "medusa.train.top1", GGUF_TYPE_FLOAT32, p->top1, (uint64_t)p->n_heads) ||
         gguf_writer_set_arr(w, "medusa.train.top5", GGUF_TYPE_FLOAT32, p->top5, (uint64_t)p->n_heads);
    for (int k = 0; k < p->n_heads && !rc; k++) {
        char name[64];
        const int64_t ne_w[2] = {p->n_in, p->n_embd}, ne_b[1] = {p->n_embd};
        const void *data = p->w[k];
        if (packed) { /* the writer keeps pointers until it writes: one buffer for every head */
            char *rows = (char *)packed + (size_t)k * p->n_embd * rb;
            t->from_float(p->w[k], rows, (int64_t)p->n_embd * p->n_in); /* rows are whole blocks: one run */
            data = rows;
        }
        snprintf(name, sizeof name, "medusa.%d.weight", k);
        rc = gguf_writer_add_tensor(w, name, type, 2, ne_w, data);
        snprintf(name, sizeof name, "medusa.%d.bias", k);
        rc = rc || gguf_writer_add_tensor(w, name, WT_F32, 1, ne_b, p->b[k]);
    }
    rc = rc || gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    free(packed);
    return rc ? -1 : 0;
}

static int read_tensor(const gguf_ctx *g, const char *name, int64_t ne0, int64_t ne1, float *out) {
    const gguf_tensor_info *t = gguf_find_tensor(g, name);
    if (!t) return err_set("no tensor %s", name);
    const int64_t ne1_got = t->n_dims > 1 ? t->ne[1] : 1;
    if (t->ne[0] != ne0 || ne1_got != ne1 || t->n_dims > 2)
        return err_set("tensor %s is [%lld][%lld], not [%lld][%lld]", name, (long long)ne1_got, (long long)t->ne[0],
                       (long long)ne1, (long long)ne0);
    const wtype_traits *tr = wtype_get(t->type);
    if (t->type != WT_F32 && t->type != WT_F16 && t->type != WT_Q8_0)
        return err_set("tensor %s is %s (F32, F16 or Q8_0 expected)", name, wtype_name(t->type));
    if (ne0 % tr->block_size)
        return err_set("tensor %s: rows of %lld are not whole %s blocks", name, (long long)ne0, wtype_name(t->type));
    tr->to_float(t->data, out, ne0 * ne1);
    return 0;
}

static int load_from(medusa_params *p, const model *m, const gguf_ctx *g) {
    gguf_str arch;
    if (!gguf_get_str(g, "general.architecture", &arch) || !gguf_str_eq(arch, "medusa"))
        return err_set("not a Medusa heads file (general.architecture is not \"medusa\")");
    uint32_t n_heads, n_embd, n_vocab;
    if (!gguf_get_u32(g, "medusa.n_heads", &n_heads) || !gguf_get_u32(g, "medusa.n_embd", &n_embd) ||
        !gguf_get_u32(g, "medusa.n_vocab", &n_vocab))
        return err_set("medusa.n_heads, medusa.n_embd or medusa.n_vocab is missing");
    if ((int64_t)n_embd != m->hp.n_embd || (int64_t)n_vocab != m->hp.n_vocab)
        return err_set("the heads were made for a model of hidden size %u and %u tokens; this one has %d and %d "
                       "(train heads for it with `cllm medusa train`)",
                       n_embd, n_vocab, m->hp.n_embd, m->hp.n_vocab);
    gguf_str kind;
    bool chained = false;
    uint32_t exit_layer = 0;
    if (gguf_get_str(g, "medusa.kind", &kind)) {
        chained = gguf_str_eq(kind, "hydra");
        const bool exit = gguf_str_eq(kind, "exit");
        if (!chained && !exit && !gguf_str_eq(kind, "medusa"))
            return err_set("medusa.kind is \"%.*s\" (\"medusa\", \"hydra\" or \"exit\" expected)", (int)kind.len,
                           kind.ptr);
        if (exit && (!gguf_get_u32(g, "medusa.exit_layer", &exit_layer) || exit_layer < 1 ||
                     (int64_t)exit_layer > m->hp.n_layer || n_heads != 1))
            return err_set("an exit adapter needs one block and medusa.exit_layer in 1..%d (the model's layers)",
                           m->hp.n_layer);
    }
    const gguf_value *vocab = gguf_get_arr(g, "medusa.draft_vocab", GGUF_TYPE_INT32);
    if (!vocab || vocab->arr.n == 0 || vocab->arr.n > n_vocab) return err_set("medusa.draft_vocab is missing or invalid");
    const int n = (int)vocab->arr.n;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return err_set("out of memory");
    for (int i = 0; i < n; i++) {
        const double v = gguf_arr_num(vocab, (uint64_t)i);
        if (v < 0 || v >= n_vocab) {
            free(ids);
            return err_set("medusa.draft_vocab[%d] = %.0f is not a token of the model", i, v);
        }
        ids[i] = (int32_t)v;
    }
    const int rc = medusa_params_init(p, (int)n_heads, (int)n_embd, ids, n, chained);
    free(ids);
    if (rc) return -1;
    p->exit_layer = (int)exit_layer;
    for (int k = 0; k < p->n_heads; k++) {
        char name[64];
        snprintf(name, sizeof name, "medusa.%d.weight", k);
        if (read_tensor(g, name, p->n_in, n_embd, p->w[k])) return -1;
        snprintf(name, sizeof name, "medusa.%d.bias", k);
        if (read_tensor(g, name, n_embd, 1, p->b[k])) return -1;
    }
    const gguf_value *t1 = gguf_get_arr(g, "medusa.train.top1", GGUF_TYPE_FLOAT32);
    const gguf_value *t5 = gguf_get_arr(g, "medusa.train.top5", GGUF_TYPE_FLOAT32);
    for (int k = 0; k < p->n_heads; k++) {
        p->top1[k] = t1 && (uint64_t)k < t1->arr.n ? (float)gguf_arr_num(t1, (uint64_t)k) : NAN;
        p->top5[k] = t5 && (uint64_t)k < t5->arr.n ? (float)gguf_arr_num(t5, (uint64_t)k) : NAN;
    }
    return 0;
}

int medusa_load(medusa_params *p, const model *m, const char *path) {
    memset(p, 0, sizeof *p);
    gguf_ctx *g = gguf_open(path);
    if (!g) return err_prefix("%s: ", path);
    const int rc = load_from(p, m, g);
    gguf_close(g);
    if (rc) {
        medusa_params_free(p);
        return err_prefix("%s: ", path);
    }
    return 0;
}

/* ---- running them ---- */

struct medusa_heads {
    medusa_params p;
    const model *m;                 /* its token embedding gives chained heads their inputs */
    weight block[MEDUSA_MAX_HEADS]; /* W_k as weights of the type medusa_create was given */
    void *block_q[MEDUSA_MAX_HEADS];  /* W_k quantized (NULL for F32: p.w[k] itself) */
    void *block_x8[MEDUSA_MAX_HEADS]; /* and in the x8 layout, where the type has one */
    head_slice head;                /* the draft rows of the output matrix */
    int max_rows, max_nodes;
    int max_head_rows; /* rows one block or draft-head matmul takes */
    float *in;         /* [max_head_rows][n_in] chained blocks' inputs */
    float *res;        /* [max_head_rows][n_embd] chained blocks' residuals (the states they extend) */
    float *y;          /* [max_head_rows][n_embd] the blocks' outputs */
    float *logits;     /* [max_head_rows][N] */
    float *state;      /* chained: [max_rows][max_nodes + 1][n_embd], what each expansion made */
    int32_t *cand;     /* independent: [max_rows][n_heads][MEDUSA_MAX_TOP] */
    int32_t *cand_at;  /* the same candidates' rows of the draft vocabulary (their logits' indices) */
    void *scratch;
};

/* Block k's weight: p.w[k] itself for F32; otherwise each row quantized
 * (and laid out as x8 where the type has that layout), p.w[k] then freed. */
static int block_weight(medusa_heads *h, int k, wtype type) {
    const int e = h->p.n_embd, ni = h->p.n_in;
    weight *w = &h->block[k];
    *w = (weight){.name = "medusa block", .data = h->p.w[k], .type = WT_F32, .n_in = ni, .n_out = e,
                  .row_bytes = (size_t)ni * sizeof(float)};
    if (type == WT_F32) return 0;
    const wtype_traits *t = wtype_get(type);
    if (!t || !t->from_float || !t->vec_dot || ni % t->block_size)
        return err_set("Medusa blocks of %d inputs cannot run as %s", ni, wtype_name(type));
    const size_t rb = wtype_row_size(type, ni);
    h->block_q[k] = aligned_alloc(64, ((size_t)e * rb + 63) / 64 * 64);
    if (!h->block_q[k]) return err_set("out of memory for the Medusa heads");
    t->from_float(h->p.w[k], h->block_q[k], (int64_t)e * ni); /* rows are whole blocks: one run */
    *w = (weight){.name = "medusa block", .data = h->block_q[k], .type = type, .n_in = ni, .n_out = e, .row_bytes = rb};
    const size_t x8 = weight_repack_size(w);
    if (x8) {
        h->block_x8[k] = big_alloc(x8);
        if (!h->block_x8[k]) return err_set("out of memory for the Medusa heads");
        weight_repack(w, h->block_x8[k], NULL);
    }
    free(h->p.w[k]);
    h->p.w[k] = NULL;
    return 0;
}

medusa_heads *medusa_create(medusa_params *p, const model *m, int max_rows, int max_nodes, wtype block_type) {
    if (m->tp.size > 1) {
        err_set("Medusa heads do not run under tensor parallelism yet");
        return NULL;
    }
    if (max_nodes > MEDUSA_MAX_NODES) {
        err_set("a draft tree of %d nodes (at most %d)", max_nodes, MEDUSA_MAX_NODES);
        return NULL;
    }
    medusa_heads *h = calloc(1, sizeof *h);
    if (!h) {
        err_set("out of memory");
        return NULL;
    }
    h->p = *p;
    memset(p, 0, sizeof *p);
    h->m = m;
    h->max_rows = max_rows < 1 ? 1 : max_rows;
    h->max_nodes = max_nodes < h->p.n_heads ? h->p.n_heads : max_nodes;
    h->max_head_rows = h->max_rows * h->max_nodes;
    const int e = h->p.n_embd, n = h->p.n_draft_vocab, rows = h->max_head_rows;
    for (int k = 0; k < h->p.n_heads; k++)
        if (block_weight(h, k, block_type)) {
            medusa_free(h);
            return NULL;
        }
    if (head_slice_init(&h->head, m, h->p.draft_vocab, n)) {
        medusa_free(h);
        return NULL;
    }
    h->y = malloc((size_t)rows * e * sizeof(float));
    h->logits = malloc((size_t)rows * n * sizeof(float));
    if (!h->y || !h->logits) goto oom;
    if (h->p.chained) {
        h->in = malloc((size_t)rows * h->p.n_in * sizeof(float));
        h->res = malloc((size_t)rows * e * sizeof(float));
        h->state = malloc((size_t)h->max_rows * (h->max_nodes + 1) * e * sizeof(float));
        if (!h->in || !h->res || !h->state) goto oom;
    } else {
        h->cand = malloc((size_t)h->max_rows * h->p.n_heads * MEDUSA_MAX_TOP * sizeof *h->cand);
        h->cand_at = malloc((size_t)h->max_rows * h->p.n_heads * MEDUSA_MAX_TOP * sizeof *h->cand_at);
        if (!h->cand || !h->cand_at) goto oom;
    }
    size_t sc = matmul_scratch_size(&h->head.w, rows);
    for (int k = 0; k < h->p.n_heads; k++)
        if (matmul_scratch_size(&h->block[k], rows) > sc) sc = matmul_scratch_size(&h->block[k], rows);
    h->scratch = aligned_alloc(64, (sc + 63) / 64 * 64 + 64);
    if (!h->scratch) goto oom;
    return h;
oom:
    medusa_free(h);
    err_set("out of memory for the Medusa heads");
    return NULL;
}

void medusa_free(medusa_heads *h) {
    if (!h) return;
    medusa_params_free(&h->p);
    for (int k = 0; k < MEDUSA_MAX_HEADS; k++) {
        free(h->block_q[k]);
        free(h->block_x8[k]);
    }
    head_slice_free(&h->head);
    free(h->in);
    free(h->res);
    free(h->y);
    free(h->logits);
    free(h->state);
    free(h->cand);
    free(h->cand_at);
    free(h->scratch);
    free(h);
}

int medusa_n_heads(const medusa_heads *h) { return h->p.n_heads; }
bool medusa_chained(const medusa_heads *h) { return h->p.chained; }

void medusa_block_out(float *wx, const float *res, const float *b, int n, int e, float *y) {
    for (int r = 0; r < n; r++)
        for (int i = 0; i < e; i++) {
            const size_t at = (size_t)r * e + i;
            const float a = wx[at] + b[i];
            wx[at] = a;
            y[at] = res[at] + a / (1.0f + expf(-a));
        }
}

/* Block j on n input rows x ([n][n_in]): y = res + SiLU(W_j x + b_j), res [n][n_embd]. */
static void block_apply(medusa_heads *h, threadpool *threads, int j, const float *x, const float *res, int n,
                        float *y) {
    matmul(threads, &h->block[j], x, n, y, h->scratch);
    medusa_block_out(y, res, h->p.b[j], n, h->p.n_embd, y);
}

/* The `top` best draft tokens of a logits row, best first, and their
 * indices in the row into at[]; index 0 where the row is all NaN (a broken
 * head). */
static void best_tokens(const medusa_heads *h, const float *logits, int top, int32_t *out, int32_t *at) {
    const int got = top_k_indices(logits, h->p.n_draft_vocab, top, NULL, NULL, at);
    for (int t = got; t < top; t++) at[t] = 0;
    for (int t = 0; t < top; t++) out[t] = h->p.draft_vocab[at[t]];
}

void medusa_propose(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int32_t *tokens) {
    medusa_propose_top(h, threads, hidden, n, k, 1, tokens);
}

/* medusa_propose_top, with each candidate's row of the draft vocabulary in
 * at[] (the same layout as tokens). */
static void propose_top(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int top,
                        int32_t *tokens, int32_t *at) {
    const int e = h->p.n_embd, nv = h->p.n_draft_vocab;
    if (k > h->p.n_heads) k = h->p.n_heads;
    if (n > h->max_rows) n = h->max_rows;
    if (top > MEDUSA_MAX_TOP) top = MEDUSA_MAX_TOP;
    if (top > nv) top = nv;
    if (n <= 0 || k <= 0 || top <= 0 || h->p.chained) return;
    /* y rows in head-major order: head j's n rows together, one matmul each. */
    for (int j = 0; j < k; j++) block_apply(h, threads, j, hidden, hidden, n, h->y + (size_t)j * n * e);
    matmul(threads, &h->head.w, h->y, n * k, h->logits, h->scratch);
    for (int j = 0; j < k; j++)
        for (int r = 0; r < n; r++)
            best_tokens(h, h->logits + ((size_t)j * n + r) * nv, top, tokens + ((size_t)r * k + j) * top,
                        at + ((size_t)r * k + j) * top);
}

void medusa_propose_top(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int top,
                        int32_t *tokens) {
    propose_top(h, threads, hidden, n, k, top, tokens, h->cand_at);
}

/* Chained heads over a tree, one depth at a time: expanding node x (the
 * root, x = -1, or a node with children) runs head depth(x) + 1 on
 * [its parent's expansion's state; e(x's token)], giving x's children
 * their state and candidates. */
static void draft_chained(medusa_heads *h, threadpool *threads, const float *hidden, const int32_t *last, int n,
                          const int8_t *parent, const int8_t *rank, const int *depth, int n_nodes, int stride,
                          int32_t *tokens, float *probs) {
    const int e = h->p.n_embd, ni = h->p.n_in, nv = h->p.n_draft_vocab, slots = h->max_nodes + 1;
    int need[MEDUSA_MAX_NODES + 1] = {0}; /* candidates expansion x + 1 must give; 0: none */
    int deepest = 0;
    for (int j = 0; j < n_nodes; j++) {
        if (rank[j] + 1 > need[parent[j] + 1]) need[parent[j] + 1] = rank[j] + 1;
        if (depth[j] > deepest) deepest = depth[j];
    }
    for (int d = 0; d <= deepest; d++) {
        int xs[MEDUSA_MAX_NODES + 1], nx = 0;
        for (int x = -1; x < n_nodes; x++)
            if (need[x + 1] && (x < 0 ? 0 : depth[x] + 1) == d) xs[nx++] = x;
        const int rows = n * nx;
        for (int i = 0; i < n; i++)
            for (int q = 0; q < nx; q++) {
                const int x = xs[q];
                float *in = h->in + (size_t)(i * nx + q) * ni, *res = h->res + (size_t)(i * nx + q) * e;
                const float *from = x < 0 ? hidden + (size_t)i * e : h->state + ((size_t)i * slots + parent[x] + 1) * e;
                memcpy(res, from, (size_t)e * sizeof *res);
                medusa_unit_rms(from, e, in);
                medusa_token_input(h->m, x < 0 ? last[i] : tokens[(size_t)i * stride + x], in + e);
            }
        block_apply(h, threads, d, h->in, h->res, rows, h->y);
        matmul(threads, &h->head.w, h->y, rows, h->logits, h->scratch);
        for (int i = 0; i < n; i++)
            for (int q = 0; q < nx; q++) {
                const int x = xs[q], r = i * nx + q;
                memcpy(h->state + ((size_t)i * slots + x + 1) * e, h->y + (size_t)r * e, (size_t)e * sizeof(float));
                int32_t best[MEDUSA_MAX_TOP], at[MEDUSA_MAX_TOP];
                const float *row = h->logits + (size_t)r * nv;
                best_tokens(h, row, need[x + 1], best, at);
                for (int c = 0; c < n_nodes; c++)
                    if (parent[c] == x) {
                        tokens[(size_t)i * stride + c] = best[rank[c]];
                        if (probs) probs[(size_t)i * stride + c] = softmax_prob(row, nv, at[rank[c]]);
                    }
            }
    }
}

void medusa_draft(medusa_heads *h, threadpool *threads, const float *hidden, const int32_t *last, int n,
                  const int8_t *parent, const int8_t *rank, int n_nodes, int32_t *tokens, float *probs) {
    if (n > h->max_rows) n = h->max_rows;
    if (n_nodes > h->max_nodes) n_nodes = h->max_nodes;
    if (n <= 0 || n_nodes <= 0) return;
    int depth[MEDUSA_MAX_NODES], top = 1, k = 0, usable = n_nodes;
    for (int j = 0; j < n_nodes; j++) {
        depth[j] = parent[j] < 0 ? 0 : depth[parent[j]] + 1;
        if (depth[j] >= h->p.n_heads || rank[j] >= MEDUSA_MAX_TOP || rank[j] >= h->p.n_draft_vocab) {
            usable = j; /* past what the heads can guess (a caller's error): token 0 from here on */
            break;
        }
        if (depth[j] + 1 > k) k = depth[j] + 1;
        if (rank[j] + 1 > top) top = rank[j] + 1;
    }
    for (int i = 0; i < n; i++)
        for (int j = usable; j < n_nodes; j++) {
            tokens[(size_t)i * n_nodes + j] = 0;
            if (probs) probs[(size_t)i * n_nodes + j] = 0;
        }
    if (usable == 0) return;
    if (h->p.chained) {
        draft_chained(h, threads, hidden, last, n, parent, rank, depth, usable, n_nodes, tokens, probs);
        return;
    }
    propose_top(h, threads, hidden, n, k, top, h->cand, h->cand_at);
    const int nv = h->p.n_draft_vocab;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < usable; j++) {
            const size_t c = ((size_t)i * k + depth[j]) * top + rank[j];
            tokens[(size_t)i * n_nodes + j] = h->cand[c];
            if (probs) /* head depth[j]'s logits of row i (propose_top's head-major order) */
                probs[(size_t)i * n_nodes + j] =
                    softmax_prob(h->logits + ((size_t)depth[j] * n + i) * nv, nv, h->cand_at[c]);
        }
}
