/* See ppl_long.h. One sequence on a model runner of its own (model/runner.h,
 * with a block manager and no prefix cache): before each chunk the sequence
 * makes room as the engine's scheduler does (kvm_evict; the runner moves the
 * rows, keys re-rotated by the model), then the chunk is computed with a
 * logits row per token. Chunks are at most PPL_LONG_CHUNK tokens and at most
 * what fits up to the budget (kv_evict_room), so a token sees between the
 * kept slots and the whole budget, as in the engine. */
#include "cli/ppl_long.h"

#include "kv/kv_manager.h"
#include "model/runner.h"
#include "util/error.h"
#include "util/time.h"

#include <math.h>
#include <stdlib.h>

#define PPL_LONG_CHUNK 64
#define PPL_LONG_BLOCK 16

/* -log softmax(logits)[target], in double. */
static double nll_of(const float *logits, int n_vocab, int target) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    return -((double)logits[target] - max - log(sum));
}

typedef struct {
    runner run;
    seq_kv seq;
    float *logits;
    int64_t *scores; /* h2o: attention mass of each slot */
    int32_t *pos, *rows, *seq_of;
} ppl_long_state;

static void state_free(ppl_long_state *st) {
    if (st->run.kvm.pool) kvm_release(&st->run.kvm, &st->seq);
    runner_destroy(&st->run);
    free(st->logits), free(st->scores), free(st->pos), free(st->rows), free(st->seq_of);
}

static int state_init(ppl_long_state *st, model *m, int budget, int chunk, const kv_evict_params *ev, kv_dtype dtype,
                      int n_threads) {
    kv_cache layout;
    kv_cache_layout(&m->kv, dtype, PPL_LONG_BLOCK, &layout);
    const int n_blocks = layout.n_groups * ((budget + PPL_LONG_BLOCK - 1) / PPL_LONG_BLOCK);
    const runner_config rc = {.kv_type = dtype, .block_size = PPL_LONG_BLOCK, .n_blocks = n_blocks,
                              .block_manager = true, .max_tokens = chunk, .max_out = chunk, .n_threads = n_threads};
    if (runner_init(&st->run, m, &rc)) return -1;
    st->seq.keep_window_blocks = ev->policy != KV_EVICT_NONE;
    st->logits = malloc((size_t)chunk * m->hp.n_vocab * sizeof *st->logits);
    st->pos = malloc((size_t)chunk * sizeof *st->pos);
    st->rows = malloc((size_t)chunk * sizeof *st->rows);
    st->seq_of = calloc((size_t)chunk, sizeof *st->seq_of);
    if (ev->policy == KV_EVICT_H2O) st->scores = calloc((size_t)budget, sizeof *st->scores);
    if (!st->logits || !st->pos || !st->rows || !st->seq_of || (ev->policy == KV_EVICT_H2O && !st->scores))
        return err_oom("out of memory");
    return 0;
}

int ppl_long_run(model *m, const int32_t *tokens, int n, const kv_evict_params *ev, kv_dtype dtype, int n_threads,
                 ppl_long_result *out) {
    *out = (ppl_long_result){0};
    if (kv_evict_check(ev)) return -1;
    const bool evicts = ev->policy != KV_EVICT_NONE;
    const int budget = evicts ? ev->budget : n;
    const int chunk = PPL_LONG_CHUNK;
    ppl_long_state st = {0};
    int rc = state_init(&st, m, budget, chunk, ev, dtype, n_threads);
    const int nv = m->hp.n_vocab;
    int n_cached = 0;
    const int past_from = ev->budget > 0 ? ev->budget : n;
    const double t0 = now_seconds();
    for (int done = 0; !rc && done < n - 1;) {
        int c = n - 1 - done < chunk ? n - 1 - done : chunk;
        if (evicts && c > kv_evict_room(ev, n_cached)) c = kv_evict_room(ev, n_cached);
        const int gone = kvm_evict(&st.run.kvm, &st.seq, ev, n_cached, c, st.scores);
        if (gone < 0 || kvm_allocate(&st.run.kvm, &st.seq, n_cached - gone, c) || runner_apply(&st.run)) {
            rc = err_set("KV eviction or allocation failed at token %d", done);
            break;
        }
        n_cached -= gone;
        out->evicted += gone;
        fwd_seq fs = {.attn_acc = st.scores};
        for (int g = 0; g < st.run.kvm.n_groups; g++) fs.block_table[g] = kvm_table(&st.seq, g);
        for (int i = 0; i < c; i++) st.pos[i] = n_cached + i, st.rows[i] = i;
        const fwd_batch b = {.n_tokens = c, .tokens = tokens + done, .pos = st.pos, .seq = st.seq_of, .n_seqs = 1,
                             .seqs = &fs, .n_out = c, .out_rows = st.rows};
        if ((rc = runner_run(&st.run, &b, st.logits))) break;
        for (int i = 0; i < c; i++) {
            const double v = nll_of(st.logits + (size_t)i * nv, nv, tokens[done + i + 1]);
            out->nll += v, out->nll2 += v * v, out->count++;
            if (done + i + 1 >= past_from)
                out->nll_past += v, out->nll2_past += v * v, out->count_past++;
        }
        n_cached += c;
        done += c;
    }
    out->seconds = now_seconds() - t0;
    state_free(&st);
    return rc;
}
