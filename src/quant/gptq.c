/* GPTQ; see gptq.h. As in the reference implementation (and AutoGPTQ):
 *  - columns whose Hessian diagonal is 0 (never active) are zeroed;
 *  - with act-order, columns are taken by descending diag(H), and groups are
 *    contiguous in that order (the stored layout, with a permutation);
 *  - H gets damp * mean(diag(H)) on its diagonal (retried 10x larger if it is
 *    still not positive definite), and U = upper Cholesky factor of H^-1;
 *  - column i is rounded on its group's grid (the group's parameters taken
 *    from the already-updated weights when its first column comes up), its
 *    error e = (w_i - q_i) / U_ii updates the later columns of the current
 *    block of 128 at once (w_j -= e U_ij), and the block's errors reach the
 *    columns after it in one batched update at the block's end.
 * U comes from H without forming H^-1: with H = V V^T, V upper triangular
 * (a Cholesky factorization run from the last row up), H^-1 = V^-T V^-1, so
 * U = V^-1. Rows are independent given U; each thread takes tiles of rows, so
 * that every row of U it streams serves several weight rows. */
#include "quant/gptq.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GPTQ_TILE 8 /* weight rows per unit of work */

typedef struct {
    double d;
    int32_t i;
} diag_key;

/* Descending diag(H); ties keep the input order. */
static int by_desc_diag(const void *a, const void *b) {
    const diag_key *x = a, *y = b;
    if (x->d != y->d) return x->d > y->d ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

int gptq_inverse_cholesky(double *h, int64_t n) {
    /* H = V V^T with V upper, from the bottom-right corner; V overwrites the
     * upper triangle of h. */
    for (int64_t j = n - 1; j >= 0; j--) {
        double *vj = h + j * n;
        double s = vj[j];
        for (int64_t k = j + 1; k < n; k++) s -= vj[k] * vj[k];
        if (!(s > 0)) return -1;
        const double d = sqrt(s);
        vj[j] = d;
        for (int64_t i = 0; i < j; i++) {
            double *vi = h + i * n;
            double t = vi[j];
            for (int64_t k = j + 1; k < n; k++) t -= vi[k] * vj[k];
            vi[j] = t / d;
        }
    }
    /* U = V^-1, a row at a time from the bottom: row i of U is
     * (e_i - sum_{k>i} V_ik U_k) / V_ii, using the rows of U below it. */
    double *row = malloc((size_t)n * sizeof *row);
    if (!row) return -1;
    for (int64_t i = n - 1; i >= 0; i--) {
        double *vi = h + i * n;
        memset(row, 0, (size_t)n * sizeof *row);
        row[i] = 1.0;
        for (int64_t k = i + 1; k < n; k++) {
            const double a = vi[k];
            const double *uk = h + k * n;
            for (int64_t j = k; j < n; j++) row[j] -= a * uk[j];
        }
        const double inv = 1.0 / vi[i];
        for (int64_t j = 0; j < i; j++) vi[j] = 0;
        for (int64_t j = i; j < n; j++) vi[j] = row[j] * inv;
    }
    free(row);
    return 0;
}

typedef struct {
    const qformat *f;
    float *w;
    int64_t n_out, n_in, g;
    const float *u; /* [n_in][n_in], upper */
    int block;
    const qparams *whole; /* per-tensor parameters, or NULL */
    uint8_t *q;           /* [n_out][n_in] levels */
    qparams *p;           /* [n_out][n_in / g] */
    float *deq;
    int oom;
} gptq_job;

static void gptq_rows(void *pv, long lo, long hi) {
    gptq_job *j = pv;
    const int64_t n = j->n_in, g = j->g, ng = n / g;
    const int R = (int)(hi - lo), bs = j->block;
    float *err = malloc((size_t)R * (size_t)bs * sizeof *err);
    if (!err) {
        j->oom = 1;
        return;
    }
    for (int64_t i1 = 0; i1 < n; i1 += bs) {
        const int64_t i2 = i1 + bs < n ? i1 + bs : n;
        for (int64_t i = i1; i < i2; i++) {
            const float *ui = j->u + i * n;
            const float dinv = 1.0f / ui[i];
            for (int r = 0; r < R; r++) {
                const int64_t row = lo + r;
                float *w = j->w + row * n;
                qparams *p = j->p + row * ng + i / g;
                if (i % g == 0) {
                    if (j->whole) *p = *j->whole;
                    else qformat_params(j->f, w + i, g, p);
                }
                const int q = qformat_level(j->f, p, w[i]);
                const float v = qformat_value(j->f, p, q);
                j->q[row * n + i] = (uint8_t)q;
                if (j->deq) j->deq[row * n + i] = v;
                const float e = (w[i] - v) * dinv;
                err[r * bs + (i - i1)] = e;
                for (int64_t c = i + 1; c < i2; c++) w[c] -= e * ui[c];
            }
        }
        /* The block's errors reach every later column. */
        for (int64_t k = i1; k < i2; k++) {
            const float *uk = j->u + k * n;
            for (int r = 0; r < R; r++) {
                const float e = err[r * bs + (k - i1)];
                float *w = j->w + (lo + r) * n;
                for (int64_t c = i2; c < n; c++) w[c] -= e * uk[c];
            }
        }
    }
    free(err);
}

int gptq_quantize(const qformat *f, float *w, int64_t n_out, int64_t n_in, double *h, const gptq_opts *o,
                  threadpool *threads, void *dst, float *deq, int32_t *perm) {
    const int64_t n = n_in, g = qformat_group(f, n_in);
    const int bs = o->block > 0 ? o->block : 128;
    if (g < n && bs % g) return err_set("gptq: block of %d columns is not a multiple of the group size %lld", bs,
                                        (long long)g);
    int rc = -1;
    float *u = malloc((size_t)n * (size_t)n * sizeof *u);
    double *h0 = malloc((size_t)n * (size_t)n * sizeof *h0);
    float *tmp = malloc((size_t)n * sizeof *tmp);
    uint8_t *q = malloc((size_t)n_out * (size_t)n);
    qparams *p = malloc((size_t)n_out * (size_t)(n / g) * sizeof *p);
    if (!u || !h0 || !tmp || !q || !p) {
        err_oom("out of memory in GPTQ for a %lld x %lld layer", (long long)n_out, (long long)n_in);
        goto done;
    }
    /* Dead inputs. */
    for (int64_t i = 0; i < n; i++)
        if (h[i * n + i] == 0) {
            h[i * n + i] = 1;
            for (int64_t r = 0; r < n_out; r++) w[r * n + i] = 0;
        }
    /* Column order. */
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    if (o->act_order) {
        diag_key *keys = malloc((size_t)n * sizeof *keys);
        if (!keys) {
            err_oom("out of memory");
            goto done;
        }
        for (int64_t i = 0; i < n; i++) keys[i] = (diag_key){h[i * n + i], (int32_t)i};
        qsort(keys, (size_t)n, sizeof *keys, by_desc_diag);
        for (int64_t i = 0; i < n; i++) perm[i] = keys[i].i;
        free(keys);
        for (int64_t r = 0; r < n_out; r++) {
            float *row = w + r * n;
            for (int64_t k = 0; k < n; k++) tmp[k] = row[perm[k]];
            memcpy(row, tmp, (size_t)n * sizeof *tmp);
        }
        for (int64_t a = 0; a < n; a++)
            for (int64_t b = 0; b < n; b++) h0[a * n + b] = h[(int64_t)perm[a] * n + perm[b]];
        memcpy(h, h0, (size_t)n * (size_t)n * sizeof *h);
    }
    /* Damping, retried larger if H is still not positive definite. */
    double mean_diag = 0;
    for (int64_t i = 0; i < n; i++) mean_diag += h[i * n + i];
    mean_diag /= (double)n;
    memcpy(h0, h, (size_t)n * (size_t)n * sizeof *h);
    double damp = o->damp > 0 ? o->damp : 0.01;
    for (int attempt = 0;; attempt++) {
        for (int64_t i = 0; i < n; i++) h[i * n + i] += damp * mean_diag;
        if (!gptq_inverse_cholesky(h, n)) break;
        if (attempt == 4) {
            err_set("gptq: the Hessian is not positive definite even with damping %g", damp);
            goto done;
        }
        memcpy(h, h0, (size_t)n * (size_t)n * sizeof *h);
        damp *= 10;
    }
    for (int64_t i = 0; i < n * n; i++) u[i] = (float)h[i];

    qparams whole;
    if (f->per_tensor) qformat_params(f, w, n_out * n, &whole);
    gptq_job job = {.f = f, .w = w, .n_out = n_out, .n_in = n, .g = g, .u = u, .block = bs,
                    .whole = f->per_tensor ? &whole : NULL, .q = q, .p = p, .deq = deq};
    threadpool_for(threads, n_out, GPTQ_TILE, gptq_rows, &job);
    if (job.oom) {
        err_oom("out of memory");
        goto done;
    }
    const size_t rb = qformat_row_bytes(f, n);
    for (int64_t r = 0; r < n_out; r++)
        qformat_pack_row(f, n, q + r * n, p + r * (n / g), (uint8_t *)dst + r * rb);
    rc = 0;
done:
    free(u);
    free(h0);
    free(tmp);
    free(q);
    free(p);
    return rc;
}
