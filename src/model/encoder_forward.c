/* The BERT forward pass over a packed batch (see encoder.h), in layer order:
 *
 *   x = LayerNorm(word[id] + position[p] + token_type[0])
 *   per layer:  x = LayerNorm(x + O(attention(Q x, K x, V x)))
 *               x = LayerNorm(x + Down(gelu(Up x)))
 *   pool each input's rows (mean, or the first), then L2-normalize.
 *
 * The projections run over every token of every input at once (matmul reads
 * each weight once per batch). Attention is the paged kernel of the decoder
 * (attn_tile), over K and V written into f32 blocks of this pass's own:
 * each input has its own blocks and every one of its tokens sees positions
 * 0 .. len-1, so the attention is bidirectional and no input sees another's
 * tokens or any padding. */
#include "model/encoder.h"

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KV_BLOCK ATTN_MAX_BLOCK

typedef struct {
    int seq, head, tok0, n_tok; /* tokens tok0 .. tok0 + n_tok - 1 of input seq */
} attn_job;

typedef struct {
    const encoder *enc;
    int n_seq;
    const int32_t *ids; /* [n_tok], the inputs' tokens one after another */
    const int32_t *pos; /* [n_tok], each token's position in its input */
    const int *lens;
    const int *start;       /* first row of each input in the packed batch */
    const int *first_block; /* first KV block of each input */
    float *x, *q, *k, *v, *att, *tmp, *ff;
    uint8_t *kv_k, *kv_v;
    size_t block_stride; /* bytes of one block: heads x KV_BLOCK rows */
    paged_kv pkv;
    int32_t *block_ids;  /* 0 .. n_blocks - 1: input i's table starts at first_block[i] */
    attn_job *jobs;
    attn_tile_fn tile;
    const encoder_layer *layer;
    float *rows;         /* the rows the bias steps add `bias` to, n_out wide */
    const float *bias;
    int n_out;
} pass;

/* Row of token t of the batch: x = LN(word + position + type 0). */
static void embed_rows(void *ctx, long lo, long hi) {
    pass *p = ctx;
    const encoder *enc = p->enc;
    const int d = enc->hp.n_embd;
    for (long t = lo; t < hi; t++) {
        float *x = p->x + t * d, *row = p->tmp + t * d;
        weight_row_to_float(&enc->tok_embd, p->ids[t], x);
        weight_row_to_float(&enc->pos_embd, p->pos[t], row);
        vec_add(x, row, d);
        weight_row_to_float(&enc->type_embd, 0, row);
        vec_add(x, row, d);
        layernorm(x, x, enc->embd_norm_w, enc->embd_norm_b, d, enc->hp.norm_eps);
    }
}

/* Writes each token's K and V rows into its input's blocks. */
static void store_kv(void *ctx, long lo, long hi) {
    pass *p = ctx;
    const encoder_hparams *hp = &p->enc->hp;
    for (long s = lo; s < hi; s++)
        for (int i = 0; i < p->lens[s]; i++) {
            const long t = p->start[s] + i;
            const size_t block = (size_t)(p->first_block[s] + i / KV_BLOCK);
            for (int h = 0; h < hp->n_head; h++) {
                const size_t row = ((size_t)h * KV_BLOCK + (size_t)(i % KV_BLOCK)) * (size_t)hp->head_dim;
                memcpy((float *)(p->kv_k + block * p->block_stride) + row, p->k + t * hp->n_embd + h * hp->head_dim,
                       (size_t)hp->head_dim * sizeof(float));
                memcpy((float *)(p->kv_v + block * p->block_stride) + row, p->v + t * hp->n_embd + h * hp->head_dim,
                       (size_t)hp->head_dim * sizeof(float));
            }
        }
}

static void attend(void *ctx, long lo, long hi) {
    pass *p = ctx;
    const encoder_hparams *hp = &p->enc->hp;
    const float scale = 1.0f / sqrtf((float)hp->head_dim);
    int32_t lo_pos[ATTN_TILE_ROWS], hi_pos[ATTN_TILE_ROWS];
    for (long j = lo; j < hi; j++) {
        const attn_job *job = &p->jobs[j];
        const size_t row0 = (size_t)(p->start[job->seq] + job->tok0) * (size_t)hp->n_embd;
        for (int i = 0; i < job->n_tok; i++) lo_pos[i] = 0, hi_pos[i] = p->lens[job->seq] - 1;
        const attn_tile t = {.q = p->q + row0 + (size_t)job->head * hp->head_dim,
                             .out = p->att + row0 + (size_t)job->head * hp->head_dim,
                             .q_stride = (size_t)hp->n_embd,
                             .out_stride = (size_t)hp->n_embd,
                             .lo = lo_pos,
                             .hi = hi_pos,
                             .n_tok = job->n_tok,
                             .n_head = 1};
        p->tile(&p->pkv, p->block_ids + p->first_block[job->seq], job->head, &t, scale);
    }
}

