/* The forward pass; see forward.h. Read it top to bottom in layer order:
 * embed, then per layer (norm), QKV, (Q/K norm), rope, KV write, attention,
 * output projection, (post-norm), residual, (norm), gated MLP or experts
 * (moe.c), (post-norm), residual; then final norm, logits for the requested
 * rows, (soft-cap). Per-family differences are the hparams' fields (multipliers, soft-caps, NoPE layers)
 * and which optional weights exist (a norm that is absent is no norm). */
#include "model/forward.h"

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/mla.h"
#include "model/moe.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* rope_dim <= head_dim <= 4096 (model/arch.c). */
#define ATTN_PAIRS_MAX 4096

/* One piece of a layer's attention: query heads h0 .. h0+n_h-1 (of one GQA
 * group, kv head kv_head) of the consecutive tokens t0 .. t0+n_tok-1, all of
 * one sequence. A draft tree's node is a unit of its own, with its piece of
 * tree_rows (index tree_slot) to gather its path's keys into. */
typedef struct {
    int t0, n_tok, kv_head, h0, n_h, tree_slot;
} attn_unit;

struct forward_ctx {
    const model *m;
    kv_cache *kv;
    threadpool *threads;
    int max_tokens;
    int max_out;
    attn_tile_fn attn;
    const float *rope_factors; /* model_rope_factors, for the context this forward serves */
    attn_unit *units; /* this batch's attention work, [max_tokens * n_head] */
    int n_units;
    uint8_t *tree_rows;  /* draft trees' units' scratch (attn_tree_rows_bytes each), grown as needed */
    size_t tree_rows_cap;
    /* Activations of the batch, [max_tokens][...]. */
    float *x, *xb, *tmp, *q, *k, *v, *att, *gate, *up;
    float *rope_full, *rope_swa; /* [max_tokens][rope_dim] cos/sin pairs */
    float *out_x;                /* [max_out][n_embd] */
    void *mm_scratch;
    moe_scratch *moe;            /* NULL unless the model has experts */
    mla_scratch *mla;            /* NULL unless the model has latent attention */
    float *mla_out;              /* [max_tokens][n_head * mla_v_dim]: its value dims */
    float *qk_ss;                /* [max_tokens][2]: tensor parallelism with a whole-projection q/k norm
                                    (OLMo 2, OLMoE): each token's sums of squares of q and k, over the ranks */
    const fwd_hooks *hooks;      /* NULL unless an offline tool installed some */
    int last_tokens;             /* tokens of the last forward_run whose residual stream x holds */
};

/* ---- parallel loops over token rows ---- */

typedef struct forward_step forward_step;
typedef void (*row_fn)(const forward_step *s, int t);

/* What one parallel loop of a layer needs: the batch, the layer, the function. */
struct forward_step {
    forward_ctx *f;
    const fwd_batch *b;
    int il;
    row_fn fn;
    const int32_t *rows; /* the token rows whose logits are computed (final_norm_row) */
    float *logits;       /* their logits (logit_row) */
};

static void rows_worker(void *p, long lo, long hi) {
    const forward_step *s = p;
    for (long t = lo; t < hi; t++) s->fn(s, (int)t);
}

static void for_each(forward_step *s, row_fn fn, long n) {
    s->fn = fn;
    threadpool_for(s->f->threads, n, 1, rows_worker, s);
}

/* ---- the steps ---- */

static void embed_row(const forward_step *s, int t) {
    const model *m = s->f->m;
    float *x = s->f->x + (size_t)t * m->hp.n_embd;
    weight_row_to_float(&m->w.tok_embd, s->b->tokens[t], x);
    if (m->hp.embd_scale != 1.0f) vec_scale(x, m->hp.embd_scale, m->hp.n_embd);
}

/* The position token t is rotated at (fwd_batch.rope_pos). */
static int rope_pos_of(const fwd_batch *b, int t) {
    return b->rope_pos ? b->rope_pos[t] : b->pos[t];
}

