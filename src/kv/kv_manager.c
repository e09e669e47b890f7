/* Sequence block tables over the shared pool; see kv_manager.h. The prefix
 * cache keys a block by its token chain hash mixed with its group, since each
 * group stores different layers of the same tokens. */
#include "kv/kv_manager.h"

#include "util/error.h"
#include "util/array.h"

#include <stdlib.h>
#include <string.h>

int kvm_init(kv_manager *m, kv_cache *cache, bool prefix_caching) {
    memset(m, 0, sizeof *m);
    m->cache = cache;
    m->n_groups = cache->n_groups;
    m->block_size = cache->block_size;
    m->prefix_caching = prefix_caching;
    m->pool = pool_create(cache->n_blocks);
    if (!m->pool) return err_oom("out of memory for the block pool");
    return 0;
}

void kvm_destroy(kv_manager *m) {
    pool_free(m->pool);
    m->pool = NULL;
    kv_plan_free(&m->plan);
}

static int window_of(const kv_manager *m, int g) { return m->cache->group_window[g]; }

/* First logical block a query at `pos` can see in group g (that s keeps). */
static int first_visible_block(const kv_manager *m, const seq_kv *s, int g, int pos) {
    const int w = s->keep_window_blocks ? 0 : window_of(m, g);
    const int first_pos = w && pos - w + 1 > 0 ? pos - w + 1 : 0;
    return first_pos / m->block_size;
}

static block_hash group_hash(block_hash h, int g) {
    return (block_hash){h.lo + (uint64_t)g * 0x9e3779b97f4a7c15ull, h.hi ^ (uint64_t)g};
}

int kvm_blocks_needed(const kv_manager *m, int n_tokens, int max_chunk) {
    const int bs = m->block_size;
    const int full = (n_tokens + bs - 1) / bs;
    int total = 0;
    for (int g = 0; g < m->n_groups; g++) {
        const int w = window_of(m, g);
        /* A step's queries span at most max_chunk tokens plus the window before them. */
        const int span = w ? (w + max_chunk - 1 + bs - 1) / bs + 1 : full;
        total += span < full ? span : full;
    }
    return total;
}

int kvm_blocks_needed_budget(const kv_manager *m, int budget) {
    return m->n_groups * ((budget + m->block_size - 1) / m->block_size) + 1;
}

static int list_reserve(block_list *l, int n) {
    return array_reserve((void **)&l->ids, &l->cap, (size_t)n, sizeof *l->ids);
}

int kvm_blocks_to_allocate(const kv_manager *m, const seq_kv *s, int start, int n) {
    const int bs = m->block_size, last = (start + n - 1) / bs;
    int count = 0;
    for (int g = 0; g < m->n_groups; g++) {
        const block_list *l = &s->lists[g];
        for (int b = first_visible_block(m, s, g, start); b <= last; b++) {
            if (b >= l->n || l->ids[b] < 0) count++;
            else if (b >= start / bs && pool_refcount(m->pool, l->ids[b]) > 1) count++; /* copy on write */
        }
    }
    return count;
}

int kvm_allocate(kv_manager *m, seq_kv *s, int start, int n) {
    if (n <= 0) return 0;
    const int need = kvm_blocks_to_allocate(m, s, start, n);
    if (need > pool_n_available(m->pool)) return -1;
    const int bs = m->block_size, last = (start + n - 1) / bs;
    if (kv_plan_reserve(&m->plan, need)) return -1; /* the copies below cannot then fail to be recorded */
    for (int g = 0; g < m->n_groups; g++)
        if (list_reserve(&s->lists[g], last + 1)) return -1;
    for (int g = 0; g < m->n_groups; g++) {
        block_list *l = &s->lists[g];
        const int first = first_visible_block(m, s, g, start);
        /* Sliding window: nothing from `start` on can see these blocks any more. */
        for (int b = 0; b < first && b < l->n; b++)
            if (l->ids[b] >= 0) {
                pool_unref(m->pool, l->ids[b]);
                l->ids[b] = -1;
            }
        while (l->n <= last) l->ids[l->n++] = -1;
        for (int b = first; b <= last; b++) {
            if (l->ids[b] < 0) {
                l->ids[b] = pool_alloc(m->pool);
            } else if (b >= start / bs && pool_refcount(m->pool, l->ids[b]) > 1) {
                const int copy = pool_alloc(m->pool);
                kv_plan_copy(&m->plan, l->ids[b], copy);
                pool_unref(m->pool, l->ids[b]);
                l->ids[b] = copy;
            }
        }
    }
    return 0;
}

static block_hash chain_root(void) { return (block_hash){0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull}; }

