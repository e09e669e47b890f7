/* See moe.h. */
#include "model/moe.h"

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct moe_scratch {
    int k;           /* experts per token */
    float *probs;    /* [T][n_expert]: router logits, then probabilities */
    int32_t *choice; /* [T][k]: each token's experts */
    float *weight;   /* [T][k]: and their weights */
    int32_t *start;  /* [n_expert + 1]: where each expert's entries begin */
    int32_t *rows;   /* [T * k]: the entries' tokens, grouped by expert, in token order within each */
    int32_t *entry;  /* [T][k]: where each (token, choice) went among the entries */
    int32_t *expert_of; /* [T * k]: each entry's expert */
    float *xg;       /* [T * k][n_embd]: the entries' inputs */
    float *g, *u;    /* [T * k][max(n_ff_exp, n_ff_shexp)]: gate and up activations */
    float *yg;       /* [T * k][n_embd]: the entries' outputs */
    matmul_task *tasks; /* [2 * n_expert] */
    uint64_t layer_steps, experts_read; /* moe_ffn calls, and the distinct experts they ran */
    void *mm;        /* matmul_multi's scratch */
};

/* The most the layers' matmul_multi calls need for n_tok entries (over every
 * expert: an act-order GPTQ expert needs room to gather its inputs). */
static size_t multi_bytes(const model *m, int n_tok) {
    size_t best = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const moe_weights *w = &m->w.layers[il].moe;
        if (!w->gate) continue;
        const int E = m->hp.n_expert;
        for (int e = 0; e < E; e++) {
            const size_t gu = matmul_multi_scratch_bound(&w->gate[e], E, n_tok) +
                              matmul_multi_scratch_bound(&w->up[e], E, n_tok);
            const size_t dn = matmul_multi_scratch_bound(&w->down[e], E, n_tok);
            best = gu > best ? gu : best;
            best = dn > best ? dn : best;
        }
    }
    return best;
}

moe_scratch *moe_scratch_create(const model *m, int max_tokens) {
    const model_hparams *hp = &m->hp;
    moe_scratch *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    const size_t T = (size_t)max_tokens, k = (size_t)hp->n_expert_used, E = (size_t)hp->n_expert;
    const size_t ff = (size_t)(hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp);
    const size_t N = T * k; /* entries (k >= 1: the shared expert's T rows fit too) */
    s->k = (int)k;
    s->probs = malloc(T * E * sizeof *s->probs);
    s->choice = malloc(T * k * sizeof *s->choice);
    s->weight = malloc(T * k * sizeof *s->weight);
    s->start = malloc((E + 1) * sizeof *s->start);
    s->rows = malloc(N * sizeof *s->rows);
    s->entry = malloc(T * k * sizeof *s->entry);
    s->expert_of = malloc(N * sizeof *s->expert_of);
    s->xg = malloc(N * (size_t)hp->n_embd * sizeof *s->xg);
    s->g = malloc(N * ff * sizeof *s->g);
    s->u = malloc(N * ff * sizeof *s->u);
    s->yg = malloc(N * (size_t)hp->n_embd * sizeof *s->yg);
    s->tasks = malloc(2 * E * sizeof *s->tasks);
    s->mm = malloc(multi_bytes(m, (int)N) + 64);
    if (!s->probs || !s->choice || !s->weight || !s->start || !s->rows || !s->entry || !s->expert_of || !s->xg || !s->g || !s->u ||
        !s->yg || !s->tasks || !s->mm)
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
    free(s->entry);
    free(s->expert_of);
    free(s->xg);
    free(s->g);
    free(s->u);
    free(s->yg);
    free(s->tasks);
    free(s->mm);
    free(s);
}

size_t moe_matmul_scratch_size(const model_hparams *hp, const moe_weights *w, int max_tokens) {
    size_t best = matmul_scratch_size(&w->router, max_tokens);
    const weight *ws[] = {&w->sh_gate, &w->sh_up, &w->sh_down};
    for (size_t i = 0; i < 3; i++)
        if (ws[i]->data && matmul_scratch_size(ws[i], max_tokens) > best) best = matmul_scratch_size(ws[i], max_tokens);
    (void)hp;
    return best;
}