static void rope_row(const forward_step *s, int t) {
    const model_hparams *hp = &s->f->m->hp;
    const int pos = rope_pos_of(s->b, t);
    float *full = s->f->rope_full + (size_t)t * hp->rope_dim;
    rope_angles(full, pos, hp->rope_dim, hp->rope_base, hp->rope_pos_scale, s->f->rope_factors);
    /* LongRoPE's and YaRN's attention factor scales the rotated dims of q and k. */
    if (hp->rope_attn_factor != 1.0f) vec_scale(full, hp->rope_attn_factor, hp->rope_dim);
    /* Gemma 3's sliding layers have a rope of their own: their base, never scaled. Elsewhere (Mistral,
     * gpt-oss, Gemma 2) a sliding layer rotates as the others do, with rope_full. */
    if (hparams_swa_own_rope(hp))
        rope_angles(s->f->rope_swa + (size_t)t * hp->rope_dim, pos, hp->rope_dim, hp->rope_base_swa, 1.0f, NULL);
}

/* out = rmsnorm(x) with weight w, or x itself where the family has no such
 * norm (OLMo 2 has no norm before attention and MLP). */
static void norm_or_copy(float *out, const float *x, const float *w, int n, float eps) {
    if (w) rmsnorm(out, x, w, n, eps);
    else memcpy(out, x, (size_t)n * sizeof *out);
}

static void attn_norm_row(const forward_step *s, int t) {
    const model *m = s->f->m;
    const int e = m->hp.n_embd;
    norm_or_copy(s->f->xb + (size_t)t * e, s->f->x + (size_t)t * e, m->w.layers[s->il].attn_norm, e,
                 m->hp.norm_eps);
}

static void write_kv(const forward_step *s, int t, const float *k, const float *v) {
    const kv_cache *kv = s->f->kv;
    const int pos = s->b->pos[t];
    const int blk = s->b->seqs[s->b->seq[t]].block_table[kv->layer_group[s->il]][pos / kv->block_size];
    const int off = pos % kv->block_size;
    uint8_t *kb = kv_k_block(kv, s->il, blk), *vb = kv_v_block(kv, s->il, blk);
    const size_t k_row = kv_row_bytes(kv->dtype, kv->head_dim_k), v_row = kv_row_bytes(kv->dtype, kv->head_dim_v);
    for (int h = 0; h < kv->n_kv_heads; h++) {
        const size_t row = (size_t)h * kv->block_size + off;
        kv_row_store(kv->dtype, k + (size_t)h * kv->head_dim_k, kb + row * k_row, kv->head_dim_k);
        if (!kv->v_in_k) /* else V is the K row's prefix: latent attention's K row starts with it */
            kv_row_store(kv->dtype, v + (size_t)h * kv->head_dim_v, vb + row * v_row, kv->head_dim_v);
    }
}

/* Puts the rope pairs of each head in halves order (2i to i, 2i + 1 to
 * rope_dim/2 + i), the order a NEOX-rope model holds them in. A dot product's
 * rounding depends on the order of its terms, so attention keeps Q and K in
 * one order whatever the family's rope layout: a Llama folder (HF rows,
 * rotate-half rope) and its GGUF export (rows permuted, adjacent-pair rope)
 * then give the same scores bit for bit, and so quantize to the same bytes
 * after calibration. Any order of the dims shared by Q and K is the same
 * attention. */
static void rope_pairs_to_halves(float *x, int n_heads, int head_dim, int rope_dim) {
    float tmp[ATTN_PAIRS_MAX];
    const int half = rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) tmp[i] = v[2 * i], tmp[half + i] = v[2 * i + 1];
        memcpy(v, tmp, sizeof(float) * 2 * half);
    }
}

/* x's share of an RMS norm whose sum of squares over all n_total elements is
 * ss (the ranks' sums added; rmsnorm's formula otherwise). */
static void norm_by_sum(float *x, const float *w, int n, float ss, int n_total, float eps) {
    const float r = (float)(1.0 / sqrt((double)ss / n_total + eps));
    for (int i = 0; i < n; i++) x[i] = x[i] * r * w[i];
}

/* This rank's part of each token's sums of squares of q and k (no biases:
 * the families with a whole-projection norm have none; shard.c checks). */
