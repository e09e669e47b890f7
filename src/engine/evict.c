/* See evict.h. */
#include "engine/evict.h"

#include <stdlib.h>
#include <string.h>

int evict_limit_chunk(const sequence *s, int n) {
    if (!seq_evicts(s)) return n;
    const int max = kv_evict_max_chunk(&s->req->params.evict);
    return n < max ? n : max;
}

int evict_make_room(kv_manager *kvm, evict_env *env, sequence *s, int n_new) {
    const kv_evict_params *p = &s->req->params.evict;
    const int n_cached = seq_kv_len(s);
    if (p->policy == KV_EVICT_NONE || n_cached + n_new <= p->budget) return 0;
    const int n_keep = kv_evict_n_keep(p, n_new);
    int32_t *keep = malloc((size_t)n_keep * sizeof *keep);
    if (!keep || kv_evict_plan(p, n_cached, n_keep, s->attn_acc, keep) ||
        kvm_compact(kvm, &s->kv, keep, n_keep, env->key_shift, env->key_shift_user)) {
        free(keep);
        return -1;
    }
    if (s->attn_acc) { /* scores follow their slots */
        for (int i = 0; i < n_keep; i++) s->attn_acc[i] = s->attn_acc[keep[i]];
        memset(s->attn_acc + n_keep, 0, (size_t)(p->budget - n_keep) * sizeof *s->attn_acc);
    }
    free(keep);
    s->n_evicted += n_cached - n_keep;
    env->n_evictions++;
    env->n_evicted_tokens += (uint64_t)(n_cached - n_keep);
    return 0;
}

void evict_reset(sequence *s) {
    s->n_evicted = 0;
    if (s->attn_acc) memset(s->attn_acc, 0, (size_t)s->req->params.evict.budget * sizeof *s->attn_acc);
}

void evict_fork(const sequence *src, sequence *dst) {
    dst->n_evicted = src->n_evicted;
    if (src->attn_acc && dst->attn_acc)
        memcpy(dst->attn_acc, src->attn_acc, (size_t)src->req->params.evict.budget * sizeof *src->attn_acc);
}
