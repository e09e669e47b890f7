/* See seq_evict.h. */
#include "engine/seq_evict.h"

#include <stdlib.h>
#include <string.h>

int evict_limit_chunk(const sequence *s, int n) {
    if (!seq_evicts(s)) return n;
    const int room = kv_evict_room(&s->req->params.evict, seq_kv_len(s));
    return n < room ? n : room;
}

int evict_prefix_limit(const sequence *s) {
    /* h2o ranks tokens by the attention they received, which cached blocks never saw being computed. */
    if (s->req->params.evict.policy == KV_EVICT_H2O) return 0;
    /* Past the budget the sequence alone would have evicted: a longer hit would change what it keeps. */
    return seq_evicts(s) && s->n_tokens > s->req->params.evict.budget + 1 ? s->req->params.evict.budget + 1
                                                                          : s->n_tokens;
}

int evict_make_room(kv_manager *kvm, evict_env *env, sequence *s, int n_new) {
    const int n = kvm_evict(kvm, &s->kv, &s->req->params.evict, seq_kv_len(s), n_new, s->attn_acc);
    if (n <= 0) return n;
    s->n_evicted += n;
    env->n_evictions++;
    env->n_evicted_tokens += (uint64_t)n;
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