static void qk_sumsq_row(const forward_step *s, int t) {
    forward_ctx *f = s->f;
    const model_hparams *hp = &f->m->hp;
    const int q_dim = hp->n_head * hp->head_dim_k, k_dim = hp->n_head_kv * hp->head_dim_k;
    const float *q = f->q + (size_t)t * q_dim, *k = f->k + (size_t)t * k_dim;
    double sq = 0, sk = 0;
    for (int i = 0; i < q_dim; i++) sq += (double)q[i] * q[i];
    for (int i = 0; i < k_dim; i++) sk += (double)k[i] * k[i];
    f->qk_ss[2 * t] = (float)sq, f->qk_ss[2 * t + 1] = (float)sk;
}

/* Biases, Q/K norms, rope, and the K/V write of one token. */
static void qkv_row(const forward_step *s, int t) {
    forward_ctx *f = s->f;
    const model_hparams *hp = &f->m->hp;
    const layer_weights *l = &f->m->w.layers[s->il];
    const int q_dim = hp->n_head * hp->head_dim_k;
    const int k_dim = hp->n_head_kv * hp->head_dim_k;
    const int v_dim = hp->n_head_kv * hp->head_dim_v;
    float *q = f->q + (size_t)t * q_dim, *k = f->k + (size_t)t * k_dim, *v = f->v + (size_t)t * v_dim;
    if (l->bq) {
        vec_add(q, l->bq, q_dim);
        vec_add(k, l->bk, k_dim);
        vec_add(v, l->bv, v_dim);
    }
    if (l->q_norm && hp->traits->qk_norm == QK_NORM_ALL && f->qk_ss) {
        const int ranks = f->m->tp.size; /* every rank holds q_dim and k_dim of them (shard.c) */
        norm_by_sum(q, l->q_norm, q_dim, f->qk_ss[2 * t], q_dim * ranks, hp->norm_eps);
        norm_by_sum(k, l->k_norm, k_dim, f->qk_ss[2 * t + 1], k_dim * ranks, hp->norm_eps);
    } else if (l->q_norm && hp->traits->qk_norm == QK_NORM_ALL) {
        rmsnorm(q, q, l->q_norm, q_dim, hp->norm_eps);
        rmsnorm(k, k, l->k_norm, k_dim, hp->norm_eps);
    } else if (l->q_norm) {
        for (int h = 0; h < hp->n_head; h++)
            rmsnorm(q + h * hp->head_dim_k, q + h * hp->head_dim_k, l->q_norm, hp->head_dim_k, hp->norm_eps);
        for (int h = 0; h < hp->n_head_kv; h++)
            rmsnorm(k + h * hp->head_dim_k, k + h * hp->head_dim_k, l->k_norm, hp->head_dim_k, hp->norm_eps);
    }
    const bool own = hp->is_swa[s->il] && hparams_swa_own_rope(hp);
    const float *cs = (own ? f->rope_swa : f->rope_full) + (size_t)t * hp->rope_dim;
    const rope_pairs pairs = hp->rope == ROPE_NEOX ? ROPE_PAIRS_HALVES : ROPE_PAIRS_ADJACENT;
    if (!hp->no_rope[s->il]) {
        rope_apply(q, hp->n_head, hp->head_dim_k, hp->rope_dim, cs, pairs);
        rope_apply(k, hp->n_head_kv, hp->head_dim_k, hp->rope_dim, cs, pairs);
    }
    if (pairs == ROPE_PAIRS_ADJACENT) {
        rope_pairs_to_halves(q, hp->n_head, hp->head_dim_k, hp->rope_dim);
        rope_pairs_to_halves(k, hp->n_head_kv, hp->head_dim_k, hp->rope_dim);
    }
    write_kv(s, t, k, v);
}

/* Latent attention's cache rows (mla.c made them). */
static void mla_kv_row(const forward_step *s, int t) {
    const model_hparams *hp = &s->f->m->hp;
    write_kv(s, t, s->f->k + (size_t)t * hp->head_dim_k, s->f->v + (size_t)t * hp->head_dim_v);
}

/* Whether token t is a node of a draft tree (fwd_batch.tree). */
static bool in_tree(const fwd_batch *b, int t) { return b->tree && b->tree[t]; }

/* Tokens in the tile that starts at token t: up to max consecutive tokens
 * of t's sequence; a draft tree's node is a tile of its own
 * (attn_tile.tree). */
