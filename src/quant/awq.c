/* AWQ scale search; see awq.h. Each candidate alpha costs one round-to-
 * nearest pass over the maps and one matmul of the calibration sample with
 * the dequantized, unscaled weights (the registry's f32 kernels, threaded);
 * the reference outputs X W^T are computed once. */
#include "quant/awq.h"

#include "kernels/matmul.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void awq_act_mean(const float *x, int64_t n_rows, int64_t n_in, float *out) {
    double *acc = calloc((size_t)n_in, sizeof *acc);
    if (!acc) { /* fall back to float accumulation */
        memset(out, 0, (size_t)n_in * sizeof *out);
        for (int64_t t = 0; t < n_rows; t++)
            for (int64_t c = 0; c < n_in; c++) out[c] += fabsf(x[t * n_in + c]) / (float)n_rows;
        return;
    }
    for (int64_t t = 0; t < n_rows; t++)
        for (int64_t c = 0; c < n_in; c++) acc[c] += fabsf(x[t * n_in + c]);
    for (int64_t c = 0; c < n_in; c++) out[c] = n_rows ? (float)(acc[c] / (double)n_rows) : 0.0f;
    free(acc);
}

/* Scales for one alpha: mean^alpha, normalized so that max * min = 1. */
static void make_scales(const float *act_mean, int64_t n_in, double alpha, float *s) {
    double lo = INFINITY, hi = 0;
    for (int64_t c = 0; c < n_in; c++) {
        const double m = act_mean[c] > 1e-4f ? act_mean[c] : 1e-4;
        s[c] = (float)pow(m, alpha);
        lo = fmin(lo, s[c]);
        hi = fmax(hi, s[c]);
    }
    const float norm = (float)(1.0 / sqrt(lo * hi));
    for (int64_t c = 0; c < n_in; c++) s[c] *= norm;
}

int awq_search(const qformat *f, const float *const *w, const int64_t *n_out, int n_lin, int64_t n_in,
               const float *x, int64_t n_tok, const float *act_mean, const awq_opts *o, threadpool *threads,
               float *scales, awq_result *res) {
    const int n_grid = o->n_grid > 0 ? o->n_grid : 20;
    int64_t max_out = 0;
    for (int i = 0; i < n_lin; i++) max_out = n_out[i] > max_out ? n_out[i] : max_out;
    float **ref = calloc((size_t)n_lin, sizeof *ref);
    float *s = malloc((size_t)n_in * sizeof *s);
    float *ws = malloc((size_t)max_out * (size_t)n_in * sizeof *ws);
    float *deq = malloc((size_t)max_out * (size_t)n_in * sizeof *deq);
    uint8_t *packed = malloc((size_t)max_out * qformat_row_bytes(f, n_in));
    float *y = malloc((size_t)n_tok * (size_t)max_out * sizeof *y);
    int rc = -1;
    if (!ref || !s || !ws || !deq || !packed || !y) goto oom;
    for (int i = 0; i < n_lin; i++) {
        if (!(ref[i] = malloc((size_t)n_tok * (size_t)n_out[i] * sizeof(float)))) goto oom;
        if (quant_matmul_f32(threads, w[i], n_out[i], n_in, x, n_tok, ref[i])) goto done;
    }
    res->loss = INFINITY;
    for (int k = 0; k < n_grid; k++) {
        const double alpha = (double)k / n_grid;
        make_scales(act_mean, n_in, alpha, s);
        double loss = 0;
        for (int i = 0; i < n_lin; i++) {
            const int64_t no = n_out[i];
            for (int64_t r = 0; r < no; r++)
                for (int64_t c = 0; c < n_in; c++) ws[r * n_in + c] = w[i][r * n_in + c] * s[c];
            if (quant_rtn(f, ws, no, n_in, packed, deq)) goto done;
            for (int64_t r = 0; r < no; r++)
                for (int64_t c = 0; c < n_in; c++) deq[r * n_in + c] /= s[c];
            if (quant_matmul_f32(threads, deq, no, n_in, x, n_tok, y)) goto done;
            for (int64_t j = 0; j < n_tok * no; j++) {
                const double d = (double)y[j] - ref[i][j];
                loss += d * d;
            }
        }
        if (k == 0) res->loss_rtn = loss;
        if (loss < res->loss) {
            res->loss = loss;
            res->alpha = alpha;
            memcpy(scales, s, (size_t)n_in * sizeof *s);
        }
    }
    rc = 0;
    goto done;
oom:
    err_oom("out of memory in the AWQ search");
done:
    if (ref)
        for (int i = 0; i < n_lin; i++) free(ref[i]);
    free(ref);
    free(s);
    free(ws);
    free(deq);
    free(packed);
    free(y);
    return rc;
}

