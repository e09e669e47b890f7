/* See tp_group.h. A failed broadcast or all-reduce cannot be recovered
 * from (a rank that missed one would deadlock the others), so the hooks
 * abort the job with a message. */
#include "parallel/tp_group.h"

#include "model/forward.h"
#include "model/runner.h"
#include "parallel/tp_comm.h"
#include "parallel/tp_plan.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tp_group {
    int rank, size;
    tp_plan plan;
    /* Leader: the cache the followers mirror, and its geometry when sent. */
    const kv_cache *sent_kv;
    tp_msg_header sent_kv_msg;
};

static void fatal(const char *what) {
    fprintf(stderr, "cllm: tensor parallel: %s: %s\n", what, err_get());
    comm_abort(1);
}

tp_group *tp_group_join(int size) {
    int rank = 0, n = 1;
    if (comm_join(&rank, &n)) return NULL;
    if (n != size) {
        if (rank == 0)
            err_set("--tensor-parallel-size %d needs %d processes (mpirun -np %d), this job has %d", size, size, size, n);
        else
            err_set("--tensor-parallel-size %d in a job of %d processes", size, n);
        comm_leave();
        return NULL;
    }
    tp_group *g = calloc(1, sizeof *g);
    if (!g) {
        comm_leave();
        err_oom("out of memory");
        return NULL;
    }
    g->rank = rank;
    g->size = n;
    return g;
}

int tp_group_rank(const tp_group *g) { return g->rank; }
int tp_group_size(const tp_group *g) { return g->size; }

static void send_header(const tp_msg_header *h) {
    tp_msg_header copy = *h;
    if (comm_bcast(&copy, sizeof copy, true)) fatal("sending a message");
}

static void allreduce_hook(void *user, float *x, size_t n) {
    if (comm_allreduce_sum(x, n)) fatal("all-reduce");
}

/* The followers' cache must be kv's (same blocks, dtype and block size)
 * before they run over it or copy in it. */
static void mirror_kv(tp_group *g, const kv_cache *kv) {
    const tp_msg_header h = {.kind = TP_MSG_KV_INIT, .a = (int32_t)kv->dtype, .b = kv->block_size, .c = kv->n_blocks};
    if (g->sent_kv == kv && !memcmp(&g->sent_kv_msg, &h, sizeof h)) return;
    send_header(&h);
    g->sent_kv = kv;
    g->sent_kv_msg = h;
}

static void forward_hook(void *user, const kv_cache *kv, const fwd_batch *b, bool long_rope) {
    tp_group *g = user;
    mirror_kv(g, kv);
    tp_msg_header h;
    if (tp_plan_encode(&g->plan, kv, b, &h)) fatal("encoding a batch");
    h.d = long_rope;
    send_header(&h);
    if (comm_bcast(g->plan.data, g->plan.len * sizeof *g->plan.data, false)) fatal("sending a batch");
}

static void kv_copy_hook(void *user, const kv_cache *kv, int src, int dst) {
    tp_group *g = user;
    mirror_kv(g, kv);
    send_header(&(tp_msg_header){.kind = TP_MSG_KV_COPY, .a = src, .b = dst});
}

void tp_group_attach(tp_group *g, model *m) {
    m->tp.user = g;
    m->tp.allreduce = allreduce_hook;
    if (g->rank != 0) return;
    m->tp.on_forward = forward_hook;
    m->tp.on_kv_copy = kv_copy_hook;
}

/* ---- the follower ---- */

typedef struct {
    model *m;
    threadpool *threads;
    runner run; /* the leader's KV cache mirrored (blocks, dtype, block size); run.kv NULL before the first */
} follower;

static int follower_kv(follower *f, const tp_msg_header *h) {
    runner_destroy(&f->run);
    /* Scratch for one token to start with; forwards grow it to their batch. */
    const runner_config rc = {.kv_type = (kv_dtype)h->a, .block_size = h->b, .n_blocks = h->c, .max_tokens = 1,
                              .max_out = 1, .threads = f->threads};
    return runner_init(&f->run, f->m, &rc);
}

static int follower_forward(follower *f, tp_group *g, const tp_msg_header *h) {
    if (tp_plan_reserve(&g->plan, h) || comm_bcast(g->plan.data, g->plan.len * sizeof *g->plan.data, false))
        return -1;
    if (!f->run.kv) return err_set("a forward came before its KV cache");
    if (tp_plan_decode(&g->plan, h, f->run.kv->block_size)) return -1;
    if (runner_reserve(&f->run, h->a)) return -1; /* scratch for the largest batch so far */
    /* The factors rank 0 rotates with, which its context picked. */
    f->run.shift.rope_factors = h->d ? f->m->w.rope_long : model_rope_factors(f->m, 1);
    forward_set_rope_factors(f->run.fwd, f->run.shift.rope_factors);
    return runner_run(&f->run, &g->plan.batch, NULL);
}

int tp_group_follow(tp_group *g, model *m, int n_threads) {
    follower f = {.m = m, .threads = m ? threadpool_create(n_threads) : NULL};
    if (m && !f.threads) return err_set("cannot create threads");
    int rc = 0;
    for (;;) {
        tp_msg_header h;
        if ((rc = comm_bcast(&h, sizeof h, true))) break;
        if (h.kind == TP_MSG_SHUTDOWN) break;
        if (!m) { /* the leader failed to load the model too, and says so */
            rc = err_set("got a message (kind %d) without a model", h.kind);
            break;
        }
        if (h.kind == TP_MSG_KV_INIT) rc = follower_kv(&f, &h);
        else if (h.kind == TP_MSG_FORWARD) rc = follower_forward(&f, g, &h);
        else if (h.kind == TP_MSG_KV_COPY && f.run.kv && h.a >= 0 && h.b >= 0 && h.a < f.run.kv->n_blocks &&
                 h.b < f.run.kv->n_blocks)
            kv_cache_copy_block(f.run.kv, h.a, h.b);
        else rc = err_set("unexpected message %d", h.kind);
        if (rc) break;
    }
    runner_destroy(&f.run);
    threadpool_free(f.threads);
    return rc ? err_prefix("rank %d: ", g->rank) : 0;
}

void tp_group_leave(tp_group *g) {
    if (!g) return;
    if (g->rank == 0) send_header(&(tp_msg_header){.kind = TP_MSG_SHUTDOWN});
    tp_plan_free(&g->plan);
    free(g);
    comm_leave();
}

void tp_group_abort(tp_group *g, int code) { comm_abort(code); }