static int tile_len(const fwd_batch *b, int t, int max) {
    int n = 1;
    if (in_tree(b, t)) return 1;
    while (t + n < b->n_tokens && n < max && b->seq[t + n] == b->seq[t] && !in_tree(b, t + n)) n++;
    return n;
}

/* Layer il's K/V pages as the attention kernels read them. */
static paged_kv layer_pages(const kv_cache *kv, int il) {
    return (paged_kv){.k = kv_k_block(kv, il, 0), .v = kv_v_block(kv, il, 0),
                      .k_block_stride = (size_t)kv->layers_per_group * kv->k_layer_bytes,
                      .v_block_stride = (size_t)kv->layers_per_group * (kv->v_in_k ? kv->k_layer_bytes : kv->v_layer_bytes),
                      .v_in_k = kv->v_in_k,
                      .dtype = kv->dtype, .block_size = kv->block_size,
                      .n_kv_heads = kv->n_kv_heads, .head_dim_k = kv->head_dim_k,
                      .head_dim_v = kv->head_dim_v};
}

/* Cuts the batch's attention into units: runs of consecutive tokens of one
 * sequence, in tiles of up to ATTN_TILE_ROWS rows (tokens x the heads of a GQA
 * group), per kv head. Where that gives fewer units than threads (decode of
 * one sequence), the group's heads are shared out over as many units as there
 * are threads: each unit reads its kv head's K/V once, so no more parts than
 * that. A row's bits do not depend on its tile (attention.h), so neither do
 * the outputs. */
static int plan_attention(forward_ctx *f, const fwd_batch *b) {
    const model_hparams *hp = &f->m->hp;
    const int group = hp->n_head / hp->n_head_kv;
    const int tile_tok = group < ATTN_TILE_ROWS ? ATTN_TILE_ROWS / group : 1;
    int n_tiles = 0;
    for (int t = 0; t < b->n_tokens; t += tile_len(b, t, tile_tok)) n_tiles++;
    const int n_tp = threadpool_size(f->threads), n_kv_tiles = n_tiles * hp->n_head_kv;
    const int parts = n_kv_tiles >= n_tp ? 1 : (n_tp + n_kv_tiles - 1) / n_kv_tiles;
    int per_unit = parts >= group ? 1 : (group + parts - 1) / parts;
    if (per_unit > ATTN_TILE_ROWS) per_unit = ATTN_TILE_ROWS; /* a group of more than 32 heads: tiles of 1 token */
    f->n_units = 0;
    int n_tree = 0;
    for (int t = 0; t < b->n_tokens;) {
        const int n = tile_len(b, t, tile_tok);
        for (int kh = 0; kh < hp->n_head_kv; kh++)
            for (int h = kh * group; h < (kh + 1) * group; h += per_unit) {
                const int n_h = (kh + 1) * group - h < per_unit ? (kh + 1) * group - h : per_unit;
                f->units[f->n_units++] = (attn_unit){.t0 = t, .n_tok = n, .kv_head = kh, .h0 = h, .n_h = n_h,
                                                     .tree_slot = in_tree(b, t) ? n_tree++ : -1};
            }
        t += n;
    }
    /* Every layer's pages have one row shape, so one size serves the pass. */
    const paged_kv pk = layer_pages(f->kv, 0);
    const size_t need = (size_t)n_tree * attn_tree_rows_bytes(&pk);
    if (need > f->tree_rows_cap) {
        uint8_t *grown = realloc(f->tree_rows, need);
        if (!grown) return err_oom("out of memory for a draft tree's attention (%zu bytes)", need);
        f->tree_rows = grown, f->tree_rows_cap = need;
    }
    return 0;
}