/* tmp rows += bias, then x = LN(x + tmp) with the given norm. */
static void residual_norm(pass *p, long lo, long hi, const float *nw, const float *nb) {
    const int d = p->enc->hp.n_embd;
    for (long t = lo; t < hi; t++) {
        float *x = p->x + t * d, *y = p->tmp + t * d;
        vec_add(y, p->bias, d);
        vec_add(x, y, d);
        layernorm(x, x, nw, nb, d, p->enc->hp.norm_eps);
    }
}

static void attn_residual_rows(void *ctx, long lo, long hi) {
    pass *p = ctx;
    residual_norm(p, lo, hi, p->layer->attn_norm_w, p->layer->attn_norm_b);
}

static void ffn_residual_rows(void *ctx, long lo, long hi) {
    pass *p = ctx;
    residual_norm(p, lo, hi, p->layer->out_norm_w, p->layer->out_norm_b);
}

static void bias_rows(void *ctx, long lo, long hi) {
    pass *p = ctx;
    for (long t = lo; t < hi; t++) vec_add(p->rows + t * p->n_out, p->bias, p->n_out);
}

static void bias_gelu_rows(void *ctx, long lo, long hi) {
    pass *p = ctx;
    for (long t = lo; t < hi; t++) {
        float *y = p->rows + t * p->n_out;
        vec_add(y, p->bias, p->n_out);
        gelu_erf(y, p->n_out);
    }
}

/* y = x W^T + b over every row. */
static void linear(pass *p, threadpool *threads, const weight *w, const float *b, const float *x, float *y, int n_tok,
                   void *scratch) {
    matmul(threads, w, x, n_tok, y, scratch);
    p->rows = y, p->bias = b, p->n_out = (int)w->n_out;
    threadpool_for(threads, n_tok, 16, bias_rows, p);
}

static void run_layer(pass *p, threadpool *threads, const encoder_layer *l, int n_tok, int n_jobs, void *scratch) {
    p->layer = l;
    linear(p, threads, &l->wq, l->bq, p->x, p->q, n_tok, scratch);
    linear(p, threads, &l->wk, l->bk, p->x, p->k, n_tok, scratch);
    linear(p, threads, &l->wv, l->bv, p->x, p->v, n_tok, scratch);
    threadpool_for(threads, p->n_seq, 1, store_kv, p);
    threadpool_for(threads, n_jobs, 1, attend, p);
    matmul(threads, &l->wo, p->att, n_tok, p->tmp, scratch);
    p->bias = l->bo;
    threadpool_for(threads, n_tok, 16, attn_residual_rows, p);
    matmul(threads, &l->w_up, p->x, n_tok, p->ff, scratch);
    p->rows = p->ff, p->bias = l->b_up, p->n_out = (int)l->w_up.n_out;
    threadpool_for(threads, n_tok, 8, bias_gelu_rows, p);
    matmul(threads, &l->w_down, p->ff, n_tok, p->tmp, scratch);
    p->bias = l->b_down;
    threadpool_for(threads, n_tok, 16, ffn_residual_rows, p);
}

/* Mean (or first-token) pooling of each input's rows, then the L2 norm. */
static void pool(const pass *p, float *out) {
    const encoder *enc = p->enc;
    const int d = enc->hp.n_embd;
    for (int s = 0; s < p->n_seq; s++) {
        float *o = out + (size_t)s * d;
        const float *x = p->x + (size_t)p->start[s] * d;
        const int n = enc->pooling == POOL_CLS ? 1 : p->lens[s];
        for (int j = 0; j < d; j++) {
            double acc = 0;
            for (int i = 0; i < n; i++) acc += x[(size_t)i * d + j];
            o[j] = (float)(acc / n);
        }
        if (!enc->normalize) continue;
        double ss = 0;
        for (int j = 0; j < d; j++) ss += (double)o[j] * o[j];
        /* torch.nn.functional.normalize: x / max(||x||, 1e-12) */
        const double norm = sqrt(ss);
        const float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
        vec_scale(o, inv, d);
    }
}

