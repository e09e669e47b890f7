/* See runner.h. */
#include "model/runner.h"

#include "util/error.h"

#include <stdlib.h>

int runner_init(runner *r, const model *m, const runner_config *c) {
    *r = (runner){.m = m, .threads = c->threads, .shift = {m, model_rope_factors(m, c->n_ctx)}};
    kv_cache layout;
    kv_cache_layout(&m->kv, c->kv_type, c->block_size, &layout);
    const int n_blocks = c->n_blocks > 0 ? c->n_blocks : c->identity_blocks * layout.n_groups;
    if (n_blocks < 1) return err_set("runner: a KV cache needs at least one block");
    r->kv = kv_cache_create(&m->kv, c->kv_type, c->block_size, n_blocks);
    if (!r->kv) goto fail;
    if (c->block_manager && kvm_init(&r->kvm, r->kv, c->prefix_caching)) goto fail;
    if (!r->threads) {
        r->threads = threadpool_create(c->n_threads);
        if (!r->threads) {
            err_set("cannot create threads");
            goto fail;
        }
        r->owns_tp = true;
    }
    for (int g = 0; c->identity_blocks > 0 && g < layout.n_groups; g++) {
        r->identity[g] = malloc((size_t)c->identity_blocks * sizeof *r->identity[g]);
        if (!r->identity[g]) {
            err_oom("out of memory for the runner's block tables");
            goto fail;
        }
        for (int i = 0; i < c->identity_blocks; i++) r->identity[g][i] = g * c->identity_blocks + i;
    }
    r->max_out = c->max_out;
    if (runner_reserve(r, c->max_tokens)) goto fail;
    return 0;
fail:
    runner_destroy(r);
    return -1;
}

void runner_destroy(runner *r) {
    forward_free(r->fwd);
    if (r->kvm.pool) kvm_destroy(&r->kvm);
    kv_cache_free(r->kv);
    if (r->owns_tp) threadpool_free(r->threads);
    for (int g = 0; g < KV_MAX_GROUPS; g++) free(r->identity[g]);
    *r = (runner){0};
}

int runner_reserve(runner *r, int max_tokens) {
    if (r->fwd && max_tokens <= r->max_tokens) return 0;
    forward_ctx *f = forward_create(r->m, r->kv, max_tokens, r->max_out, r->threads);
    if (!f) return -1;
    forward_set_rope_factors(f, r->shift.rope_factors);
    forward_free(r->fwd);
    r->fwd = f;
    r->max_tokens = max_tokens;
    return 0;
}

int runner_refresh(runner *r) {
    forward_free(r->fwd);
    r->fwd = NULL;
    return runner_reserve(r, r->max_tokens);
}

int runner_apply(runner *r) {
    if (!r->kvm.pool) return 0;
    return kv_plan_apply(&r->kvm.plan, r->kv, model_shift_keys, &r->shift);
}
