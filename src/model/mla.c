/* See mla.h. */
#include "model/mla.h"

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

struct mla_scratch {
    float *qraw;  /* [T][n_head][nope + rope]: the projected query */
    float *qa;    /* [T][q_rank]: the low-rank query */
    float *kva;   /* [T][kv_rank + rope]: latent and rope key */
    float *hin;   /* per-head inputs of k_b / v_b, [n_head][n][nope] or [n_head][n][kv_rank] */
    float *hout;  /* and their outputs, [n_head][n][kv_rank] or [n_head][n][v] */
    matmul_task *tasks; /* [n_head] */
    void *mm;     /* matmul_multi's scratch */
};

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

mla_scratch *mla_scratch_create(const model *m, int max_tokens) {
    const model_hparams *hp = &m->hp;
    mla_scratch *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    const size_t T = (size_t)max_tokens, H = (size_t)hp->n_head, r = (size_t)hp->mla_kv_rank;
    const size_t qk = (size_t)(hp->mla_nope_dim + hp->rope_dim);
    const size_t in = max_sz((size_t)hp->mla_nope_dim, r), out = max_sz(r, (size_t)hp->mla_v_dim);
    size_t mm = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const mla_weights *w = &m->w.layers[il].mla;
        mm = max_sz(mm, matmul_multi_scratch_bound(&w->k_b[0], (int)H, (int)(H * T)));
        mm = max_sz(mm, matmul_multi_scratch_bound(&w->v_b[0], (int)H, (int)(H * T)));
    }
    s->qraw = malloc(T * H * qk * sizeof *s->qraw);
    s->qa = malloc(T * (size_t)(hp->mla_q_rank > 0 ? hp->mla_q_rank : 1) * sizeof *s->qa);
    s->kva = malloc(T * (r + (size_t)hp->rope_dim) * sizeof *s->kva);
    s->hin = malloc(H * T * in * sizeof *s->hin);
    s->hout = malloc(H * T * out * sizeof *s->hout);
    s->tasks = malloc(H * sizeof *s->tasks);
    s->mm = malloc(mm + 64);
    if (!s->qraw || !s->qa || !s->kva || !s->hin || !s->hout || !s->tasks || !s->mm) goto oom;
    return s;
oom:
    mla_scratch_free(s);
    err_oom("out of memory allocating latent attention buffers for %d tokens", max_tokens);
    return NULL;
}

void mla_scratch_free(mla_scratch *s) {
    if (!s) return;
    free(s->qraw);
    free(s->qa);
    free(s->kva);
    free(s->hin);
    free(s->hout);
    free(s->tasks);
    free(s->mm);
    free(s);
}

size_t mla_matmul_scratch_size(const model *m, int max_tokens) {
    size_t best = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const layer_weights *l = &m->w.layers[il];
        const weight *ws[] = {&l->wq, &l->mla.q_a, &l->mla.q_b, &l->mla.kv_a};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i]->data) best = max_sz(best, matmul_scratch_size(ws[i], max_tokens));
    }
    return best;
}

/* ---- row loops ---- */

typedef struct {
    const model_hparams *hp;
    const mla_weights *w;
    mla_scratch *s;
    const float *cs;
    float *q, *k, *v;
    const float *att;
    float *out;
    int n;
} rows_ctx;

static void q_norm_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const int qr = c->hp->mla_q_rank;
    for (long t = lo; t < hi; t++)
        rmsnorm(c->s->qa + t * qr, c->s->qa + t * qr, c->w->q_a_norm, qr, c->hp->norm_eps);
}

/* The latent's norm, rope on the shared key and each head's query rope
 * dims, the cache rows, and each head's nope dims gathered for k_b. */
