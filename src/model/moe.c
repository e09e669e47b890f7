/* See moe.h. */
#include "model/moe.h"

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct moe_scratch {
    float *probs;    /* [T][n_expert]: router logits, then probabilities */
    int32_t *choice; /* [T][k]: each token's experts */
    float *weight;   /* [T][k]: and their weights */
    int32_t *start;  /* [n_expert + 1]: where each expert's entries begin in rows */
    int32_t *rows;   /* [T * k]: token indices grouped by expert, in token order */
    float *row_w;    /* [T * k]: each entry's weight */
    float *xg;       /* [T][n_embd]: one expert's tokens, gathered */
    float *g, *u;    /* [T][max(n_ff_exp, n_ff_shexp)]: gate and up activations */
    float *yg;       /* [T][n_embd]: one expert's output */
};

moe_scratch *moe_scratch_create(const model_hparams *hp, int max_tokens) {
    moe_scratch *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    const size_t T = (size_t)max_tokens, k = (size_t)hp->n_expert_used, E = (size_t)hp->n_expert;
    const size_t ff = (size_t)(hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp);
    s->probs = malloc(T * E * sizeof *s->probs);
    s->choice = malloc(T * k * sizeof *s->choice);
    s->weight = malloc(T * k * sizeof *s->weight);
    s->start = malloc((E + 1) * sizeof *s->start);
    s->rows = malloc(T * k * sizeof *s->rows);
    s->row_w = malloc(T * k * sizeof *s->row_w);
    s->xg = malloc(T * (size_t)hp->n_embd * sizeof *s->xg);
    s->g = malloc(T * ff * sizeof *s->g);
    s->u = malloc(T * ff * sizeof *s->u);
    s->yg = malloc(T * (size_t)hp->n_embd * sizeof *s->yg);
    if (!s->probs || !s->choice || !s->weight || !s->start || !s->rows || !s->row_w || !s->xg || !s->g || !s->u ||
        !s->yg)
        goto oom;
    return s;
oom:
    moe_scratch_free(s);
    err_oom("out of memory allocating the experts' buffers for %d tokens", max_tokens);
    return NULL;
}

void moe_scratch_free(moe_scratch *s) {
    if (!s) return;
    free(s->probs);
    free(s->choice);
    free(s->weight);
    free(s->start);
    free(s->rows);
    free(s->row_w);
    free(s->xg);
    free(s->g);
    free(s->u);
    free(s->yg);
    free(s);
}

size_t moe_matmul_scratch_size(const model_hparams *hp, const moe_weights *w, int max_tokens) {
    size_t best = matmul_scratch_size(&w->router, max_tokens);
    const weight *ws[] = {&w->sh_gate, &w->sh_up, &w->sh_down};
    for (size_t i = 0; i < 3; i++)
        if (ws[i]->data && matmul_scratch_size(ws[i], max_tokens) > best) best = matmul_scratch_size(ws[i], max_tokens);
    for (int e = 0; e < hp->n_expert; e++) {
        const weight *xs[] = {&w->gate[e], &w->up[e], &w->down[e]};
        for (size_t i = 0; i < 3; i++)
            if (matmul_scratch_size(xs[i], max_tokens) > best) best = matmul_scratch_size(xs[i], max_tokens);
    }
    return best;
}

size_t moe_expert_bytes(const model *m, int *n_layers) {
    size_t bytes = 0;
    *n_layers = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const moe_weights *w = &m->w.layers[il].moe;
        if (!w->gate) continue;
        ++*n_layers;
        for (int e = 0; e < m->hp.n_expert; e++)
            bytes += (size_t)w->gate[e].n_out * w->gate[e].row_bytes + (size_t)w->up[e].n_out * w->up[e].row_bytes +
                     (size_t)w->down[e].n_out * w->down[e].row_bytes;
    }
    return bytes;
}

void moe_route(const model_hparams *hp, float *probs, int32_t *experts, float *weights) {
    const int E = hp->n_expert, k = hp->n_expert_used;
    if (hp->gating == GATING_SIGMOID) {
        for (int e = 0; e < E; e++) probs[e] = 1.0f / (1.0f + expf(-probs[e]));
    } else {
        float mx = probs[0], sum = 0;
        for (int e = 1; e < E; e++) mx = probs[e] > mx ? probs[e] : mx;
        for (int e = 0; e < E; e++) sum += probs[e] = expf(probs[e] - mx);
        for (int e = 0; e < E; e++) probs[e] /= sum;
    }
    float total = 0;
    for (int j = 0; j < k; j++) { /* k passes: k is small (2-8) */
        int best = -1;
        for (int e = 0; e < E; e++)
            if (probs[e] != -1.0f && (best < 0 || probs[e] > probs[best])) best = e; /* NaN: still some expert */
        experts[j] = best;
        weights[j] = probs[best];
        total += probs[best];
        probs[best] = -1.0f; /* taken: no probability is -1 */
    }
    const float norm = hp->expert_norm && total > 0 ? 1.0f / total : 1.0f;
    for (int j = 0; j < k; j++) weights[j] *= norm * hp->expert_scale;
}

