/* Scalar reference of tiled paged attention; see attention.h. The loop is the
 * tile's (blocks outer, the tile's rows inner, one rescale per row and block),
 * in double like attn_paged_ref, so the AVX2 tile can be checked against both
 * the row reference and this. */
#include "kernels/attention.h"

#include "kernels/wtype.h"

#include <math.h>
#include <stddef.h>

/* Value dimensions per pass: the accumulators of one pass are ATTN_TILE_ROWS x
 * this many doubles on the stack (32 KB). Wider value heads take several
 * passes, each recomputing the same scores. */
#define ATTN_TILE_REF_DIMS 128

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

/* Outputs d0 <= d < d0 + nd of every row. */
static void tile_pass(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t,
                      float scale, int d0, int nd) {
    const int bs = kv->block_size, dk = kv->head_dim_k, dv = kv->head_dim_v;
    const int n_rows = t->n_tok * t->n_head;
    const size_t k_row = kv_row_bytes(kv->dtype, dk), v_row = kv_row_bytes(kv->dtype, dv);
    double m[ATTN_TILE_ROWS], l[ATTN_TILE_ROWS], acc[ATTN_TILE_ROWS][ATTN_TILE_REF_DIMS];
    int jlo = t->lo[0], jhi = t->hi[0];
    for (int i = 1; i < t->n_tok; i++) jlo = min_int(jlo, t->lo[i]), jhi = max_int(jhi, t->hi[i]);
    for (int r = 0; r < n_rows; r++) {
        m[r] = -INFINITY, l[r] = 0;
        for (int d = 0; d < nd; d++) acc[r][d] = 0;
    }
    for (int b = jlo / bs; b <= jhi / bs; b++) {
        const size_t row0 = (size_t)kv_head * bs;
        const uint8_t *kblk = kv->k + (size_t)block_table[b] * kv->k_block_stride;
        const uint8_t *vblk = kv->v + (size_t)block_table[b] * kv->v_block_stride;
        for (int r = 0; r < n_rows; r++) {
            const int i = r / t->n_head, h = r % t->n_head;
            const int a = max_int(t->lo[i], b * bs) - b * bs, e = min_int(t->hi[i], b * bs + bs - 1) - b * bs;
            if (a > e) continue;
            const float *q = t->q + i * t->q_stride + (size_t)h * dk;
            double s[ATTN_MAX_BLOCK], mb = -INFINITY;
            for (int k = a; k <= e; k++) {
                const uint8_t *krow = kblk + (row0 + k) * k_row;
                double x = 0;
                for (int d = 0; d < dk; d++) x += (double)q[d] * kv_row_value(kv->dtype, krow, d);
                s[k] = x * scale;
                if (s[k] > mb) mb = s[k];
            }
            if (mb > m[r]) {
                const double c = exp(m[r] - mb);
                l[r] *= c;
                for (int d = 0; d < nd; d++) acc[r][d] *= c;
                m[r] = mb;
            }
            for (int k = a; k <= e; k++) {
                const uint8_t *vrow = vblk + (row0 + k) * v_row;
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
}

void attn_tile_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t, float scale) {
    for (int d0 = 0; d0 < kv->head_dim_v; d0 += ATTN_TILE_REF_DIMS)
        tile_pass(kv, block_table, kv_head, t, scale, d0, min_int(kv->head_dim_v - d0, ATTN_TILE_REF_DIMS));
}

attn_tile_fn attn_tile_best(void) { return wtype_using_avx2() ? attn_tile_avx2 : attn_tile_ref; }