void kvm_commit(kv_manager *m, seq_kv *s, const int32_t *tokens, int n_computed) {
    if (!m->prefix_caching) return;
    const int bs = m->block_size;
    for (int b = s->n_registered; b < n_computed / bs; b++) {
        const block_hash h = block_hash_chain(b ? s->last_hash : chain_root(), tokens + (size_t)b * bs, bs);
        for (int g = 0; g < m->n_groups; g++) {
            const block_list *l = &s->lists[g];
            if (b < l->n && l->ids[b] >= 0) pool_set_hash(m->pool, l->ids[b], group_hash(h, g));
        }
        s->last_hash = h;
        s->n_registered = b + 1;
    }
}

static bool cached(const kv_manager *m, const block_hash *h, int b, int g) {
    return pool_lookup(m->pool, group_hash(h[b], g)) >= 0;
}

int kvm_match_prefix(kv_manager *m, seq_kv *s, const int32_t *tokens, int n) {
    if (n <= 0 || !m->prefix_caching) return 0;
    const int bs = m->block_size;
    const int max_blocks = (n - 1) / bs; /* the last token is always computed: its logits are needed */
    if (max_blocks == 0) return 0;
    block_hash *h = malloc((size_t)max_blocks * sizeof *h);
    if (!h) return 0;
    /* The longest run of leading blocks every full-attention group holds. */
    int k = 0;
    for (; k < max_blocks; k++) {
        h[k] = block_hash_chain(k ? h[k - 1] : chain_root(), tokens + (size_t)k * bs, bs);
        bool hit = true;
        for (int g = 0; g < m->n_groups && hit; g++)
            if ((!window_of(m, g) || s->keep_window_blocks) && !cached(m, h, k, g)) hit = false;
        if (!hit) break;
    }
    /* Sliding groups only need the blocks inside the window before position k*bs. */
    for (; k > 0; k--) {
        bool ok = true;
        for (int g = 0; g < m->n_groups && ok; g++)
            if (window_of(m, g))
                for (int b = first_visible_block(m, s, g, k * bs); b < k && ok; b++) ok = cached(m, h, b, g);
        if (ok) break;
    }
    for (int g = 0; g < m->n_groups && k > 0; g++)
        if (list_reserve(&s->lists[g], k)) k = 0;
    for (int g = 0; g < m->n_groups && k > 0; g++) {
        block_list *l = &s->lists[g];
        const int first = first_visible_block(m, s, g, k * bs);
        for (int b = 0; b < k; b++) {
            l->ids[b] = b < first ? -1 : pool_lookup(m->pool, group_hash(h[b], g));
            if (l->ids[b] >= 0) pool_ref(m->pool, l->ids[b]);
        }
        l->n = k;
    }
    if (k > 0) {
        s->n_registered = k;
        s->last_hash = h[k - 1];
    }
    free(h);
    return k * bs;
}

void kvm_truncate(kv_manager *m, seq_kv *s, int n_tokens) {
    const int keep = (n_tokens + m->block_size - 1) / m->block_size;
    for (int g = 0; g < m->n_groups; g++) {
        block_list *l = &s->lists[g];
        for (; l->n > keep; l->n--)
            if (l->ids[l->n - 1] >= 0) pool_unref(m->pool, l->ids[l->n - 1]);
    }
}

int kvm_fork(kv_manager *m, const seq_kv *src, seq_kv *dst) {
    memset(dst, 0, sizeof *dst);
    for (int g = 0; g < m->n_groups; g++) {
        const block_list *a = &src->lists[g];
        block_list *b = &dst->lists[g];
        if (list_reserve(b, a->n ? a->n : 1)) {
            kvm_release(m, dst);
            return -1;
        }
        for (int i = 0; i < a->n; i++) {
            b->ids[i] = a->ids[i];
            if (a->ids[i] >= 0) pool_ref(m->pool, a->ids[i]);
        }
        b->n = a->n;
    }
    dst->n_registered = src->n_registered;
    dst->last_hash = src->last_hash;
    dst->keep_window_blocks = src->keep_window_blocks;
    return 0;
}

void kvm_release(kv_manager *m, seq_kv *s) {
    for (int g = 0; g < KV_MAX_GROUPS; g++) {
        block_list *l = &s->lists[g];
        /* Last block first, so a prefix's head stays cached longest. */
        for (int b = l->n - 1; b >= 0; b--)
            if (l->ids[b] >= 0) pool_unref(m->pool, l->ids[b]);
        free(l->ids);
        *l = (block_list){0};
    }
    s->n_registered = 0;
}
