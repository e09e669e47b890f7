/* String table: open addressing with linear probing over XXH3 hashes. Sized
 * once for the most values it will hold (load factor at most 1/2), so it never
 * rehashes; a 262144-token vocabulary builds in a few milliseconds. */
#include "tokenizer/tok_internal.h"

#include "util/error.h"

#include <string.h>
#include <xxhash.h>

int strtab_init(strtab *t, uint32_t n_max, const char *const *keys, const uint32_t *lens) {
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n_max) cap *= 2;
    if (cap > (1u << 31)) return err_set("string table: %u entries is too many", n_max);
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->slots) return err_oom("string table: out of memory for %u entries", n_max);
    for (uint64_t i = 0; i < cap; i++) t->slots[i].val = -1;
    t->mask = (uint32_t)(cap - 1);
    t->keys = keys;
    t->lens = lens;
    return 0;
}

void strtab_free(strtab *t) {
    free(t->slots);
    t->slots = NULL;
}

uint64_t strtab_hash(const char *s, size_t len) { return XXH3_64bits(s, len); }

void strtab_prefetch(const strtab *t, uint64_t h) {
    __builtin_prefetch(&t->slots[(uint32_t)h & t->mask]);
}

static int32_t probe(const strtab *t, const char *s, size_t len, uint64_t h, uint32_t *slot_out,
                     uint32_t *tag_out) {
    uint32_t tag = (uint32_t)(h >> 32), i = (uint32_t)h & t->mask;
    *tag_out = tag;
    for (;; i = (i + 1) & t->mask) {
        const struct strtab_slot *sl = &t->slots[i];
        if (sl->val < 0) break;
        if (sl->tag == tag && t->lens[sl->val] == len && !memcmp(t->keys[sl->val], s, len)) {
            *slot_out = i;
            return sl->val;
        }
    }
    *slot_out = i;
    return -1;
}

int32_t strtab_insert_hashed(strtab *t, int32_t v, uint64_t h) {
    uint32_t slot, tag;
    int32_t old = probe(t, t->keys[v], t->lens[v], h, &slot, &tag);
    if (old >= 0) return old;
    t->slots[slot].tag = tag;
    t->slots[slot].val = v;
    return v;
}

int32_t strtab_insert(strtab *t, int32_t v) {
    return strtab_insert_hashed(t, v, strtab_hash(t->keys[v], t->lens[v]));
}

int32_t strtab_find(const strtab *t, const char *s, size_t len) {
    uint32_t slot, tag;
    return t->slots ? probe(t, s, len, strtab_hash(s, len), &slot, &tag) : -1;
}
