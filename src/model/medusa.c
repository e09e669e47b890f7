/* Medusa heads: the file, and proposing drafts; see medusa.h. */
#include "model/medusa.h"

#include "format/gguf.h"
#include "format/gguf_write.h"
#include "kernels/wtype.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/top_k.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int medusa_params_init(medusa_params *p, int n_heads, int n_embd, const int32_t *vocab, int n_vocab) {
    memset(p, 0, sizeof *p);
    if (n_heads < 1 || n_heads > MEDUSA_MAX_HEADS) return err_set("%d Medusa heads (1..%d)", n_heads, MEDUSA_MAX_HEADS);
    if (n_vocab < 1) return err_set("an empty draft vocabulary");
    p->n_heads = n_heads;
    p->n_embd = n_embd;
    p->n_draft_vocab = n_vocab;
    p->draft_vocab = malloc((size_t)n_vocab * sizeof *p->draft_vocab);
    bool ok = p->draft_vocab != NULL;
    for (int k = 0; k < n_heads && ok; k++) {
        p->w[k] = calloc((size_t)n_embd * n_embd, sizeof(float));
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

void medusa_params_free(medusa_params *p) {
    free(p->draft_vocab);
    for (int k = 0; k < MEDUSA_MAX_HEADS; k++) {
        free(p->w[k]);
        free(p->b[k]);
    }
    memset(p, 0, sizeof *p);
}

/* ---- the file ---- */

int medusa_save(const medusa_params *p, const model *m, const char *path, bool f16) {
    gguf_writer *w = gguf_writer_new();
    if (!w) return err_set("out of memory");
    const size_t e2 = (size_t)p->n_embd * p->n_embd;
    f16_t *half = f16 ? malloc((size_t)p->n_heads * e2 * sizeof *half) : NULL;
    int rc = f16 && !half ? err_set("out of memory") : 0;
    rc = rc || gguf_writer_set_str(w, "general.architecture", "medusa") ||
         gguf_writer_set_str(w, "medusa.base_model", m->name ? m->name : "") ||
         gguf_writer_set_u32(w, "medusa.n_heads", (uint32_t)p->n_heads) ||
         gguf_writer_set_u32(w, "medusa.n_embd", (uint32_t)p->n_embd) ||
         gguf_writer_set_u32(w, "medusa.n_vocab", (uint32_t)m->hp.n_vocab) ||
         gguf_writer_set_arr(w, "medusa.draft_vocab", GGUF_TYPE_INT32, p->draft_vocab, (uint64_t)p->n_draft_vocab) ||
         gguf_writer_set_arr(w, "medusa.train.top1", GGUF_TYPE_FLOAT32, p->top1, (uint64_t)p->n_heads) ||
         gguf_writer_set_arr(w, "medusa.train.top5", GGUF_TYPE_FLOAT32, p->top5, (uint64_t)p->n_heads);
    for (int k = 0; k < p->n_heads && !rc; k++) {
        char name[64];
        const int64_t ne_w[2] = {p->n_embd, p->n_embd}, ne_b[1] = {p->n_embd};
        const void *data = p->w[k];
        if (f16) {
            f16_t *h = half + (size_t)k * e2;
            for (size_t i = 0; i < e2; i++) h[i] = f32_to_f16(p->w[k][i]);
            data = h;
        }
        snprintf(name, sizeof name, "medusa.%d.weight", k);
        rc = gguf_writer_add_tensor(w, name, f16 ? WT_F16 : WT_F32, 2, ne_w, data);
        snprintf(name, sizeof name, "medusa.%d.bias", k);
        rc = rc || gguf_writer_add_tensor(w, name, WT_F32, 1, ne_b, p->b[k]);
    }
    rc = rc || gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    free(half);
    return rc ? -1 : 0;
}

static int read_tensor(const gguf_ctx *g, const char *name, int64_t ne0, int64_t ne1, float *out) {
    const gguf_tensor_info *t = gguf_find_tensor(g, name);
    if (!t) return err_set("no tensor %s", name);
    const int64_t ne1_got = t->n_dims > 1 ? t->ne[1] : 1;
    if (t->ne[0] != ne0 || ne1_got != ne1 || t->n_dims > 2)
        return err_set("tensor %s is [%lld][%lld], not [%lld][%lld]", name, (long long)ne1_got, (long long)t->ne[0],
                       (long long)ne1, (long long)ne0);
    const size_t n = (size_t)ne0 * (size_t)ne1;
    if (t->type == WT_F32) {
        memcpy(out, t->data, n * sizeof(float));
    } else if (t->type == WT_F16) {
        const f16_t *h = t->data;
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(h[i]);
    } else {
        return err_set("tensor %s is %s (F32 or F16 expected)", name, wtype_name(t->type));
    }
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
    const int rc = medusa_params_init(p, (int)n_heads, (int)n_embd, ids, n);
    free(ids);
    if (rc) return -1;
    for (int k = 0; k < p->n_heads; k++) {
        char name[64];
        snprintf(name, sizeof name, "medusa.%d.weight", k);
        if (read_tensor(g, name, n_embd, n_embd, p->w[k])) return -1;
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
    weight block[MEDUSA_MAX_HEADS]; /* W_k as F32 weights */
    head_slice head;                /* the draft rows of the output matrix */
    int max_rows;
    float *y;       /* [max_rows * n_heads][n_embd] the blocks' outputs */
    float *logits;  /* [max_rows * n_heads][N] */
    void *scratch;
};

medusa_heads *medusa_create(medusa_params *p, const model *m, int max_rows) {
    if (m->tp.size > 1) {
        err_set("Medusa heads do not run under tensor parallelism yet");
        return NULL;
    }
    medusa_heads *h = calloc(1, sizeof *h);
    if (!h) {
        err_set("out of memory");
        return NULL;
    }
    h->p = *p;
    memset(p, 0, sizeof *p);
    h->max_rows = max_rows < 1 ? 1 : max_rows;
    const int e = h->p.n_embd, n = h->p.n_draft_vocab, rows = h->max_rows * h->p.n_heads;
    for (int k = 0; k < h->p.n_heads; k++)
        h->block[k] = (weight){.name = "medusa block", .data = h->p.w[k], .type = WT_F32, .n_in = e, .n_out = e,
                               .row_bytes = (size_t)e * sizeof(float)};
    if (head_slice_init(&h->head, m, h->p.draft_vocab, n)) {
        medusa_free(h);
        return NULL;
    }
    h->y = malloc((size_t)rows * e * sizeof(float));
    h->logits = malloc((size_t)rows * n * sizeof(float));
    if (!h->y || !h->logits) goto oom;
    size_t sc = matmul_scratch_size(&h->head.w, rows);
    for (int k = 0; k < h->p.n_heads; k++)
        if (matmul_scratch_size(&h->block[k], h->max_rows) > sc) sc = matmul_scratch_size(&h->block[k], h->max_rows);
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
    head_slice_free(&h->head);
    free(h->y);
    free(h->logits);
    free(h->scratch);
    free(h);
}

int medusa_n_heads(const medusa_heads *h) { return h->p.n_heads; }

void medusa_propose(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int32_t *tokens) {
    medusa_propose_top(h, threads, hidden, n, k, 1, tokens);
}

void medusa_propose_top(medusa_heads *h, threadpool *threads, const float *hidden, int n, int k, int top,
                        int32_t *tokens) {
    const int e = h->p.n_embd, nv = h->p.n_draft_vocab;
    if (k > h->p.n_heads) k = h->p.n_heads;
    if (n > h->max_rows) n = h->max_rows;
    if (top > MEDUSA_MAX_TOP) top = MEDUSA_MAX_TOP;
    if (top > nv) top = nv;
    if (n <= 0 || k <= 0 || top <= 0) return;
    /* y rows in head-major order: head j's n rows together, one matmul each. */
    for (int j = 0; j < k; j++) {
        float *y = h->y + (size_t)j * n * e;
        matmul(threads, &h->block[j], hidden, n, y, h->scratch);
        for (int r = 0; r < n; r++) {
            float *yr = y + (size_t)r * e;
            const float *hr = hidden + (size_t)r * e;
            for (int i = 0; i < e; i++) {
                const float z = yr[i] + h->p.b[j][i];
                yr[i] = hr[i] + z / (1.0f + expf(-z));
            }
        }
    }
    matmul(threads, &h->head.w, h->y, n * k, h->logits, h->scratch);
    for (int j = 0; j < k; j++)
        for (int r = 0; r < n; r++) {
            int32_t best[MEDUSA_MAX_TOP];
            const int got = top_k_indices(h->logits + ((size_t)j * n + r) * nv, nv, top, NULL, NULL, best);
            for (int t = 0; t < top; t++) /* all NaN (a broken head): guess index 0 rather than garbage */
                tokens[((size_t)r * k + j) * top + t] = h->p.draft_vocab[t < got ? best[t] : 0];
        }
}
