/* See shard.h. */
#include "model/shard.h"

#include "format/wtype_geom.h"
#include "util/error.h"

#include <inttypes.h>
#include <string.h>

/* Keeps rows [r0, r0 + n) of w: a view further into the same data. */
static void keep_rows(weight *w, int64_t r0, int64_t n) {
    w->data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    w->n_out = n;
}

/* Keeps columns [c0, c0 + n) of every row of w, copied into memory the model
 * owns. The cut must fall on the type's blocks: a row is a run of blocks,
 * so the share is a byte range of each row. */
static int keep_cols(model *m, weight *w, int64_t c0, int64_t n, int size) {
    if (w->perm) return err_set("tensor '%s': act-order weights cannot be split by columns", w->name);
    const int bs = wtype_block_size(w->type);
    if (bs <= 0 || wtype_row_block(w->type))
        return err_set("tensor '%s': %s rows are one block each and cannot be split by columns", w->name,
                       wtype_name(w->type));
    if (c0 % bs || n % bs)
        return err_set("tensor '%s': a tensor-parallel size of %d gives each rank %" PRId64 " of its %" PRId64
                       " columns, not a multiple of the %s block of %d; choose a size that divides the columns "
                       "into whole blocks",
                       w->name, size, n, w->n_in, wtype_name(w->type), bs);
    const size_t row_bytes = wtype_row_size(w->type, n), skip = wtype_row_size(w->type, c0);
    if (c0 && !skip) return err_set("tensor '%s': cannot size a column share of %s", w->name, wtype_name(w->type));
    uint8_t *out = tensors_alloc(&m->tensors, row_bytes * (size_t)w->n_out);
    if (!out) return -1;
    for (int64_t r = 0; r < w->n_out; r++)
        memcpy(out + (size_t)r * row_bytes, (const uint8_t *)w->data + (size_t)r * w->row_bytes + skip, row_bytes);
    w->data = out;
    w->n_in = n;
    w->row_bytes = row_bytes;
    return 0;
}

static const float *vec_part(const float *v, int64_t off) { return v ? v + off : NULL; }

/* The heads and FFN columns of one rank. */
typedef struct {
    int q0, n_q;   /* query heads */
    int kv0, n_kv; /* KV heads */
    int f0, n_f;   /* FFN hidden columns */
    int e0, n_e;   /* each routed expert's hidden columns */
    int s0, n_s;   /* the shared expert's */
    int rank;
} shard_share;

/* dense: some layer has a dense FFN (a mixture of experts may have none). */
static int share_of(const model_hparams *hp, bool dense, int rank, int size, shard_share *s) {
    if (hp->n_head % size)
        return err_set("a tensor-parallel size of %d does not divide the model's %d attention heads", size,
                       hp->n_head);
    if (dense && hp->n_ff % size)
        return err_set("a tensor-parallel size of %d does not divide the model's %d FFN columns", size, hp->n_ff);
    if (hp->n_head_kv % size && size % hp->n_head_kv)
        return err_set("a tensor-parallel size of %d neither divides the model's %d KV heads nor is a multiple "
                       "of them (to replicate each KV head)",
                       size, hp->n_head_kv);
    s->n_q = hp->n_head / size;
    s->q0 = rank * s->n_q;
    if (hp->n_head_kv % size == 0) {
        s->n_kv = hp->n_head_kv / size;
        s->kv0 = rank * s->n_kv;
    } else { /* several ranks share each KV head: the one their query heads read */
        s->n_kv = 1;
        s->kv0 = s->q0 / (hp->n_head / hp->n_head_kv);
    }
    s->rank = rank;
    s->n_f = hp->n_ff / size;
    s->f0 = rank * s->n_f;
    if (hp->n_expert > 0) {
        if (hp->n_ff_exp % size || hp->n_ff_shexp % size)
            return err_set("a tensor-parallel size of %d does not divide the experts' %d hidden columns (shared: %d)",
                           size, hp->n_ff_exp, hp->n_ff_shexp);
        s->n_e = hp->n_ff_exp / size, s->e0 = rank * s->n_e;
        s->n_s = hp->n_ff_shexp / size, s->s0 = rank * s->n_s;
    }
    return 0;
}

static int shard_dense_ffn(model *m, layer_weights *l, const shard_share *s, int size) {
    keep_rows(&l->w_gate, s->f0, s->n_f);
    keep_rows(&l->w_up, s->f0, s->n_f);
    return keep_cols(m, &l->w_down, s->f0, s->n_f, size);
}

/* A mixture of experts splits as a dense FFN does, expert by expert: each
 * rank keeps its share of every expert's (and the shared expert's) gate
 * and up rows and down columns, so its experts' outputs are partial sums
 * that the FFN's all-reduce adds up. The router stays whole on every rank:
 * the same inputs give every rank the same choice. */