void moe_counts(const moe_scratch *s, uint64_t *layer_steps, uint64_t *experts_read) {
    *layer_steps = s ? s->layer_steps : 0;
    *experts_read = s ? s->experts_read : 0;
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

/* Group-limited routing: a group scores its best expert's score (DeepSeek-V2's
 * group_limited_greedy) or the sum of its two best (DeepSeek-V3's noaux_tc,
 * top2); the experts of all but the n_group_used best groups (ties to the
 * lower group) are marked out. */
static void exclude_groups(const model_hparams *hp, const float *score, bool top2, bool *out) {
    const int G = hp->n_expert_groups, per = hp->n_expert / G;
    float group[CLLM_MAX_EXPERTS];
    bool keep[CLLM_MAX_EXPERTS] = {false};
    for (int g = 0; g < G; g++) {
        const float *s = score + g * per;
        float a = s[0], b = -INFINITY; /* the best and the second best */
        for (int e = 1; e < per; e++) {
            if (s[e] > a) b = a, a = s[e];
            else if (s[e] > b) b = s[e];
        }
        group[g] = top2 && per > 1 ? a + b : a;
    }
    for (int j = 0; j < hp->n_group_used; j++) {
        int best = -1;
        for (int g = 0; g < G; g++)
            if (!keep[g] && (best < 0 || group[g] > group[best])) best = g;
        keep[best] = true;
    }
    for (int g = 0; g < G; g++)
        if (!keep[g])
            for (int e = 0; e < per; e++) out[g * per + e] = true;
}

void moe_route(const model_hparams *hp, float *probs, const float *select_bias, int32_t *experts, float *weights) {
    const int E = hp->n_expert, k = hp->n_expert_used;
    if (hp->gating == GATING_SIGMOID) {
        for (int e = 0; e < E; e++) probs[e] = 1.0f / (1.0f + expf(-probs[e]));
    } else {
        float mx = probs[0], sum = 0;
        for (int e = 1; e < E; e++) mx = probs[e] > mx ? probs[e] : mx;
        for (int e = 0; e < E; e++) sum += probs[e] = expf(probs[e] - mx);
        for (int e = 0; e < E; e++) probs[e] /= sum;
    }
    float choice[CLLM_MAX_EXPERTS];
    bool out[CLLM_MAX_EXPERTS] = {false}; /* in an excluded group, or taken */
    for (int e = 0; e < E; e++) choice[e] = select_bias ? probs[e] + select_bias[e] : probs[e];
    if (hp->n_expert_groups > 1) exclude_groups(hp, choice, select_bias != NULL, out);
    float total = 0;
    for (int j = 0; j < k; j++) { /* k passes: k is small (2-8) */
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!out[e] && (best < 0 || choice[e] > choice[best])) best = e; /* NaN: still some expert */
        experts[j] = best;
        weights[j] = probs[best];
        total += probs[best];
        out[best] = true;
    }
    const float norm = hp->expert_norm && total > 0 ? 1.0f / total : 1.0f;
    for (int j = 0; j < k; j++) weights[j] *= norm * hp->expert_scale;
}

/* ---- parallel row loops ---- */

typedef struct {
    const model_hparams *hp;
    const moe_weights *w;
    moe_scratch *s;
    const float *x;
    float *y;
    int n_ff;
    bool biased; /* act_rows runs on routed entries of experts with biases */
} rows_ctx;

static void route_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const int E = c->hp->n_expert, k = c->hp->n_expert_used;
    for (long t = lo; t < hi; t++) {
        float *logits = c->s->probs + t * E;
        if (c->w->router_bias) vec_add(logits, c->w->router_bias, E);
        moe_route(c->hp, logits, c->w->select_bias, c->s->choice + t * k, c->s->weight + t * k);
    }
}

static void gather_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const size_t d = (size_t)c->hp->n_embd;
    for (long i = lo; i < hi; i++) memcpy(c->s->xg + i * d, c->x + (size_t)c->s->rows[i] * d, d * sizeof *c->x);
}

void ffn_activation(const model_hparams *hp, float *g, const float *u, int n) {
    if (hp->traits->act == ACT_GELU_TANH) gelu_tanh_mul(g, u, n);
    else if (hp->traits->act == ACT_SWIGLU_OAI) swiglu_oai_mul(g, u, n, hp->swiglu_alpha, hp->swiglu_limit);
    else silu_mul(g, u, n);
}

/* The activation of entries lo..hi (or of the shared expert's rows), after
 * the experts' gate and up biases where they have them. */
static void act_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const model_hparams *hp = c->hp;
    for (long i = lo; i < hi; i++) {
        float *g = c->s->g + i * c->n_ff, *u = c->s->u + i * c->n_ff;
        if (c->biased) {
            const size_t e = (size_t)c->s->expert_of[i] * (size_t)c->n_ff;
            vec_add(g, c->w->gate_bias + e, c->n_ff);
            vec_add(u, c->w->up_bias + e, c->n_ff);
        }
        ffn_activation(hp, g, u, c->n_ff);
    }
}

/* The experts' down biases, added to their outputs. */
static void down_bias_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const int d = c->hp->n_embd;
    for (long i = lo; i < hi; i++)
        vec_add(c->s->yg + (size_t)i * d, c->w->down_bias + (size_t)c->s->expert_of[i] * d, d);
}

/* y[t] = the weighted sum of token t's entries, in ascending expert order
 * (entries are expert-major, so in ascending entry order). */
