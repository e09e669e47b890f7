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
    const int n = kvm_evict(kvm, &s->kv, &s->req->params.evict, seq_kv_len(s), n_new, s->attn_acc, env->key_shift,
                            env->key_shift_user);
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