/* First key position a query at pos sees in layer il. */
static int first_key(const kv_cache *kv, int il, int pos) {
    const int window = kv->group_window[kv->layer_group[il]];
    return window && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/* One attention unit. Units run last to first: in a prompt the later tokens
 * see more keys, so the longest units start first and the threads finish
 * together. */
static void attn_unit_run(const forward_step *s, int u) {
    forward_ctx *f = s->f;
    const model_hparams *hp = &f->m->hp;
    const kv_cache *kv = f->kv;
    const attn_unit *a = &f->units[f->n_units - 1 - u];
    const fwd_seq *fs = &s->b->seqs[s->b->seq[a->t0]];
    const int g = kv->layer_group[s->il];
    const paged_kv pk = layer_pages(kv, s->il);
    const float *sinks = f->m->w.layers[s->il].sinks;
    int32_t lo[ATTN_TILE_ROWS], hi[ATTN_TILE_ROWS];
    for (int i = 0; i < a->n_tok; i++) { /* a tree node sees its path as at the positions of its rotation */
        hi[i] = in_tree(s->b, a->t0 + i) ? rope_pos_of(s->b, a->t0 + i) : s->b->pos[a->t0 + i];
        lo[i] = first_key(kv, s->il, rope_pos_of(s->b, a->t0 + i));
    }
    const attn_tile tile = {.q = f->q + ((size_t)a->t0 * hp->n_head + a->h0) * hp->head_dim_k,
                            .out = f->att + ((size_t)a->t0 * hp->n_head + a->h0) * hp->head_dim_v,
                            .q_stride = (size_t)hp->n_head * hp->head_dim_k,
                            .out_stride = (size_t)hp->n_head * hp->head_dim_v,
                            .lo = lo, .hi = hi, .n_tok = a->n_tok, .n_head = a->n_h,
                            .softcap = hp->attn_softcap, .key_mass = fs->attn_acc,
                            .sinks = sinks ? sinks + a->h0 : NULL,
                            .tree = a->tree_slot >= 0 ? s->b->tree + a->t0 : NULL, .tree_base = fs->tree_base,
                            .tree_rows = a->tree_slot >= 0 ? f->tree_rows + (size_t)a->tree_slot * attn_tree_rows_bytes(&pk)
                                                           : NULL};
    f->attn(&pk, fs->block_table[g], a->kv_head, &tile, hp->attn_scale);
}

/* x += post_norm(out) * residual_scale: the end of attention or MLP. */
static void add_residual(const model_hparams *hp, float *x, float *out, const float *post_norm) {
    if (post_norm) rmsnorm(out, out, post_norm, hp->n_embd, hp->norm_eps);
    if (hp->residual_scale != 1.0f) vec_scale(out, hp->residual_scale, hp->n_embd);
    vec_add(x, out, hp->n_embd);
}

/* After the output projection: post-norm, residual, and the MLP's input norm. */
static void attn_residual_row(const forward_step *s, int t) {
    const model *m = s->f->m;
    const layer_weights *l = &m->w.layers[s->il];
    const int e = m->hp.n_embd;
    float *x = s->f->x + (size_t)t * e, *out = s->f->tmp + (size_t)t * e;
    if (l->bo) vec_add(out, l->bo, e); /* after the ranks' sum: added once */
    add_residual(&m->hp, x, out, l->post_attn_norm);
    norm_or_copy(s->f->xb + (size_t)t * e, x, l->ffn_norm, e, m->hp.norm_eps);
}

static void act_row(const forward_step *s, int t) {
    const model_hparams *hp = &s->f->m->hp;
    float *g = s->f->gate + (size_t)t * hp->n_ff;
    const float *u = s->f->up + (size_t)t * hp->n_ff;
    ffn_activation(hp, g, u, hp->n_ff);
}

static void ffn_residual_row(const forward_step *s, int t) {
    const model *m = s->f->m;
    const int e = m->hp.n_embd;
    add_residual(&m->hp, s->f->x + (size_t)t * e, s->f->tmp + (size_t)t * e, m->w.layers[s->il].post_ffn_norm);
}

/* Granite's logit multiplier, then Gemma 2's soft-cap: cap * tanh(z / cap). */
static void logit_row(const forward_step *s, int i) {
    const model_hparams *hp = &s->f->m->hp;
    float *z = s->logits + (size_t)i * hp->n_vocab;
    if (hp->logit_scale != 1.0f) vec_scale(z, hp->logit_scale, hp->n_vocab);
    if (hp->final_softcap > 0)
        for (int v = 0; v < hp->n_vocab; v++) z[v] = hp->final_softcap * tanhf(z[v] / hp->final_softcap);
}

static void final_norm_row(const forward_step *s, int i) {
    const model *m = s->f->m;
    const int e = m->hp.n_embd;
    rmsnorm(s->f->out_x + (size_t)i * e, s->f->x + (size_t)s->rows[i] * e, m->w.output_norm, e, m->hp.norm_eps);
}

/* Shows a linear input to the installed hook, if any. */
static void capture(const forward_ctx *f, int il, fwd_linear_input which, const float *x, int n, int n_in) {
    if (f->hooks && f->hooks->linear_input) f->hooks->linear_input(f->hooks->user, il, which, x, n, n_in);
}

/* Tensor parallelism: each rank's output projection gave its heads' (or FFN
 * columns') share of tmp; the ranks add theirs up. */
static void sum_over_ranks(const forward_ctx *f, int n) {
    const model_tp *par = &f->m->tp; /* tensor parallelism's hooks */
    if (par->allreduce) par->allreduce(par->user, f->tmp, (size_t)n * f->m->hp.n_embd);
}

static void run_layer(forward_ctx *f, forward_step *s, int n) {
    const layer_weights *l = &f->m->w.layers[s->il];
    const model_hparams *hp = &f->m->hp;
    for_each(s, attn_norm_row, n);
    if (f->mla) {
        mla_qkv(f->threads, f->m, s->il, f->xb, n, f->rope_full, f->q, f->k, f->v, f->mla, f->mm_scratch);
        for_each(s, mla_kv_row, n);
        for_each(s, attn_unit_run, f->n_units);
        mla_values(f->threads, f->m, s->il, f->att, n, f->mla_out, f->mla);
        matmul(f->threads, &l->wo, f->mla_out, n, f->tmp, f->mm_scratch);
    } else {
        capture(f, s->il, FWD_IN_QKV, f->xb, n, hp->n_embd);
        matmul(f->threads, &l->wq, f->xb, n, f->q, f->mm_scratch);
        matmul(f->threads, &l->wk, f->xb, n, f->k, f->mm_scratch);
        matmul(f->threads, &l->wv, f->xb, n, f->v, f->mm_scratch);
        if (f->qk_ss) {
            for_each(s, qk_sumsq_row, n);
            f->m->tp.allreduce(f->m->tp.user, f->qk_ss, 2 * (size_t)n);
        }
        for_each(s, qkv_row, n);
        for_each(s, attn_unit_run, f->n_units);
        capture(f, s->il, FWD_IN_O, f->att, n, hp->n_head * hp->head_dim_v);
        matmul(f->threads, &l->wo, f->att, n, f->tmp, f->mm_scratch);
    }
    sum_over_ranks(f, n);
    for_each(s, attn_residual_row, n);
    if (l->moe.gate) {
        moe_ffn(f->threads, hp, &l->moe, f->xb, n, f->tmp, f->moe, f->mm_scratch);
    } else {
        capture(f, s->il, FWD_IN_UPGATE, f->xb, n, hp->n_embd);
        matmul(f->threads, &l->w_gate, f->xb, n, f->gate, f->mm_scratch);
        matmul(f->threads, &l->w_up, f->xb, n, f->up, f->mm_scratch);
        for_each(s, act_row, n);
        capture(f, s->il, FWD_IN_DOWN, f->gate, n, hp->n_ff);
        matmul(f->threads, &l->w_down, f->gate, n, f->tmp, f->mm_scratch);
    }
    sum_over_ranks(f, n);
    for_each(s, ffn_residual_row, n);
}

static int check_batch(const forward_ctx *f, const fwd_batch *b) {
    if (b->n_tokens < 1 || b->n_tokens > f->max_tokens)
        return err_set("batch of %d tokens (limit %d)", b->n_tokens, f->max_tokens);
    if (b->n_out < 0 || b->n_out > f->max_out) return err_set("%d logit rows (limit %d)", b->n_out, f->max_out);
    const kv_cache *kv = f->kv;
    /* The embedding's rows, not hp.n_vocab: a draft that scores a slice of
     * the vocabulary (model/head_slice.h) still reads every token. */
    const int64_t n_tok = f->m->w.tok_embd.n_out;
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= n_tok)
            return err_set("token id %d is outside the vocabulary (%lld)", b->tokens[t], (long long)n_tok);
        if (b->seq[t] < 0 || b->seq[t] >= b->n_seqs || b->pos[t] < 0)
            return err_set("token %d has an invalid sequence or position", t);
        if (b->rope_pos && (b->rope_pos[t] < 0 || b->rope_pos[t] > b->pos[t]))
            return err_set("token %d is rotated at position %d, past its KV position %d", t, b->rope_pos[t], b->pos[t]);
        if (b->tree && b->tree[t]) {
            const int node = b->pos[t] - b->seqs[b->seq[t]].tree_base;
            if (node < 0 || node >= ATTN_TREE_MAX || !(b->tree[t] >> node & 1u) || b->tree[t] >> (node + 1) ||
                !(b->tree[t] & 1u))
                return err_set("token %d (position %d) is not a node of its sequence's draft tree", t, b->pos[t]);
            const int depth = __builtin_popcount(b->tree[t]) - 1;
            if (rope_pos_of(b, t) != b->seqs[b->seq[t]].tree_base + depth)
                return err_set("draft tree node %d (position %d) must be rotated at its depth, position %d", t,
                               b->pos[t], b->seqs[b->seq[t]].tree_base + depth);
        }
        for (int g = 0; g < kv->n_groups; g++) {
            int blk = b->seqs[b->seq[t]].block_table[g][b->pos[t] / kv->block_size];
            if (blk < 0 || blk >= kv->n_blocks)
                return err_set("token %d (position %d) maps to invalid KV block %d", t, b->pos[t], blk);
        }
    }
    return 0;
}