static void combine_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const int k = c->s->k, d = c->hp->n_embd;
    for (long t = lo; t < hi; t++) {
        int32_t at[CLLM_MAX_EXPERTS];
        float wt[CLLM_MAX_EXPERTS];
        for (int j = 0; j < k; j++) { /* insertion sort by entry */
            int q = j;
            const int32_t e = c->s->entry[t * k + j];
            for (; q > 0 && at[q - 1] > e; q--) at[q] = at[q - 1], wt[q] = wt[q - 1];
            at[q] = e, wt[q] = c->s->weight[t * k + j];
        }
        float *yt = c->y + (size_t)t * d;
        memset(yt, 0, (size_t)d * sizeof *yt);
        for (int j = 0; j < k; j++) {
            const float *ye = c->s->yg + (size_t)at[j] * d, a = wt[j];
            for (int i = 0; i < d; i++) yt[i] += a * ye[i];
        }
    }
}

/* The shared expert's output (s->yg) added in, times its gate. */
static void shared_rows(void *p, long lo, long hi) {
    const rows_ctx *c = p;
    const int d = c->hp->n_embd;
    for (long t = lo; t < hi; t++) {
        const float *xt = c->x + (size_t)t * d, *ys = c->s->yg + (size_t)t * d;
        float a = 1.0f;
        if (c->w->sh_router) {
            float z = 0;
            for (int i = 0; i < d; i++) z += c->w->sh_router[i] * xt[i];
            a = 1.0f / (1.0f + expf(-z));
        }
        float *yt = c->y + (size_t)t * d;
        for (int i = 0; i < d; i++) yt[i] += a * ys[i];
    }
}

/* Groups the (token, choice) pairs by expert, tokens in order within each. */
static void group_by_expert(const model_hparams *hp, moe_scratch *s, int n) {
    const int E = hp->n_expert, k = hp->n_expert_used;
    memset(s->start, 0, (size_t)(E + 1) * sizeof *s->start);
    for (int i = 0; i < n * k; i++) s->start[s->choice[i] + 1]++;
    for (int e = 0; e < E; e++) s->start[e + 1] += s->start[e];
    for (int t = 0; t < n; t++)
        for (int j = 0; j < k; j++) {
            const int at = s->start[s->choice[t * k + j]]++;
            s->rows[at] = t;
            s->expert_of[at] = s->choice[t * k + j];
            s->entry[t * k + j] = at;
        }
    for (int e = E; e > 0; e--) s->start[e] = s->start[e - 1]; /* the increments moved each start to the next */
    s->start[0] = 0;
}

void moe_ffn(threadpool *threads, const model_hparams *hp, const moe_weights *w, const float *x, int n, float *y,
             moe_scratch *s, void *mm_scratch) {
    const int E = hp->n_expert, k = hp->n_expert_used, d = hp->n_embd, ff = hp->n_ff_exp;
    rows_ctx c = {.hp = hp, .w = w, .s = s, .x = x, .y = y, .n_ff = ff};
    matmul(threads, &w->router, x, n, s->probs, mm_scratch);
    threadpool_for(threads, n, 8, route_rows, &c);
    group_by_expert(hp, s, n);
    threadpool_for(threads, (long)n * k, 16, gather_rows, &c);

    /* Every chosen expert's gate and up in one pass, then its down in one. */
    int n_tasks = 0;
    for (int e = 0; e < E; e++) {
        const int lo = s->start[e], cnt = s->start[e + 1] - lo;
        if (cnt == 0) continue;
        const float *xe = s->xg + (size_t)lo * d;
        s->tasks[n_tasks++] = (matmul_task){&w->gate[e], xe, cnt, s->g + (size_t)lo * ff};
        s->tasks[n_tasks++] = (matmul_task){&w->up[e], xe, cnt, s->u + (size_t)lo * ff};
    }
    matmul_multi(threads, s->tasks, n_tasks, s->mm);
    s->layer_steps++;
    s->experts_read += (uint64_t)(n_tasks / 2);
    c.biased = w->gate_bias != NULL;
    threadpool_for(threads, (long)n * k, 4, act_rows, &c);
    c.biased = false;
    n_tasks = 0;
    for (int e = 0; e < E; e++) {
        const int lo = s->start[e], cnt = s->start[e + 1] - lo;
        if (cnt > 0)
            s->tasks[n_tasks++] = (matmul_task){&w->down[e], s->g + (size_t)lo * ff, cnt, s->yg + (size_t)lo * d};
    }
    matmul_multi(threads, s->tasks, n_tasks, s->mm);
    if (w->down_bias) threadpool_for(threads, (long)n * k, 4, down_bias_rows, &c);
    threadpool_for(threads, n, 4, combine_rows, &c);

    if (!w->sh_gate.data) return;
    matmul(threads, &w->sh_gate, x, n, s->g, mm_scratch);
    matmul(threads, &w->sh_up, x, n, s->u, mm_scratch);
    c.n_ff = hp->n_ff_shexp;
    threadpool_for(threads, n, 4, act_rows, &c);
    matmul(threads, &w->sh_down, s->g, n, s->yg, mm_scratch);
    threadpool_for(threads, n, 4, shared_rows, &c);
}