/* ---- parallel row loops ---- */

typedef struct {
    const model_hparams *hp;
    moe_scratch *s;
    const float *x;
    int n_ff;
} rows_ctx;

static void route_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const int E = c->hp->n_expert, k = c->hp->n_expert_used;
    for (long t = lo; t < hi; t++)
        moe_route(c->hp, c->s->probs + t * E, c->s->choice + t * k, c->s->weight + t * k);
}

static void act_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    for (long i = lo; i < hi; i++) {
        float *g = c->s->g + i * c->n_ff;
        const float *u = c->s->u + i * c->n_ff;
        if (c->hp->traits->act == ACT_GELU_TANH) gelu_tanh_mul(g, u, c->n_ff);
        else silu_mul(g, u, c->n_ff);
    }
}

/* g = act(gate . x) * (up . x), then y = down . g, over n rows of x. */
static void mlp(threadpool *threads, const model_hparams *hp, const weight *gate, const weight *up,
                const weight *down, const float *x, int n, float *y, moe_scratch *s, void *mm_scratch) {
    matmul(threads, gate, x, n, s->g, mm_scratch);
    matmul(threads, up, x, n, s->u, mm_scratch);
    rows_ctx c = {.hp = hp, .s = s, .n_ff = (int)gate->n_out};
    threadpool_for(threads, n, 1, act_rows, &c);
    matmul(threads, down, s->g, n, y, mm_scratch);
}

void moe_ffn(threadpool *threads, const model_hparams *hp, const moe_weights *w, const float *x, int n, float *y,
             moe_scratch *s, void *mm_scratch) {
    const int E = hp->n_expert, k = hp->n_expert_used, d = hp->n_embd;
    matmul(threads, &w->router, x, n, s->probs, mm_scratch);
    rows_ctx rc = {.hp = hp, .s = s, .x = x};
    threadpool_for(threads, n, 8, route_rows, &rc);

    /* Group the (token, choice) pairs by expert, tokens in order within each. */
    memset(s->start, 0, (size_t)(E + 1) * sizeof *s->start);
    for (int i = 0; i < n * k; i++) s->start[s->choice[i] + 1]++;
    for (int e = 0; e < E; e++) s->start[e + 1] += s->start[e];
    for (int t = 0; t < n; t++)
        for (int j = 0; j < k; j++) {
            const int e = s->choice[t * k + j];
            int at = s->start[e]++;
            s->rows[at] = t;
            s->row_w[at] = s->weight[t * k + j];
        }
    for (int e = E; e > 0; e--) s->start[e] = s->start[e - 1]; /* the increments moved each start to the next */
    s->start[0] = 0;

    memset(y, 0, (size_t)n * d * sizeof *y);
    for (int e = 0; e < E; e++) {
        const int lo = s->start[e], cnt = s->start[e + 1] - lo;
        if (cnt == 0) continue;
        for (int i = 0; i < cnt; i++) memcpy(s->xg + (size_t)i * d, x + (size_t)s->rows[lo + i] * d, d * sizeof *x);
        mlp(threads, hp, &w->gate[e], &w->up[e], &w->down[e], s->xg, cnt, s->yg, s, mm_scratch);
        for (int i = 0; i < cnt; i++) {
            float *yt = y + (size_t)s->rows[lo + i] * d;
            const float *ye = s->yg + (size_t)i * d, a = s->row_w[lo + i];
            for (int c = 0; c < d; c++) yt[c] += a * ye[c];
        }
    }
    if (!w->sh_gate.data) return;
    mlp(threads, hp, &w->sh_gate, &w->sh_up, &w->sh_down, x, n, s->yg, s, mm_scratch);
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * d, *ys = s->yg + (size_t)t * d;
        float a = 1.0f;
        if (w->sh_router) {
            float z = 0;
            for (int c = 0; c < d; c++) z += w->sh_router[c] * xt[c];
            a = 1.0f / (1.0f + expf(-z));
        }
        float *yt = y + (size_t)t * d;
        for (int c = 0; c < d; c++) yt[c] += a * ys[c];
    }
}