/* ---- clipping ---- */

#define AWQ_CLIP_STEPS 10 /* ratios 1, 0.95, ..., 0.55 */

typedef struct {
    const qformat *f;
    float *w;
    int64_t n_in, g;
    const double *gram; /* per group [g][g] */
    int oom;
} clip_job;

/* delta^T G delta */
static double quad_form(const double *gm, const float *d, int64_t g) {
    double t = 0;
    for (int64_t i = 0; i < g; i++) {
        double r = 0;
        const double *row = gm + i * g;
        for (int64_t j = 0; j < g; j++) r += row[j] * d[j];
        t += r * d[i];
    }
    return t;
}

static void clip_rows(void *p, long lo, long hi) {
    clip_job *j = p;
    const int64_t g = j->g;
    float *cur = malloc((size_t)g * sizeof *cur), *delta = malloc((size_t)g * sizeof *delta);
    if (!cur || !delta) {
        j->oom = 1;
        free(cur);
        free(delta);
        return;
    }
    for (long r = lo; r < hi; r++)
        for (int64_t b = 0; b < j->n_in / g; b++) {
            float *wg = j->w + r * j->n_in + b * g;
            float amax = 0;
            for (int64_t i = 0; i < g; i++) amax = fmaxf(amax, fabsf(wg[i]));
            if (amax == 0) continue;
            const double *gm = j->gram + b * g * g;
            double best = INFINITY;
            float best_max = amax;
            for (int step = 0; step < AWQ_CLIP_STEPS; step++) {
                const float mx = amax * (1.0f - (float)step / 20.0f);
                for (int64_t i = 0; i < g; i++) cur[i] = fminf(fmaxf(wg[i], -mx), mx);
                qparams qp;
                qformat_params(j->f, cur, g, &qp);
                for (int64_t i = 0; i < g; i++)
                    delta[i] = wg[i] - qformat_value(j->f, &qp, qformat_level(j->f, &qp, cur[i]));
                const double err = quad_form(gm, delta, g);
                if (err < best) best = err, best_max = mx;
            }
            for (int64_t i = 0; i < g; i++) wg[i] = fminf(fmaxf(wg[i], -best_max), best_max);
        }
    free(cur);
    free(delta);
}

int awq_clip(const qformat *f, float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok, threadpool *threads) {
    const int64_t g = qformat_group(f, n_in);
    if (g >= n_in || f->per_tensor) return 0;
    double *gram = calloc((size_t)n_in * (size_t)g, sizeof *gram);
    if (!gram) return err_oom("out of memory in the AWQ clip search");
    for (int64_t b = 0; b < n_in / g; b++) {
        double *gm = gram + b * g * g;
        for (int64_t t = 0; t < n_tok; t++) {
            const float *xg = x + t * n_in + b * g;
            for (int64_t i = 0; i < g; i++)
                for (int64_t k = 0; k < g; k++) gm[i * g + k] += (double)xg[i] * xg[k];
        }
    }
    clip_job job = {.f = f, .w = w, .n_in = n_in, .g = g, .gram = gram};
    threadpool_for(threads, n_out, 16, clip_rows, &job);
    free(gram);
    return job.oom ? err_oom("out of memory in the AWQ clip search") : 0;
}
