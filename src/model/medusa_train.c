/* Training Medusa heads; see medusa_train.h. */
#include "model/medusa_train.h"

#include "model/forward.h"
#include "model/runner.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/threadpool.h"
#include "util/time.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_TARGET (-2)  /* past the sequence's end */
#define OUT_OF_VOCAB (-1)
#define HIDDEN_CHUNK 256

medusa_train_opts medusa_train_defaults(void) {
    return (medusa_train_opts){.n_heads = 4, .draft_vocab = 16384, .epochs = 2, .batch = 64, .lr = 1e-3f,
                               .holdout = 0.1f, .seed = 1};
}

typedef struct {
    int e, nv, k;        /* hidden size, draft vocabulary, heads */
    int first;           /* head 0's target: this many places after the hidden state's position */
    int64_t n_pos;
    float *hidden;       /* [n_pos][e] */
    int32_t *target;     /* [n_pos][k]: draft row, OUT_OF_VOCAB or NO_TARGET */
    int32_t *input;      /* [n_pos][k]: the token before head j's target (chained heads read it) */
    bool *held;          /* [n_pos] */
} train_set;

static void shuffle(int64_t *a, int64_t n, rng_state *rng);

/* ---- the draft vocabulary ---- */

typedef struct {
    int64_t count;
    int32_t id;
} token_count;

/* More frequent first; equal counts by id, so the order is the same on every run. */
static int by_count(const void *a, const void *b) {
    const token_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The n most frequent tokens (ids) of the sequences not skipped, most frequent first; a multiple of 8
 * when more than 8, so the draft head can take the x8 layout. */
static int32_t *frequent_tokens(int n_vocab, const int32_t *const *seqs, const int *lens, int n_seqs,
                                const bool *skip, int want, int *n_out) {
    token_count *tc = calloc((size_t)n_vocab, sizeof *tc);
    int32_t *ids = malloc((size_t)n_vocab * sizeof *ids);
    if (!tc || !ids) {
        free(tc), free(ids);
        return NULL;
    }
    for (int v = 0; v < n_vocab; v++) tc[v].id = v;
    for (int s = 0; s < n_seqs; s++)
        for (int i = 0; i < lens[s] && !skip[s]; i++)
            if (seqs[s][i] >= 0 && seqs[s][i] < n_vocab) tc[seqs[s][i]].count++;
    qsort(tc, (size_t)n_vocab, sizeof *tc, by_count);
    int seen = 0;
    while (seen < n_vocab && tc[seen].count) {
        ids[seen] = tc[seen].id;
        seen++;
    }
    free(tc);
    int n = seen < want ? seen : want;
    if (n > 8) n -= n % 8;
    *n_out = n;
    return ids;
}

/* ---- the model's hidden states ---- */

static int collect_hidden(const model *m, const int32_t *const *seqs, const int *lens, int n_seqs,
                          const int32_t *row_of, train_set *ts, int n_threads, threadpool **threads_out,
                          runner *run) {
    int max_len = 2;
    for (int s = 0; s < n_seqs; s++)
        if (lens[s] > max_len) max_len = lens[s];
    if (max_len > m->hp.n_ctx_train && m->hp.n_ctx_train > 0)
        return err_set("a training sequence of %d tokens is longer than the model's context of %d", max_len,
                       m->hp.n_ctx_train);
    const int bs = 16;
    const runner_config rc = {.kv_type = KV_F16, .block_size = bs, .identity_blocks = (max_len + bs - 1) / bs,
                              .max_tokens = HIDDEN_CHUNK, .max_out = 1, .n_threads = n_threads, .n_ctx = max_len};
    if (runner_init(run, m, &rc)) return -1;
    *threads_out = run->threads;
    int64_t n_pos = 0;
    for (int s = 0; s < n_seqs; s++)
        if (lens[s] > 2) n_pos += lens[s] - 2;
    ts->n_pos = n_pos;
    ts->hidden = malloc((size_t)n_pos * ts->e * sizeof *ts->hidden);
    ts->target = malloc((size_t)n_pos * ts->k * sizeof *ts->target);
    ts->input = malloc((size_t)n_pos * ts->k * sizeof *ts->input);
    ts->held = calloc((size_t)n_pos, sizeof *ts->held);
    int32_t pos[HIDDEN_CHUNK], seq[HIDDEN_CHUNK] = {0}, rows[HIDDEN_CHUNK];
    if (!ts->hidden || !ts->target || !ts->input || !ts->held)
        return err_set("out of memory for %lld hidden states", (long long)n_pos);
    const fwd_seq fs = runner_identity_seq(run);
    int64_t at = 0;
    for (int s = 0; s < n_seqs; s++) {
        const int L = lens[s];
        for (int done = 0; done < L - 2;) {
            /* Positions done.. of the sequence; only those with a head-0 target are kept. */
            const int chunk = L - done < HIDDEN_CHUNK ? L - done : HIDDEN_CHUNK;
            for (int i = 0; i < chunk; i++) pos[i] = done + i, rows[i] = i;
            const fwd_batch b = {.n_tokens = chunk, .tokens = seqs[s] + done, .pos = pos, .seq = seq, .n_seqs = 1,
                                 .seqs = &fs};
            if (runner_run(run, &b, NULL)) return -1;
            int keep = L - 2 - done < chunk ? L - 2 - done : chunk;
            if (forward_hidden(run->fwd, rows, keep, ts->hidden + (size_t)at * ts->e)) return -1;
            for (int i = 0; i < keep; i++, at++) {
                const int t = done + i;
                for (int j = 0; j < ts->k; j++) {
                    const int next = t + ts->first + j;
                    ts->target[at * ts->k + j] = next < L ? row_of[seqs[s][next]] : NO_TARGET;
                    ts->input[at * ts->k + j] = next - 1 < L ? seqs[s][next - 1] : 0;
                }
            }
            done += chunk;
        }
    }
    return 0;
}

/* ---- one head's training ---- */

typedef struct {
    int e, nv, b;              /* hidden, draft vocabulary, batch rows at most */
    int ni;                    /* a block's input: e, or 2 e for chained heads */
    int rows;                  /* rows in the batch grad_rows reads */
    const model *m;            /* chained heads' token inputs */
    threadpool *threads;
    weight head, head_t;       /* [nv][e] and [e][nv], F32 */
    float *x, *a, *y, *z, *dy; /* the batch: input [b][ni], pre-activation, block output, logits, gradients */
    float *res;                /* [b][e] what the block adds to: the input (independent) or the state (chained) */
    const int32_t *tgt;        /* [b] this head's targets */
    float *dw, *db;
    void *scratch;
} step_ctx;

static inline float sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }

/* Softmax cross-entropy rows: z becomes dL/dz (divided by the batch's
 * targets), loss[r] the row's loss (0 without a target). */
typedef struct {
    step_ctx *c;
    float inv_n;
    double *loss;
} softmax_job;

static void softmax_rows(void *p, long lo, long hi) {
    softmax_job *j = p;
    const int nv = j->c->nv;
    for (long r = lo; r < hi; r++) {
        float *z = j->c->z + (size_t)r * nv;
        const int t = j->c->tgt[r];
        if (t < 0) {
            memset(z, 0, (size_t)nv * sizeof *z);
            j->loss[r] = 0;
            continue;
        }
        float mx = z[0];
        for (int v = 1; v < nv; v++) mx = z[v] > mx ? z[v] : mx;
        double sum = 0;
        for (int v = 0; v < nv; v++) sum += (z[v] = expf(z[v] - mx));
        j->loss[r] = -log(z[t] / sum);
        const float inv = (float)(1.0 / sum) * j->inv_n;
        for (int v = 0; v < nv; v++) z[v] *= inv;
        z[t] -= j->inv_n;
    }
}

/* dW[o][i] = sum_r da[r][o] x[r][i], db[o] = sum_r da[r][o], rows o of the range. */
static void grad_rows(void *p, long lo, long hi) {
    step_ctx *c = p;
    for (long o = lo; o < hi; o++) {
        float *dw = c->dw + (size_t)o * c->ni;
        memset(dw, 0, (size_t)c->ni * sizeof *dw);
        float db = 0;
        for (int r = 0; r < c->rows; r++) {
            const float g = c->a[(size_t)r * c->e + o]; /* da, in place of a */
            if (g == 0) continue;
            db += g;
            const float *x = c->x + (size_t)r * c->ni;
            for (int i = 0; i < c->ni; i++) dw[i] += g * x[i];
        }
        c->db[o] = db;
    }
}