int forward_run(forward_ctx *f, const fwd_batch *b, float *logits) {
    if (check_batch(f, b)) return -1;
    if (f->m->tp.on_forward && (b->tree || b->rope_pos))
        return err_set("draft trees are not run under tensor parallelism");
    if (f->m->tp.on_forward)
        f->m->tp.on_forward(f->m->tp.user, f->kv, b, f->m->w.rope_long && f->rope_factors == f->m->w.rope_long);
    const int n = b->n_tokens;
    f->last_tokens = 0;
    forward_step s = {.f = f, .b = b};
    const fwd_hooks *h = f->hooks;
    const int n_embd = f->m->hp.n_embd;
    if (h && h->x_in) memcpy(f->x, h->x_in, (size_t)n * n_embd * sizeof(float));
    else for_each(&s, embed_row, n);
    for_each(&s, rope_row, n);
    if (plan_attention(f, b)) return -1;
    const int first = h ? h->first_layer : 0;
    const int last = h && h->last_layer >= 0 ? h->last_layer : f->m->hp.n_layer - 1;
    for (int il = first; il <= last; il++) {
        s.il = il;
        run_layer(f, &s, n);
    }
    if (h && h->x_out) {
        memcpy(h->x_out, f->x, (size_t)n * n_embd * sizeof(float));
        return 0;
    }
    f->last_tokens = n;
    return forward_logits(f, b->out_rows, b->n_out, logits);
}