static int shard_experts(model *m, moe_weights *w, const shard_share *s, int size) {
    if (w->gate_bias) { /* gpt-oss: each expert's share of its gate and up biases, [n_expert][n_e] */
        const int E = m->hp.n_expert, F = m->hp.n_ff_exp;
        float *b = tensors_alloc(&m->tensors, 2 * (size_t)E * (size_t)s->n_e * sizeof *b);
        if (!b) return -1;
        for (int e = 0; e < E; e++) {
            memcpy(b + (size_t)e * s->n_e, w->gate_bias + (size_t)e * F + s->e0, (size_t)s->n_e * sizeof *b);
            memcpy(b + (size_t)(E + e) * s->n_e, w->up_bias + (size_t)e * F + s->e0, (size_t)s->n_e * sizeof *b);
        }
        w->gate_bias = b, w->up_bias = b + (size_t)E * s->n_e;
    }
    if (s->rank > 0) w->down_bias = NULL; /* added once, by rank 0, before the sum */
    for (int e = 0; e < m->hp.n_expert; e++) {
        keep_rows(&w->gate[e], s->e0, s->n_e);
        keep_rows(&w->up[e], s->e0, s->n_e);
        if (keep_cols(m, &w->down[e], s->e0, s->n_e, size)) return -1;
    }
    if (!w->sh_gate.data) return 0;
    keep_rows(&w->sh_gate, s->s0, s->n_s);
    keep_rows(&w->sh_up, s->s0, s->n_s);
    return keep_cols(m, &w->sh_down, s->s0, s->n_s, size);
}

/* Latent attention (DeepSeek): each rank keeps its heads' query rows (q_b,
 * or wq), their k_b and v_b, and their columns of the output projection;
 * the latent and its rope key (kv_a) are every head's, so every rank
 * computes and caches the whole latent (share_of gives each rank the one
 * "KV head"). */
static int shard_latent(model *m, layer_weights *l, const shard_share *s, int size) {
    const model_hparams *hp = &m->hp;
    const int64_t qk = hp->mla_nope_dim + hp->rope_dim, dv = hp->mla_v_dim;
    keep_rows(l->mla.q_b.data ? &l->mla.q_b : &l->wq, s->q0 * qk, s->n_q * qk);
    l->mla.k_b += s->q0;
    l->mla.v_b += s->q0;
    return keep_cols(m, &l->wo, s->q0 * dv, s->n_q * dv, size);
}

static int shard_layer(model *m, layer_weights *l, const shard_share *s, int size) {
    const model_hparams *hp = &m->hp;
    const int dk = hp->head_dim_k, dv = hp->head_dim_v;
    if (l->mla.kv_a.data) {
        if (shard_latent(m, l, s, size)) return -1;
        return l->moe.gate ? shard_experts(m, &l->moe, s, size) : shard_dense_ffn(m, l, s, size);
    }
    keep_rows(&l->wq, (int64_t)s->q0 * dk, (int64_t)s->n_q * dk);
    keep_rows(&l->wk, (int64_t)s->kv0 * dk, (int64_t)s->n_kv * dk);
    keep_rows(&l->wv, (int64_t)s->kv0 * dv, (int64_t)s->n_kv * dv);
    l->sinks = vec_part(l->sinks, s->q0);
    if (m->hp.traits && m->hp.traits->qk_norm == QK_NORM_ALL) { /* its weights span the heads */
        l->q_norm = vec_part(l->q_norm, (int64_t)s->q0 * dk);
        l->k_norm = vec_part(l->k_norm, (int64_t)s->kv0 * dk);
    }
    l->bq = vec_part(l->bq, (int64_t)s->q0 * dk);
    l->bk = vec_part(l->bk, (int64_t)s->kv0 * dk);
    l->bv = vec_part(l->bv, (int64_t)s->kv0 * dv);
    if (keep_cols(m, &l->wo, (int64_t)s->q0 * dv, (int64_t)s->n_q * dv, size)) return -1;
    return l->moe.gate ? shard_experts(m, &l->moe, s, size) : shard_dense_ffn(m, l, s, size);
}

int model_shard(model *m, int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size) return err_set("invalid tensor-parallel rank %d of %d", rank, size);
    m->tp.rank = rank;
    m->tp.size = size;
    if (size == 1) return 0;
    /* A q/k norm over the whole projection (OLMo 2, OLMoE) is split with its heads; the ranks add their
     * sums of squares (forward.c), so each must hold as many KV heads, and none may have a bias first. */
    const bool qk_all = m->hp.traits && m->hp.traits->qk_norm == QK_NORM_ALL;
    if (qk_all && m->hp.n_head_kv % size)
        return err_set("tensor parallelism cannot split %s's q/k norm, which spans every head of the projection, "
                       "over %d ranks: they must divide its %d KV heads",
                       m->hp.traits->family, size, m->hp.n_head_kv);
    bool dense = false;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const layer_weights *l = &m->w.layers[il];
        dense = dense || (!l->moe.gate && l->w_up.data);
        if (qk_all && l->bq) return err_set("tensor parallelism cannot split a q/k norm over biased projections");
    }
    shard_share s = {0};
    if (share_of(&m->hp, dense, rank, size, &s)) return -1;
    for (int il = 0; il < m->hp.n_layer; il++)
        if (shard_layer(m, &m->w.layers[il], &s, size)) return err_prefix("tensor parallel: ");
    m->hp.n_head = s.n_q;
    m->hp.n_head_kv = s.n_kv;
    m->hp.n_ff = s.n_f;
    m->hp.n_ff_exp = s.n_e, m->hp.n_ff_shexp = s.n_s;
    return 0;
}