/* The block's forward for the batch in c->x: a (pre-activation), y. */
static void block_forward(step_ctx *c, const weight *w, const float *bias, int n) {
    matmul(c->threads, w, c->x, n, c->a, c->scratch);
    medusa_block_out(c->a, c->res, bias, n, c->e, c->y);
}

typedef struct {
    float *m, *v;
    int64_t t;
} adam_state;

static void adam(float *w, const float *g, adam_state *s, size_t n, float lr) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float c1 = 1.0f - powf(b1, (float)s->t), c2 = 1.0f - powf(b2, (float)s->t);
    for (size_t i = 0; i < n; i++) {
        s->m[i] = b1 * s->m[i] + (1 - b1) * g[i];
        s->v[i] = b2 * s->v[i] + (1 - b2) * g[i] * g[i];
        w[i] -= lr * (s->m[i] / c1) / (sqrtf(s->v[i] / c2) + eps);
    }
}

/* The batch's inputs to head j (positions idx[0..n)) into c->x and its
 * residuals into c->res: the hidden state; for chained heads the input is
 * [n(z); e(token)], the residual z, z the state head j - 1 left in c->y on
 * these rows (teacher forcing: the tokens are the text's, as they are along
 * any path verification accepts). */
static void fill_inputs(step_ctx *c, const train_set *ts, int j, const int64_t *idx, int n) {
    const int e = c->e;
    for (int r = 0; r < n; r++) {
        float *x = c->x + (size_t)r * c->ni, *res = c->res + (size_t)r * e;
        const float *z = j == 0 || c->ni == e ? ts->hidden + (size_t)idx[r] * e : c->y + (size_t)r * e;
        memcpy(res, z, (size_t)e * sizeof *res);
        if (c->ni == e) {
            memcpy(x, z, (size_t)e * sizeof *x);
            continue;
        }
        medusa_unit_rms(z, e, x);
        medusa_token_input(c->m, ts->input[idx[r] * ts->k + j], x + e);
    }
}

static weight block_weight(const step_ctx *c, const medusa_params *p, int j) {
    return (weight){.data = p->w[j], .type = WT_F32, .n_in = c->ni, .n_out = c->e,
                    .row_bytes = (size_t)c->ni * sizeof(float)};
}

/* One optimizer step of head j on the positions idx[0..n), its inputs in
 * c->x: returns the summed loss and the number of rows with a target. The
 * block's output stays in c->y (the next chained head's input). */
static double train_step(step_ctx *c, const train_set *ts, medusa_params *p, int j, const int64_t *idx, int n,
                         int32_t *tgt, adam_state *st_w, adam_state *st_b, float lr, int *n_rows) {
    const int e = c->e;
    int valid = 0;
    for (int r = 0; r < n; r++) {
        tgt[r] = ts->target[idx[r] * ts->k + j];
        valid += tgt[r] >= 0;
    }
    *n_rows = valid;
    const weight w = block_weight(c, p, j);
    block_forward(c, &w, p->b[j], n);
    if (!valid) return 0;
    matmul(c->threads, &c->head, c->y, n, c->z, c->scratch);
    double loss[1024];
    softmax_job sj = {.c = c, .inv_n = 1.0f / (float)valid, .loss = loss};
    c->tgt = tgt;
    threadpool_for(c->threads, n, 4, softmax_rows, &sj);
    matmul(c->threads, &c->head_t, c->z, n, c->dy, c->scratch);
    for (size_t at = 0; at < (size_t)n * e; at++) { /* da = dy * silu'(a), into a */
        const float a = c->a[at], s = sigmoidf(a);
        c->a[at] = c->dy[at] * s * (1.0f + a * (1.0f - s));
    }
    c->rows = n;
    threadpool_for(c->threads, e, 16, grad_rows, c);
    st_w->t++, st_b->t++;
    adam(p->w[j], c->dw, st_w, (size_t)e * c->ni, lr);
    adam(p->b[j], c->db, st_b, (size_t)e, lr);
    double sum = 0;
    for (int r = 0; r < n; r++) sum += loss[r];
    return sum;
}

/* Held-out accuracy of every head: top-1 and top-5 hits over positions
 * with a target (a chained head's given the text's tokens before it). */