int forward_logits(forward_ctx *f, const int32_t *rows, int n_rows, float *logits) {
    if (n_rows < 0 || n_rows > f->max_out) return err_set("%d logit rows (limit %d)", n_rows, f->max_out);
    for (int i = 0; i < n_rows; i++)
        if (rows[i] < 0 || rows[i] >= f->last_tokens) return err_set("invalid logit row %d", rows[i]);
    if (n_rows == 0) return 0;
    forward_step s = {.f = f, .rows = rows, .logits = logits};
    for_each(&s, final_norm_row, n_rows);
    matmul(f->threads, &f->m->w.output, f->out_x, n_rows, logits, f->mm_scratch);
    const model_hparams *hp = &f->m->hp;
    if (hp->logit_scale != 1.0f || hp->final_softcap > 0) for_each(&s, logit_row, n_rows);
    return 0;
}

int forward_hidden(forward_ctx *f, const int32_t *rows, int n_rows, float *out) {
    const model *m = f->m;
    const int e = m->hp.n_embd;
    for (int i = 0; i < n_rows; i++) {
        if (rows[i] < 0 || rows[i] >= f->last_tokens) return err_set("invalid hidden row %d", rows[i]);
        rmsnorm(out + (size_t)i * e, f->x + (size_t)rows[i] * e, m->w.output_norm, e, m->hp.norm_eps);
    }
    return 0;
}

