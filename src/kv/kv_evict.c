/* Eviction policies and in-place compaction of a sequence's KV; see
 * kv_evict.h. */
#include "kv/kv_evict.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static const char *const k_names[] = {[KV_EVICT_NONE] = "none", [KV_EVICT_STREAMING] = "streaming",
                                      [KV_EVICT_H2O] = "h2o", [KV_EVICT_TRUNCATE] = "truncate"};

const char *kv_evict_name(kv_evict_policy p) {
    return p >= KV_EVICT_NONE && p <= KV_EVICT_TRUNCATE ? k_names[p] : "?";
}

int kv_evict_parse(const char *s, kv_evict_policy *out) {
    for (int p = KV_EVICT_NONE; p <= KV_EVICT_TRUNCATE; p++)
        if (!strcmp(s, k_names[p])) {
            *out = (kv_evict_policy)p;
            return 0;
        }
    return -1;
}

static int sinks_of(const kv_evict_params *p) { return p->policy == KV_EVICT_TRUNCATE ? 0 : p->sink; }

int kv_evict_check(const kv_evict_params *p) {
    if (p->policy < KV_EVICT_NONE || p->policy > KV_EVICT_TRUNCATE)
        return err_set("unknown KV eviction policy (accepted: " KV_EVICT_NAMES ")");
    if (p->sink < 0) return err_set("kv_sink_tokens must not be negative (got %d)", p->sink);
    if (p->policy == KV_EVICT_NONE) return 0;
    if (p->budget <= 0)
        return err_set("KV eviction '%s' needs a budget: kv_budget (--kv-budget) must be a positive number of tokens",
                       kv_evict_name(p->policy));
    if (p->budget < sinks_of(p) + KV_EVICT_MIN_WINDOW)
        return err_set("kv_budget %d is too small: it must hold the %d sink tokens plus at least %d recent tokens",
                       p->budget, sinks_of(p), KV_EVICT_MIN_WINDOW);
    return 0;
}

static int window_of(const kv_evict_params *p) { return p->budget - sinks_of(p); }

static int margin_of(const kv_evict_params *p) {
    /* An eighth of what is not a sink: a key is re-rotated about eight times
     * on its way through the cache. */
    return window_of(p) / 8 > 1 ? window_of(p) / 8 : 1;
}

int kv_evict_n_keep(const kv_evict_params *p) { return p->budget - margin_of(p); }

int kv_evict_room(const kv_evict_params *p, int n_cached) {
    return n_cached < p->budget ? p->budget - n_cached : margin_of(p);
}

typedef struct {
    int64_t score;
    int32_t slot;
} scored_slot;

/* Larger score first; on a tie the later slot first. */
static int by_score_desc(const void *a, const void *b) {
    const scored_slot *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->slot > y->slot ? -1 : x->slot < y->slot;
}

static int by_slot(const void *a, const void *b) {
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    return (i > j) - (i < j);
}

int kv_evict_plan(const kv_evict_params *p, int n_cached, int n_keep, const int64_t *scores, int32_t *keep) {
    int sink = sinks_of(p);
    if (sink > n_keep - 1) sink = n_keep - 1;
    int n = 0;
    for (int i = 0; i < sink; i++) keep[n++] = i;
    const int recent = p->policy == KV_EVICT_H2O ? (n_keep - sink + 1) / 2 : n_keep - sink;
    const int heavy = n_keep - sink - recent;
    if (heavy > 0) {
        /* Heavy hitters among the slots between the sinks and the recent window. */
        const int lo = sink, hi = n_cached - recent;
        scored_slot *c = malloc((size_t)(hi - lo) * sizeof *c);
        if (!c) return err_oom("out of memory choosing heavy hitters");
        for (int i = lo; i < hi; i++) c[i - lo] = (scored_slot){scores[i], i};
        qsort(c, (size_t)(hi - lo), sizeof *c, by_score_desc);
        for (int i = 0; i < heavy; i++) keep[n + i] = c[i].slot;
        free(c);
        qsort(keep + n, (size_t)heavy, sizeof *keep, by_slot);
        n += heavy;
    }
    for (int i = n_cached - recent; i < n_cached; i++) keep[n++] = i;
    return 0;
}

/* ---- compaction ---- */

/* Whether block b of list l must be copied before it is written. */
static bool needs_copy(const kv_manager *m, const block_list *l, int b) {
    return l->ids[b] >= 0 && (pool_refcount(m->pool, l->ids[b]) > 1 || pool_has_hash(m->pool, l->ids[b]));
}