static size_t max_scratch(const encoder *enc, int n_tok) {
    size_t best = 0;
    for (int il = 0; il < enc->hp.n_layer; il++) {
        const encoder_layer *l = &enc->layers[il];
        const weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_up, &l->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) {
            const size_t sz = matmul_scratch_size(ws[i], n_tok);
            if (sz > best) best = sz;
        }
    }
    return best;
}

int encoder_forward(const encoder *enc, threadpool *threads, const int32_t *const *ids, const int *lens, int n,
                    float *out) {
    const encoder_hparams *hp = &enc->hp;
    pass p = {.enc = enc, .n_seq = n, .lens = lens, .tile = attn_tile_best()};
    long n_tok = 0, n_blocks = 0, n_jobs = 0;
    for (int s = 0; s < n; s++) {
        n_tok += lens[s];
        n_blocks += (lens[s] + KV_BLOCK - 1) / KV_BLOCK;
        n_jobs += (long)hp->n_head * ((lens[s] + ATTN_TILE_ROWS - 1) / ATTN_TILE_ROWS);
    }
    const size_t d = (size_t)hp->n_embd, rows = (size_t)n_tok;
    p.block_stride = (size_t)hp->n_head * KV_BLOCK * (size_t)hp->head_dim * sizeof(float);
    int *start = malloc((size_t)n * sizeof *start), *first_block = malloc((size_t)n * sizeof *first_block);
    int32_t *flat = malloc(2 * rows * sizeof *flat), *block_ids = malloc((size_t)n_blocks * sizeof *block_ids);
    attn_job *jobs = malloc((size_t)n_jobs * sizeof *jobs);
    float *acts = malloc((6 * d + (size_t)hp->n_ff) * rows * sizeof *acts);
    uint8_t *kv = malloc(2 * (size_t)n_blocks * p.block_stride);
    void *scratch = aligned_alloc(64, (max_scratch(enc, (int)n_tok) + 63) / 64 * 64 + 64);
    int rc = 0;
    if (!start || !first_block || !flat || !block_ids || !jobs || !acts || !kv || !scratch) {
        rc = err_oom("embeddings: out of memory for a batch of %d inputs, %ld tokens", n, n_tok);
        goto out;
    }
    long t = 0, b = 0, j = 0;
    for (int s = 0; s < n; s++) {
        start[s] = (int)t, first_block[s] = (int)b;
        for (int i = 0; i < lens[s]; i++, t++) flat[t] = ids[s][i], flat[rows + (size_t)t] = i;
        b += (lens[s] + KV_BLOCK - 1) / KV_BLOCK;
        for (int h = 0; h < hp->n_head; h++)
            for (int i = 0; i < lens[s]; i += ATTN_TILE_ROWS)
                jobs[j++] = (attn_job){s, h, i, lens[s] - i < ATTN_TILE_ROWS ? lens[s] - i : ATTN_TILE_ROWS};
    }
    for (long i = 0; i < n_blocks; i++) block_ids[i] = (int32_t)i;
    p.ids = flat, p.pos = flat + rows, p.start = start, p.first_block = first_block;
    p.block_ids = block_ids, p.jobs = jobs;
    p.x = acts, p.q = acts + d * rows, p.k = acts + 2 * d * rows, p.v = acts + 3 * d * rows;
    p.att = acts + 4 * d * rows, p.tmp = acts + 5 * d * rows, p.ff = acts + 6 * d * rows;
    p.kv_k = kv, p.kv_v = kv + (size_t)n_blocks * p.block_stride;
    p.pkv = (paged_kv){.k = p.kv_k, .v = p.kv_v, .k_block_stride = p.block_stride, .v_block_stride = p.block_stride,
                       .dtype = KV_F32, .block_size = KV_BLOCK, .n_kv_heads = hp->n_head,
                       .head_dim_k = hp->head_dim, .head_dim_v = hp->head_dim};
    threadpool_for(threads, n_tok, 16, embed_rows, &p);
    for (int il = 0; il < hp->n_layer; il++) run_layer(&p, threads, &enc->layers[il], (int)n_tok, (int)n_jobs, scratch);
    pool(&p, out);
out:
    free(scratch);
    free(kv);
    free(acts);
    free(jobs);
    free(block_ids);
    free(flat);
    free(first_block);
    free(start);
    return rc;
}
