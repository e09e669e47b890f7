/* Threaded matmul over the weight type registry; see matmul.h. */
#include "kernels/matmul.h"

#include <string.h>

/* Weight rows per unit of work, and activation rows per tile: 16 weight rows and
 * 16 activation rows of a few KB each stay in L1 while they are multiplied. */
#define MM_ROW_CHUNK 16
#define MM_TOK_TILE 16

/* ---- act-order (weight.perm): activations gathered once per matmul ---- */

static size_t perm_scratch_size(const weight *w, int n_tok) {
    return w->perm ? ((size_t)w->n_in * (size_t)n_tok * sizeof(float) + 63) / 64 * 64 : 0;
}

typedef struct {
    const weight *w;
    const float *x;
    float *out;
} perm_job;

static void gather_rows(void *p, long lo, long hi) {
    const perm_job *j = p;
    const int64_t n = j->w->n_in;
    for (long t = lo; t < hi; t++)
        for (int64_t k = 0; k < n; k++) j->out[t * n + k] = j->x[t * n + j->w->perm[k]];
}

/* ---- */

size_t matmul_scratch_size(const weight *w, int n_tok) {
    const wtype_traits *tr = wtype_get(w->type);
    if (!tr || tr->vec_dot_type == WT_F32) return perm_scratch_size(w, n_tok);
    return perm_scratch_size(w, n_tok) + wtype_row_size(tr->vec_dot_type, w->n_in) * (size_t)n_tok;
}

typedef struct {
    const weight *w;
    const wtype_traits *tr;
    const wtype_traits *act_tr;
    const float *x;
    const uint8_t *xq;  /* activations in vec_dot_type */
    size_t xq_row;      /* bytes per activation row */
    uint8_t *xq_out;
    int n_tok;
    float *y;
} mm_job;

static void quantize_rows(void *p, long lo, long hi) {
    mm_job *j = p;
    for (long t = lo; t < hi; t++)
        j->act_tr->from_float(j->x + t * j->w->n_in, j->xq_out + t * j->xq_row, j->w->n_in);
}

/* Weight rows [r_lo, r_hi) against every activation row. */
static void dot_rows(void *p, long r_lo, long r_hi) {
    mm_job *j = p;
    const weight *w = j->w;
    const int n = (int)w->n_in;
    for (long r0 = r_lo; r0 < r_hi; r0 += MM_ROW_CHUNK) {
        const long r1 = r0 + MM_ROW_CHUNK < r_hi ? r0 + MM_ROW_CHUNK : r_hi;
        for (int t0 = 0; t0 < j->n_tok; t0 += MM_TOK_TILE) {
            const int t1 = t0 + MM_TOK_TILE < j->n_tok ? t0 + MM_TOK_TILE : j->n_tok;
            for (long r = r0; r < r1; r++) {
                const uint8_t *wrow = (const uint8_t *)w->data + r * w->row_bytes;
                for (int t = t0; t < t1; t++)
                    j->tr->vec_dot(n, &j->y[(size_t)t * w->n_out + r], wrow, j->xq + t * j->xq_row);
            }
        }
    }
}

void matmul(threadpool *tp, const weight *w, const float *x, int n_tok, float *y, void *scratch) {
    if (w->perm) {
        perm_job pj = {.w = w, .x = x, .out = scratch};
        tp_for(tp, n_tok, 4, gather_rows, &pj);
        x = pj.out;
        scratch = (uint8_t *)scratch + perm_scratch_size(w, n_tok);
    }
    mm_job j = {.w = w, .tr = wtype_get(w->type), .x = x, .n_tok = n_tok, .y = y};
    if (j.tr->vec_dot_type == WT_F32) {
        j.xq = (const uint8_t *)x;
        j.xq_row = (size_t)w->n_in * sizeof(float);
    } else {
        j.act_tr = wtype_get(j.tr->vec_dot_type);
        j.xq_row = wtype_row_size(j.tr->vec_dot_type, w->n_in);
        j.xq_out = scratch;
        j.xq = scratch;
        tp_for(tp, n_tok, 4, quantize_rows, &j);
    }
    tp_for(tp, w->n_out, MM_ROW_CHUNK, dot_rows, &j);
}

void weight_row_to_float(const weight *w, int64_t r, float *out) {
    wtype_get(w->type)->to_float((const uint8_t *)w->data + r * w->row_bytes, out, w->n_in);
}
