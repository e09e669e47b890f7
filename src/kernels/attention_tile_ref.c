/* Scalar reference of tiled paged attention; see attention.h. The loop is the
 * tile's (blocks outer, the tile's rows inner, one rescale per row and block),
 * in double like attn_paged_ref, so the AVX2 tile can be checked against both
 * the row reference and this; and so is the key mass sweep. */
#include "kernels/attention.h"

#include <math.h>
#include <stddef.h>

/* Value dimensions per pass: the accumulators of one pass are ATTN_TILE_ROWS x
 * this many doubles on the stack (32 KB). Wider value heads take several
 * passes, each recomputing the same scores. */
#define ATTN_TILE_REF_DIMS 128

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

/* The keys row r sees in block b, as offsets a..e of the block (a > e:
 * none). */
static void row_span(const attn_tile *t, int bs, int r, int b, int *a, int *e) {
    const int i = r / t->n_head;
    *a = max_int(t->lo[i], b * bs) - b * bs;
    *e = min_int(t->hi[i], b * bs + bs - 1) - b * bs;
}

static const float *row_q(const attn_tile *t, int dk, int r) {
    return t->q + (r / t->n_head) * t->q_stride + (size_t)(r % t->n_head) * dk;
}

/* scale * q.K[k] for the keys a..e of a block's K rows, soft-capped when
 * softcap > 0: softcap * tanh(scale * q.K[k] / softcap). */
static void row_scores(const paged_kv *kv, const uint8_t *kblk, const float *q, int a, int e, float scale,
                       float softcap, double *s) {
    const int dk = kv->head_dim_k;
    const size_t k_row = kv_row_bytes(kv->dtype, dk);
    for (int k = a; k <= e; k++) {
        const uint8_t *krow = kblk + k * k_row;
        double x = 0;
        for (int d = 0; d < dk; d++) x += (double)q[d] * kv_row_value(kv->dtype, krow, d);
        s[k] = softcap > 0 ? softcap * tanh(x * scale / softcap) : x * scale;
    }
}

/* The mass sweep (attention.h): each row's probability of each key it sees,
 * exp(s - m) / l with its final m and l, rounded to ATTN_MASS_ONE units. */
static void mass_sweep(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t,
                       float scale, int jlo, int jhi, const double *m, const double *l) {
    const int bs = kv->block_size, n_rows = t->n_tok * t->n_head;
    for (int b = jlo / bs; b <= jhi / bs; b++) {
        const uint8_t *kblk = kv->k + (size_t)block_table[b] * kv->k_block_stride +
                              (size_t)kv_head * bs * kv_row_bytes(kv->dtype, kv->head_dim_k);
        int64_t col[ATTN_MAX_BLOCK] = {0};
        for (int r = 0; r < n_rows; r++) {
            int a, e;
            row_span(t, bs, r, b, &a, &e);
            double s[ATTN_MAX_BLOCK];
            row_scores(kv, kblk, row_q(t, kv->head_dim_k, r), a, e, scale, t->softcap, s);
            for (int k = a; k <= e; k++) col[k] += llrint(exp(s[k] - m[r]) / l[r] * ATTN_MASS_ONE);
        }
        for (int k = 0; k < bs; k++)
            if (col[k]) __atomic_fetch_add(&t->key_mass[b * bs + k], col[k], __ATOMIC_RELAXED);
    }
}

/* Outputs d0 <= d < d0 + nd of every row; the first pass also sweeps the
 * key mass when the tile asks for it. */
static void tile_pass(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t,
                      float scale, int d0, int nd) {
    const int bs = kv->block_size, dk = kv->head_dim_k, dv = kv->head_dim_v;
    const int n_rows = t->n_tok * t->n_head;
    const size_t v_row = paged_v_row_bytes(kv);
    double m[ATTN_TILE_ROWS], l[ATTN_TILE_ROWS], acc[ATTN_TILE_ROWS][ATTN_TILE_REF_DIMS];
    int jlo = t->lo[0], jhi = t->hi[0];
    for (int i = 1; i < t->n_tok; i++) jlo = min_int(jlo, t->lo[i]), jhi = max_int(jhi, t->hi[i]);
    for (int r = 0; r < n_rows; r++) {
        /* A sink is a key seen first: its exp(0) in the sum, nothing in acc. */
        m[r] = t->sinks ? t->sinks[r % t->n_head] : -INFINITY, l[r] = t->sinks ? 1 : 0;
        for (int d = 0; d < nd; d++) acc[r][d] = 0;
    }
    int32_t path[ATTN_TREE_MAX];
    if (t->tree) attn_tree_path(t->tree[0], t->tree_base, path);
    for (int b = jlo / bs; b <= jhi / bs; b++) {
        const size_t row0 = (size_t)kv_head * bs;
        const uint8_t *kblk = kv->k + (size_t)block_table[b] * kv->k_block_stride +
                              row0 * kv_row_bytes(kv->dtype, dk);
        const uint8_t *vblk = kv->v + (size_t)block_table[b] * kv->v_block_stride + row0 * v_row;
        if (t->tree && b * bs + bs - 1 > t->tree_base) { /* a block of the token's path: its keys gathered */
            attn_tree_gather(kv, block_table, kv_head, b, max_int(jlo, b * bs) - b * bs,
                             min_int(jhi, b * bs + bs - 1) - b * bs, t->tree_base, path, t->tree_rows);
            kblk = t->tree_rows, vblk = t->tree_rows + (size_t)bs * kv_row_bytes(kv->dtype, dk);
        }
        for (int r = 0; r < n_rows; r++) {
            int a, e;
            row_span(t, bs, r, b, &a, &e);
            if (a > e) continue;
            double s[ATTN_MAX_BLOCK], mb = -INFINITY;
            row_scores(kv, kblk, row_q(t, dk, r), a, e, scale, t->softcap, s);
            for (int k = a; k <= e; k++)
                if (s[k] > mb) mb = s[k];
            if (mb > m[r]) {
                const double c = exp(m[r] - mb);
                l[r] *= c;
                for (int d = 0; d < nd; d++) acc[r][d] *= c;
                m[r] = mb;
            }
            for (int k = a; k <= e; k++) {
                const uint8_t *vrow = vblk + k * v_row;
                const double p = exp(s[k] - m[r]);
                l[r] += p;
                for (int d = 0; d < nd; d++) acc[r][d] += p * kv_row_value(kv->dtype, vrow, d0 + d);
            }
        }
    }
    for (int r = 0; r < n_rows; r++) {
        const int i = r / t->n_head, h = r % t->n_head;
        float *out = t->out + i * t->out_stride + (size_t)h * dv;
        for (int d = 0; d < nd; d++) out[d0 + d] = (float)(acc[r][d] / l[r]);
    }
    if (t->key_mass && !t->tree && d0 == 0) mass_sweep(kv, block_table, kv_head, t, scale, jlo, jhi, m, l);
}

void attn_tile_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t, float scale) {
    for (int d0 = 0; d0 < kv->head_dim_v; d0 += ATTN_TILE_REF_DIMS)
        tile_pass(kv, block_table, kv_head, t, scale, d0, min_int(kv->head_dim_v - d0, ATTN_TILE_REF_DIMS));
}