static void prepare_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const model_hparams *hp = c->hp;
    const int H = hp->n_head, r = hp->mla_kv_rank, nope = hp->mla_nope_dim, rope = hp->rope_dim;
    const int qk = nope + rope, dk = hp->head_dim_k;
    for (long t = lo; t < hi; t++) {
        const float *cs = c->cs + t * rope;
        float *kva = c->s->kva + t * (r + rope), *qraw = c->s->qraw + t * H * qk;
        rmsnorm(kva, kva, c->w->kv_a_norm, r, hp->norm_eps);
        rope_apply(kva + r, 1, rope, rope, cs, ROPE_PAIRS_ADJACENT);
        rope_apply(qraw + nope, H, qk, rope, cs, ROPE_PAIRS_ADJACENT);
        memcpy(c->k + t * dk, kva, (size_t)(r + rope) * sizeof *kva);
        memcpy(c->v + t * r, kva, (size_t)r * sizeof *kva);
        for (int h = 0; h < H; h++) {
            memcpy(c->s->hin + ((size_t)h * c->n + t) * nope, qraw + h * qk, (size_t)nope * sizeof *qraw);
            memcpy(c->q + (t * H + h) * dk + r, qraw + h * qk + nope, (size_t)rope * sizeof *qraw);
        }
    }
}

/* Each head's absorbed query (k_b's output) into q. */
static void scatter_q_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const model_hparams *hp = c->hp;
    const int H = hp->n_head, r = hp->mla_kv_rank, dk = hp->head_dim_k;
    for (long t = lo; t < hi; t++)
        for (int h = 0; h < H; h++)
            memcpy(c->q + (t * H + h) * dk, c->s->hout + ((size_t)h * c->n + t) * r, (size_t)r * sizeof(float));
}

static void gather_att_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const model_hparams *hp = c->hp;
    const int H = hp->n_head, r = hp->mla_kv_rank;
    for (long t = lo; t < hi; t++)
        for (int h = 0; h < H; h++)
            memcpy(c->s->hin + ((size_t)h * c->n + t) * r, c->att + (t * H + h) * r, (size_t)r * sizeof(float));
}

static void scatter_out_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const model_hparams *hp = c->hp;
    const int H = hp->n_head, vd = hp->mla_v_dim;
    for (long t = lo; t < hi; t++)
        for (int h = 0; h < H; h++)
            memcpy(c->out + (t * H + h) * vd, c->s->hout + ((size_t)h * c->n + t) * vd, (size_t)vd * sizeof(float));
}

/* One matmul per head over that head's gathered rows (hin -> hout, packed
 * at the weight's input and output widths). */
static void per_head(threadpool *threads, const model_hparams *hp, const weight *ws, int n, mla_scratch *s) {
    for (int h = 0; h < hp->n_head; h++)
        s->tasks[h] = (matmul_task){&ws[h], s->hin + (size_t)h * n * ws[h].n_in, n, s->hout + (size_t)h * n * ws[h].n_out};
    matmul_multi(threads, s->tasks, hp->n_head, s->mm);
}

void mla_qkv(threadpool *threads, const model *m, int il, const float *x, int n, const float *cs, float *q, float *k,
             float *v, mla_scratch *s, void *mm_scratch) {
    const model_hparams *hp = &m->hp;
    const layer_weights *l = &m->w.layers[il];
    rows_ctx c = {.hp = hp, .w = &l->mla, .s = s, .cs = cs, .q = q, .k = k, .v = v, .n = n};
    if (l->mla.q_a.data) {
        matmul(threads, &l->mla.q_a, x, n, s->qa, mm_scratch);
        threadpool_for(threads, n, 4, q_norm_rows, &c);
        matmul(threads, &l->mla.q_b, s->qa, n, s->qraw, mm_scratch);
    } else {
        matmul(threads, &l->wq, x, n, s->qraw, mm_scratch);
    }
    matmul(threads, &l->mla.kv_a, x, n, s->kva, mm_scratch);
    threadpool_for(threads, n, 4, prepare_rows, &c);
    per_head(threads, hp, l->mla.k_b, n, s);
    threadpool_for(threads, n, 4, scatter_q_rows, &c);
}

void mla_values(threadpool *threads, const model *m, int il, const float *att, int n, float *out, mla_scratch *s) {
    const model_hparams *hp = &m->hp;
    rows_ctx c = {.hp = hp, .s = s, .att = att, .out = out, .n = n};
    threadpool_for(threads, n, 4, gather_att_rows, &c);
    per_head(threads, hp, m->w.layers[il].mla.v_b, n, s);
    threadpool_for(threads, n, 4, scatter_out_rows, &c);
}