static void evaluate(step_ctx *c, const train_set *ts, medusa_params *p, const int64_t *held, int64_t n_held,
                     float *top1, float *top5) {
    const int nv = c->nv;
    int64_t hit1[MEDUSA_MAX_HEADS] = {0}, hit5[MEDUSA_MAX_HEADS] = {0}, total[MEDUSA_MAX_HEADS] = {0};
    for (int64_t lo = 0; lo < n_held; lo += c->b) {
        const int n = (int)(n_held - lo < c->b ? n_held - lo : c->b);
        for (int j = 0; j < p->n_heads; j++) {
            fill_inputs(c, ts, j, held + lo, n);
            const weight w = block_weight(c, p, j);
            block_forward(c, &w, p->b[j], n);
            matmul(c->threads, &c->head, c->y, n, c->z, c->scratch);
            for (int r = 0; r < n; r++) {
                const int32_t t = ts->target[held[lo + r] * ts->k + j];
                if (t == NO_TARGET) continue;
                total[j]++;
                if (t < 0) continue;
                const float *z = c->z + (size_t)r * nv;
                int above = 0;
                for (int v = 0; v < nv && above < 5; v++) above += z[v] > z[t] || (z[v] == z[t] && v < t);
                hit1[j] += above == 0;
                hit5[j] += above < 5;
            }
        }
    }
    for (int j = 0; j < p->n_heads; j++) {
        top1[j] = total[j] ? (float)hit1[j] / (float)total[j] : NAN;
        top5[j] = total[j] ? (float)hit5[j] / (float)total[j] : NAN;
    }
}

