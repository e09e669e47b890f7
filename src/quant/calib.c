/* Calibration samples and the layer-at-a-time runner; see calib.h. */
#include "quant/calib.h"

#include "model/runner.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

#include <stdlib.h>
#include <string.h>

#define CALIB_MIN_TOKENS 16
#define CALIB_KV_BLOCK 16

int calib_load(calib_set *c, const model *m, const char *path, int n_samples, int ctx) {
    memset(c, 0, sizeof *c);
    size_t len = 0;
    char *text = file_read_all(path, &len);
    if (!text) return err_prefix("calibration file ");
    size_t nonspace = 0;
    for (size_t i = 0; i < len; i++) nonspace += text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r';
    if (!nonspace) {
        free(text);
        return err_set("calibration file %s is empty", path);
    }
    int32_t *toks = NULL;
    const int n = tokenizer_encode(m->tok, text, len, false, false, &toks);
    free(text);
    if (n < 0) return err_prefix("calibration file %s: ", path);
    if (n < CALIB_MIN_TOKENS) {
        free(toks);
        return err_set("calibration file %s has only %d tokens (at least %d are needed)", path, n, CALIB_MIN_TOKENS);
    }
    const int body = ctx - 1;
    int windows = n / body;
    if (windows < 1) windows = 1;
    const int take = n_samples < windows ? n_samples : windows;
    c->len = calloc((size_t)take, sizeof *c->len);
    c->tokens = calloc((size_t)take, sizeof *c->tokens);
    if (!c->len || !c->tokens) {
        free(toks);
        calib_free(c);
        return err_oom("out of memory");
    }
    const int32_t bos = tokenizer_bos(m->tok);
    for (int s = 0; s < take; s++) {
        /* Window s of `take`, spread evenly over the `windows` available. */
        const int w = (int)((int64_t)s * windows / take);
        const int start = w * body;
        const int cnt = start + body <= n ? body : n - start;
        const int has_bos = bos >= 0;
        c->tokens[s] = malloc((size_t)(cnt + 1) * sizeof(int32_t));
        if (!c->tokens[s]) {
            free(toks);
            calib_free(c);
            return err_oom("out of memory");
        }
        if (has_bos) c->tokens[s][0] = bos;
        memcpy(c->tokens[s] + has_bos, toks + start, (size_t)cnt * sizeof(int32_t));
        c->len[s] = cnt + has_bos;
        c->n_tokens += c->len[s];
        c->n_samples++;
    }
    free(toks);
    return 0;
}

void calib_free(calib_set *c) {
    for (int s = 0; s < c->n_samples; s++) free(c->tokens[s]);
    free(c->tokens);
    free(c->len);
    memset(c, 0, sizeof *c);
}

void calib_inputs_free(calib_inputs *in) {
    for (int i = 0; i < 4; i++) free(in->x[i]);
    memset(in, 0, sizeof *in);
}

/* ---- runner ---- */

struct calib_runner {
    model *m;
    const calib_set *c;
    runner run; /* identity block tables: one sample at a time */
    int max_len;
    int32_t *pos, *seq;
    float **stream; /* per sample [len][n_embd] */
    bool have_stream;
};

calib_runner *calib_runner_new(model *m, const calib_set *c, threadpool *threads) {
    calib_runner *r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->m = m;
    r->c = c;
    for (int s = 0; s < c->n_samples; s++)
        if (c->len[s] > r->max_len) r->max_len = c->len[s];
    const runner_config rc = {.kv_type = KV_F32, .block_size = CALIB_KV_BLOCK,
                              .identity_blocks = (r->max_len + CALIB_KV_BLOCK - 1) / CALIB_KV_BLOCK,
                              .max_tokens = r->max_len, .max_out = 1, .threads = threads};
    if (runner_init(&r->run, m, &rc)) {
        free(r);
        return NULL;
    }
    r->pos = malloc((size_t)r->max_len * sizeof *r->pos);
    r->seq = calloc((size_t)r->max_len, sizeof *r->seq);
    r->stream = calloc((size_t)c->n_samples, sizeof *r->stream);
    if (!r->pos || !r->seq || !r->stream) goto oom;
    for (int i = 0; i < r->max_len; i++) r->pos[i] = i;
    for (int s = 0; s < c->n_samples; s++) {
        r->stream[s] = malloc((size_t)c->len[s] * m->hp.n_embd * sizeof(float));
        if (!r->stream[s]) goto oom;
    }
    return r;
oom:
    calib_runner_free(r);
    err_oom("out of memory for the calibration runner");
    return NULL;
}

void calib_runner_free(calib_runner *r) {
    if (!r) return;
    runner_destroy(&r->run);
    if (r->stream)
        for (int s = 0; s < r->c->n_samples; s++) free(r->stream[s]);
    free(r->stream);
    free(r->pos);
    free(r->seq);
    free(r);
}

/* Hook: appends a linear input's rows to the capture. */
static void collect(void *user, int layer, fwd_linear_input which, const float *x, int n_tokens, int n_in) {
    (void)layer;
    calib_inputs *in = user;
    if (!in->x[which] && in->n_rows[which] < 0) return; /* an earlier allocation failed */
    float *g = realloc(in->x[which], (size_t)(in->n_rows[which] + n_tokens) * (size_t)n_in * sizeof(float));
    if (!g) {
        free(in->x[which]);
        in->x[which] = NULL;
        in->n_rows[which] = -1;
        return;
    }
    in->x[which] = g;
    in->n_in[which] = n_in;
    memcpy(g + (size_t)in->n_rows[which] * n_in, x, (size_t)n_tokens * n_in * sizeof(float));
    in->n_rows[which] += n_tokens;
}

int calib_run_layer(calib_runner *r, int il, calib_inputs *capture, bool advance) {
    /* The layers before il were quantized since the last call: scratch for their new types. */
    if (runner_refresh(&r->run)) return -1;
    const fwd_seq seq = runner_identity_seq(&r->run);
    int rc = 0;
    for (int s = 0; !rc && s < r->c->n_samples; s++) {
        const fwd_hooks h = {.linear_input = capture ? collect : NULL, .user = capture, .first_layer = il,
                             .last_layer = il, .x_in = r->have_stream ? r->stream[s] : NULL,
                             .x_out = advance ? r->stream[s] : NULL};
        forward_set_hooks(r->run.fwd, &h);
        const fwd_batch b = {.n_tokens = r->c->len[s], .tokens = r->c->tokens[s], .pos = r->pos, .seq = r->seq,
                             .n_seqs = 1, .seqs = &seq, .n_out = 0};
        rc = runner_run(&r->run, &b, NULL);
    }
    forward_set_hooks(r->run.fwd, NULL); /* h lived in the loop */
    if (!rc && capture)
        for (int i = 0; i < 4; i++)
            if (capture->n_rows[i] < 0) rc = err_oom("out of memory collecting calibration inputs");
    if (!rc && advance) r->have_stream = true;
    return rc;
}