/* First slot compaction writes: the kept prefix that stays where it is. */
static int first_moved(const int32_t *keep, int n_keep) {
    int i = 0;
    while (i < n_keep && keep[i] == i) i++;
    return i;
}

int kvm_compact(kv_manager *m, seq_kv *s, const int32_t *keep, int n_keep, bool shift) {
    const int bs = m->block_size, first = first_moved(keep, n_keep);
    const int last_block = n_keep > 0 ? (n_keep - 1) / bs : -1;
    /* Free blocks the copies need at their peak: each takes one, and a block
     * this sequence alone holds (hashed, refcount 1) goes back to the pool as
     * soon as it is copied, so only the shared ones stay taken. */
    int taken = 0, peak = 0, copies = 0;
    for (int g = 0; g < m->n_groups; g++)
        for (int b = first / bs; b <= last_block && first < n_keep; b++) {
            const block_list *l = &s->lists[g];
            if (!needs_copy(m, l, b)) continue;
            copies++;
            if (++taken > peak) peak = taken;
            if (pool_refcount(m->pool, l->ids[b]) == 1) taken--;
        }
    if (peak > pool_n_available(m->pool) || kv_plan_reserve(&m->plan, copies + 1)) return -1;
    /* The move's own copy of the block lists and of keep, taken before anything changes. */
    int32_t *ids[KV_MAX_GROUPS] = {0}, *keep_copy = NULL;
    int n_ids[KV_MAX_GROUPS] = {0};
    bool ok = first >= n_keep || (keep_copy = malloc((size_t)n_keep * sizeof *keep_copy));
    for (int g = 0; ok && first < n_keep && g < m->n_groups; g++) {
        n_ids[g] = s->lists[g].n;
        ok = (ids[g] = malloc((size_t)(n_ids[g] > 0 ? n_ids[g] : 1) * sizeof *ids[g])) != NULL;
    }
    if (!ok) {
        for (int g = 0; g < KV_MAX_GROUPS; g++) free(ids[g]);
        free(keep_copy);
        return err_oom("out of memory compacting the KV cache");
    }
    /* Written blocks made private (whole copies: later kept slots may still be read from them). */
    for (int g = 0; g < m->n_groups; g++) {
        block_list *l = &s->lists[g];
        for (int b = first / bs; b <= last_block && first < n_keep; b++)
            if (needs_copy(m, l, b)) {
                const int copy = pool_alloc(m->pool);
                kv_plan_copy(&m->plan, l->ids[b], copy);
                pool_unref(m->pool, l->ids[b]);
                l->ids[b] = copy;
            }
    }
    if (first < n_keep) { /* the lists as they are now, copies in, released blocks still listed */
        for (int g = 0; g < m->n_groups; g++) memcpy(ids[g], s->lists[g].ids, (size_t)n_ids[g] * sizeof *ids[g]);
        memcpy(keep_copy, keep, (size_t)n_keep * sizeof *keep);
        kv_plan_move(&m->plan, m->n_groups, ids, n_ids, keep_copy, n_keep, first, shift);
    }
    for (int g = 0; g < m->n_groups; g++)
        for (block_list *l = &s->lists[g]; l->n > last_block + 1; l->n--)
            if (l->ids[l->n - 1] >= 0) pool_unref(m->pool, l->ids[l->n - 1]);
    /* The hash chain no longer describes the moved blocks. */
    if (s->n_registered > first / bs) s->n_registered = first / bs;
    return 0;
}

int kvm_evict(kv_manager *m, seq_kv *s, const kv_evict_params *p, int n_cached, int n_new, int64_t *scores) {
    if (p->policy == KV_EVICT_NONE || n_cached + n_new <= p->budget) return 0;
    const int n_keep = kv_evict_n_keep(p);
    if (n_new > p->budget - n_keep || n_keep >= n_cached)
        return err_set("KV eviction: %d new tokens do not fit beside the %d kept of %d", n_new, n_keep, n_cached);
    int32_t *keep = malloc((size_t)n_keep * sizeof *keep);
    if (!keep || kv_evict_plan(p, n_cached, n_keep, scores, keep) || kvm_compact(m, s, keep, n_keep, true)) {
        free(keep);
        return -1;
    }
    if (scores) { /* scores follow their slots */
        for (int i = 0; i < n_keep; i++) scores[i] = scores[keep[i]];
        memset(scores + n_keep, 0, (size_t)(p->budget - n_keep) * sizeof *scores);
    }
    free(keep);
    return n_cached - n_keep;
}