static size_t max_scratch(const model *m, int max_tokens, int max_out) {
    size_t best = matmul_scratch_size(&m->w.output, max_out);
    if (m->hp.mla_kv_rank > 0 && mla_matmul_scratch_size(m, max_tokens) > best) best = mla_matmul_scratch_size(m, max_tokens);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const layer_weights *l = &m->w.layers[il];
        const weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            size_t sz = ws[i]->data ? matmul_scratch_size(ws[i], max_tokens) : 0;
            if (sz > best) best = sz;
        }
        if (l->moe.gate && moe_matmul_scratch_size(&m->hp, &l->moe, max_tokens) > best)
            best = moe_matmul_scratch_size(&m->hp, &l->moe, max_tokens);
    }
    return best;
}

forward_ctx *forward_create(const model *m, kv_cache *kv, int max_tokens, int max_out, threadpool *threads) {
    forward_ctx *f = calloc(1, sizeof *f);
    if (!f) goto oom;
    const model_hparams *hp = &m->hp;
    f->m = m;
    f->kv = kv;
    f->threads = threads;
    f->max_tokens = max_tokens;
    f->max_out = max_out;
    f->attn = attn_tile_best();
    f->rope_factors = model_rope_factors(m, 0);
    const size_t T = (size_t)max_tokens;
    float **bufs[] = {&f->x, &f->xb, &f->tmp, &f->q, &f->k, &f->v, &f->att, &f->gate, &f->up,
                      &f->rope_full, &f->rope_swa, &f->out_x};
    const size_t sizes[] = {T * hp->n_embd, T * hp->n_embd, T * hp->n_embd,
                            T * hp->n_head * hp->head_dim_k, T * hp->n_head_kv * hp->head_dim_k,
                            T * hp->n_head_kv * hp->head_dim_v, T * hp->n_head * hp->head_dim_v,
                            T * hp->n_ff, T * hp->n_ff, T * hp->rope_dim, T * hp->rope_dim,
                            (size_t)max_out * hp->n_embd};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        *bufs[i] = malloc(sizes[i] * sizeof(float));
        if (!*bufs[i]) goto oom;
    }
    f->mm_scratch = malloc(max_scratch(m, max_tokens, max_out) + 64);
    f->units = malloc(T * hp->n_head * sizeof *f->units);
    if (!f->mm_scratch || !f->units) goto oom;
    if (hp->n_expert > 0 && !(f->moe = moe_scratch_create(m, max_tokens))) goto oom;
    if (hp->mla_kv_rank > 0 && (!(f->mla = mla_scratch_create(m, max_tokens)) ||
                                !(f->mla_out = malloc(T * hp->n_head * hp->mla_v_dim * sizeof(float)))))
        goto oom;
    if (m->tp.allreduce && hp->traits->qk_norm == QK_NORM_ALL && !(f->qk_ss = malloc(2 * T * sizeof(float))))
        goto oom;
    return f;
oom:
    forward_free(f);
    err_oom("out of memory allocating forward buffers for %d tokens", max_tokens);
    return NULL;
}

void forward_set_hooks(forward_ctx *f, const fwd_hooks *h) { f->hooks = h; }

void forward_set_rope_factors(forward_ctx *f, const float *factors) { f->rope_factors = factors; }

void forward_moe_counts(const forward_ctx *f, uint64_t *layer_steps, uint64_t *experts_read) {
    moe_counts(f->moe, layer_steps, experts_read);
}

void forward_free(forward_ctx *f) {
    if (!f) return;
    float *bufs[] = {f->x, f->xb, f->tmp, f->q, f->k, f->v, f->att, f->gate, f->up,
                     f->rope_full, f->rope_swa, f->out_x};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(f->mm_scratch);
    free(f->units);
    free(f->tree_rows);
    moe_scratch_free(f->moe);
    mla_scratch_free(f->mla);
    free(f->mla_out);
    free(f->qk_ss);
    free(f);
}