static void shuffle(int64_t *a, int64_t n, rng_state *rng) {
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(rng_next(rng) % (uint64_t)(i + 1));
        const int64_t t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

static void say(const medusa_train_opts *o, const char *fmt, ...) CLLM_PRINTF(2, 3);
static void say(const medusa_train_opts *o, const char *fmt, ...) {
    if (!o->progress) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(o->user, line);
}

int medusa_train(const model *m, const int32_t *const *seqs, const int *lens, int n_seqs, const medusa_train_opts *o,
                 medusa_params *out, medusa_train_report *rep) {
    memset(out, 0, sizeof *out);
    memset(rep, 0, sizeof *rep);
    if (o->n_heads < 1 || o->n_heads > MEDUSA_MAX_HEADS) return err_set("%d heads (1..%d)", o->n_heads, MEDUSA_MAX_HEADS);
    if (o->batch < 1 || o->batch > 1024) return err_set("a batch of %d positions (1..1024)", o->batch);
    if (o->draft_vocab < 1) return err_set("a draft vocabulary of %d tokens", o->draft_vocab);
    if (o->exit_layer && (o->n_heads != 1 || o->chained || o->exit_layer < 1 || o->exit_layer > m->hp.n_layer))
        return err_set("an exit adapter is one independent block after layer 1..%d, got %d heads after layer %d",
                       m->hp.n_layer, o->n_heads, o->exit_layer);
    /* An exit adapter reads the state after the first exit_layer layers: the model cut there, as layer_skip's draft. */
    model cut = *m;
    if (o->exit_layer) {
        cut.hp.n_layer = o->exit_layer;
        cut.kv.n_layers = o->exit_layer;
    }
    const int e = m->hp.n_embd, n_vocab = m->hp.n_vocab;
    /* Held-out sequences: a seeded choice of whole ones, outside the vocabulary's count too. */
    rng_state rng;
    rng_seed(&rng, o->seed);
    int n_hold = (int)lroundf(o->holdout * (float)n_seqs);
    if (o->holdout > 0 && n_hold < 1 && n_seqs > 1) n_hold = 1;
    if (n_hold >= n_seqs) n_hold = n_seqs - 1;
    bool *seq_held = calloc((size_t)(n_seqs > 0 ? n_seqs : 1), sizeof *seq_held);
    int64_t *order = malloc((size_t)(n_seqs > 0 ? n_seqs : 1) * sizeof *order);
    if (!seq_held || !order) {
        free(seq_held), free(order);
        return err_set("out of memory");
    }
    for (int s = 0; s < n_seqs; s++) order[s] = s;
    shuffle(order, n_seqs, &rng);
    for (int i = 0; i < n_hold; i++) seq_held[order[i]] = true;
    free(order);
    int nv = 0;
    int32_t *ids = frequent_tokens(n_vocab, seqs, lens, n_seqs, seq_held, o->draft_vocab, &nv);
    int32_t *row_of = malloc((size_t)n_vocab * sizeof *row_of);
    if (!ids || !row_of) {
        free(ids), free(row_of), free(seq_held);
        return err_set("out of memory");
    }
    if (nv < 1 || medusa_params_init(out, o->n_heads, e, ids, nv, o->chained)) {
        free(ids), free(row_of), free(seq_held);
        return nv < 1 ? err_set("no training tokens") : -1;
    }
    for (int v = 0; v < n_vocab; v++) row_of[v] = OUT_OF_VOCAB;
    for (int i = 0; i < nv; i++) row_of[ids[i]] = i;
    free(ids);

    out->exit_layer = o->exit_layer;
    train_set ts = {.e = e, .nv = nv, .k = o->n_heads, .first = o->exit_layer ? 1 : 2};
    runner run = {0};
    threadpool *threads = NULL;
    step_ctx c = {.e = e, .nv = nv, .b = o->batch, .ni = out->n_in, .m = m};
    adam_state st_w[MEDUSA_MAX_HEADS] = {{0}}, st_b[MEDUSA_MAX_HEADS] = {{0}};
    int64_t *train = NULL, *held = NULL;
    int32_t *tgt = malloc((size_t)o->batch * sizeof *tgt);
    float *head_t = NULL;
    int rc = 0;
    double t0 = now_seconds();
    if (!tgt || collect_hidden(o->exit_layer ? &cut : m, seqs, lens, n_seqs, row_of, &ts, o->n_threads, &threads, &run)) {
        rc = tgt ? -1 : err_set("out of memory");
        goto done;
    }
    rep->seconds_hidden = now_seconds() - t0;
    c.threads = threads;

    for (int64_t at = 0, sq = 0; sq < n_seqs; sq++)
        for (int i = 0; i < lens[sq] - 2; i++) ts.held[at++] = seq_held[sq];
    train = malloc((size_t)(ts.n_pos ? ts.n_pos : 1) * sizeof *train);
    held = malloc((size_t)(ts.n_pos ? ts.n_pos : 1) * sizeof *held);
    if (!train || !held) {
        rc = err_set("out of memory");
        goto done;
    }
    int64_t n_train = 0, n_held = 0;
    for (int64_t i = 0; i < ts.n_pos; i++) {
        if (ts.held[i]) held[n_held++] = i;
        else train[n_train++] = i;
    }
    rep->train_positions = n_train;
    rep->holdout_positions = n_held;
    if (n_train == 0) {
        rc = err_set("no training positions (sequences of 3 tokens or more are needed)");
        goto done;
    }

    /* The draft head, and its transpose for the gradients. */
    float *head = malloc((size_t)nv * e * sizeof *head);
    head_t = malloc((size_t)nv * e * sizeof *head_t);
    if (!head || !head_t) {
        free(head);
        rc = err_set("out of memory for the draft head");
        goto done;
    }
    for (int i = 0; i < nv; i++) weight_row_to_float(&m->w.output, out->draft_vocab[i], head + (size_t)i * e);
    for (int i = 0; i < nv; i++)
        for (int d = 0; d < e; d++) head_t[(size_t)d * nv + i] = head[(size_t)i * e + d];
    c.head = (weight){.data = head, .type = WT_F32, .n_in = e, .n_out = nv, .row_bytes = (size_t)e * sizeof(float)};
    c.head_t = (weight){.data = head_t, .type = WT_F32, .n_in = nv, .n_out = e, .row_bytes = (size_t)nv * sizeof(float)};
    const int B = o->batch;
    size_t sc = matmul_scratch_size(&c.head, B);
    if (matmul_scratch_size(&c.head_t, B) > sc) sc = matmul_scratch_size(&c.head_t, B);
    const weight w0 = {.type = WT_F32, .n_in = c.ni, .n_out = e, .row_bytes = (size_t)c.ni * sizeof(float)};
    if (matmul_scratch_size(&w0, B) > sc) sc = matmul_scratch_size(&w0, B);
    c.scratch = aligned_alloc(64, (sc + 63) / 64 * 64 + 64);
    c.x = malloc((size_t)B * c.ni * sizeof(float));
    c.a = malloc((size_t)B * e * sizeof(float));
    c.y = malloc((size_t)B * e * sizeof(float));
    c.res = malloc((size_t)B * e * sizeof(float));
    c.dy = malloc((size_t)B * e * sizeof(float));
    c.z = malloc((size_t)B * nv * sizeof(float));
    c.dw = malloc((size_t)e * c.ni * sizeof(float));
    c.db = malloc((size_t)e * sizeof(float));
    bool ok = c.scratch && c.x && c.a && c.y && c.res && c.dy && c.z && c.dw && c.db;
    for (int j = 0; j < o->n_heads && ok; j++) {
        st_w[j].m = calloc((size_t)e * c.ni, sizeof(float));
        st_w[j].v = calloc((size_t)e * c.ni, sizeof(float));
        st_b[j].m = calloc((size_t)e, sizeof(float));
        st_b[j].v = calloc((size_t)e, sizeof(float));
        ok = st_w[j].m && st_w[j].v && st_b[j].m && st_b[j].v;
    }
    if (!ok) {
        free((void *)c.head.data);
        c.head.data = NULL;
        rc = err_set("out of memory for training");
        goto done;
    }
    say(o, "draft vocabulary %d tokens; %lld training positions, %lld held out; hidden states in %.1f s", nv,
        (long long)n_train, (long long)n_held, rep->seconds_hidden);

    if (n_held && o->exit_layer) { /* the zero block passes the state through: the raw exit's accuracy */
        float top5[MEDUSA_MAX_HEADS];
        evaluate(&c, &ts, out, held, n_held, rep->start_top1, top5);
        say(o, "held-out top-1 of the raw exit after layer %d (no block): %.3f", o->exit_layer, rep->start_top1[0]);
    }
    t0 = now_seconds();
    for (int ep = 0; ep < o->epochs; ep++) {
        shuffle(train, n_train, &rng);
        double loss[MEDUSA_MAX_HEADS] = {0};
        int64_t rows[MEDUSA_MAX_HEADS] = {0};
        for (int64_t lo = 0; lo < n_train; lo += B) {
            const int n = (int)(n_train - lo < B ? n_train - lo : B);
            for (int j = 0; j < o->n_heads; j++) {
                int nr = 0;
                fill_inputs(&c, &ts, j, train + lo, n);
                loss[j] += train_step(&c, &ts, out, j, train + lo, n, tgt, &st_w[j], &st_b[j], o->lr, &nr);
                rows[j] += nr;
            }
        }
        char line[400];
        int len = snprintf(line, sizeof line, "epoch %d/%d (%.0f s): loss", ep + 1, o->epochs, now_seconds() - t0);
        for (int j = 0; j < o->n_heads && len < (int)sizeof line; j++)
            len += snprintf(line + len, sizeof line - (size_t)len, " %.3f", rows[j] ? loss[j] / (double)rows[j] : 0.0);
        say(o, "%s", line);
    }
    rep->seconds_train = now_seconds() - t0;
    int64_t in_vocab = 0, with_target = 0;
    for (int64_t i = 0; i < n_held; i++) {
        const int32_t t = ts.target[held[i] * ts.k];
        with_target += t != NO_TARGET;
        in_vocab += t >= 0;
    }
    rep->vocab_coverage = with_target ? (float)in_vocab / (float)with_target : NAN;
    if (n_held) evaluate(&c, &ts, out, held, n_held, out->top1, out->top5);
    for (int j = 0; j < o->n_heads; j++) {
        if (!n_held) out->top1[j] = out->top5[j] = NAN;
        rep->top1[j] = out->top1[j];
        rep->top5[j] = out->top5[j];
    }
    free((void *)c.head.data);
done:
    for (int j = 0; j < MEDUSA_MAX_HEADS; j++) free(st_w[j].m), free(st_w[j].v), free(st_b[j].m), free(st_b[j].v);
    free(c.scratch), free(c.x), free(c.a), free(c.y), free(c.res), free(c.dy), free(c.z), free(c.dw), free(c.db);
    free(head_t), free(train), free(held), free(tgt), free(row_of), free(seq_held);
    free(ts.hidden), free(ts.target), free(ts.input), free(ts.held);
    runner_destroy(&run);
    if (rc) medusa_params_free(out);
    return rc;
}
