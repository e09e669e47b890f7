/* The byte-level pushdown recognizer; see grammar_match.h. */
#include "grammar/grammar_match.h"

#include "util/error.h"
#include "util/array.h"

#include <stdlib.h>
#include <string.h>

/* Expansion steps of one advance before the grammar counts as too ambiguous. */
#define MAX_EXPANSIONS 200000

void gstate_free(gstate *s) {
    free(s->data);
    free(s->hashes);
    *s = (gstate){0};
}

void gscratch_free(gscratch *w) {
    free(w->work);
    free(w->cur);
    free(w->slots);
    *w = (gscratch){0};
}

static void state_clear(gstate *s) {
    s->n = 0;
    s->n_stacks = 0;
    s->accept = false;
    s->hash = 0;
}

static uint64_t stack_hash(const uint32_t *pos, uint32_t len) {
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    for (uint32_t i = 0; i < len; i++) h = (h ^ pos[i]) * 0x100000001b3ull;
    return h;
}

static uint32_t slot_of(uint64_t h, uint32_t mask) {
    return (uint32_t)(h ^ h >> 32) & mask;
}

/* Makes room in the index for one more stack of s: a table twice as large,
 * s's stacks entered again. */
static int index_grow(const gstate *s, gscratch *w) {
    uint32_t n = w->n_slots ? w->n_slots : 64;
    while (n < 2 * ((uint32_t)s->n_stacks + 1)) n *= 2;
    gslot *slots = calloc(n, sizeof *slots);
    if (!slots) return err_oom("grammar: out of memory");
    free(w->slots);
    w->slots = slots;
    w->n_slots = n;
    size_t off = 0;
    for (int k = 0; k < s->n_stacks; k++) {
        uint32_t i = slot_of(s->hashes[k], n - 1);
        while (slots[i].gen == w->gen) i = (i + 1) & (n - 1);
        slots[i] = (gslot){s->hashes[k], (uint32_t)off, w->gen};
        off += 1 + s->data[off];
    }
    return 0;
}

/* A new generation empties the stack index without touching it. */
static void new_generation(gscratch *w) {
    if (++w->gen == 0) {
        if (w->slots) memset(w->slots, 0, w->n_slots * sizeof *w->slots);
        w->gen = 1;
    }
}

/* Adds a stack whose top is a byte set, unless the state has it already. */
static int add_stack(gstate *s, gscratch *w, const uint32_t *pos, uint32_t len) {
    const uint64_t h = stack_hash(pos, len);
    if (2 * ((uint32_t)s->n_stacks + 1) > w->n_slots && index_grow(s, w)) return -1;
    const uint32_t mask = w->n_slots - 1;
    uint32_t i = slot_of(h, mask);
    for (; w->slots[i].gen == w->gen; i = (i + 1) & mask) {
        const gslot *sl = &w->slots[i];
        if (sl->hash == h && s->data[sl->off] == len && !memcmp(s->data + sl->off + 1, pos, len * sizeof *pos))
            return 0;
    }
    if (s->n_stacks >= GRAMMAR_MAX_STACKS)
        return err_set("grammar too ambiguous: more than %d parses at once", GRAMMAR_MAX_STACKS);
    size_t cap_st = (size_t)s->cap_stacks;
    if (array_reserve((void **)&s->hashes, &cap_st, (size_t)s->n_stacks + 1, sizeof *s->hashes)) return -1;
    s->cap_stacks = (int)cap_st;
    if (array_reserve((void **)&s->data, &s->cap, s->n + 1 + len, sizeof *s->data)) return -1;
    w->slots[i] = (gslot){h, (uint32_t)s->n, w->gen};
    s->data[s->n] = len;
    memcpy(s->data + s->n + 1, pos, len * sizeof *pos);
    s->n += 1 + len;
    s->hashes[s->n_stacks++] = h;
    s->hash = (s->hash ^ h) * 0x9e3779b97f4a7c15ull + 1;
    return 0;
}

static int work_push(gscratch *w, const uint32_t *pos, uint32_t len, uint32_t top_replace, bool replace,
                     bool extra, uint32_t extra_pos) {
    const size_t need = w->n + len + 2;
    if (array_reserve((void **)&w->work, &w->cap, need, sizeof *w->work)) return -1;
    uint32_t *d = w->work + w->n;
    if (len) memcpy(d, pos, len * sizeof *pos);
    if (replace && len) d[len - 1] = top_replace;
    uint32_t n = len;
    if (extra) d[n++] = extra_pos;
    d[n] = n; /* the length goes last, so the work list pops from its end */
    w->n += n + 1;
    return 0;
}

/* Expands the stacks on the work list into `out`, which is empty. */
static int expand(const grammar *g, gstate *out, gscratch *w) {
    long steps = 0;
    int rc = 0;
    new_generation(w);
    while (w->n > 0) {
        if (++steps > MAX_EXPANSIONS) {
            rc = err_set("grammar too ambiguous: more than %d expansion steps for one byte", MAX_EXPANSIONS);
            break;
        }
        const uint32_t len = w->work[w->n - 1];
        w->n -= len + 1;
        if (len > w->peak) w->peak = len;
        if (len == 0) {
            if (!out->accept) out->hash ^= 0x5bd1e995u;
            out->accept = true;
            continue;
        }
        if (array_reserve((void **)&w->cur, &w->cap_cur, len + 1, sizeof *w->cur)) {
            rc = -1;
            break;
        }
        uint32_t *cur = w->cur;
        memcpy(cur, w->work + w->n, len * sizeof *cur);
        const uint32_t top = cur[len - 1];
        const gelem e = g->elems[top];
        if (e.kind == GE_BYTES) {
            if ((rc = add_stack(out, w, cur, len))) break;
        } else if (e.kind == GE_END) {
            if ((rc = work_push(w, cur, len - 1, 0, false, false, 0))) break;
        } else {
            const bool tail = g->elems[top + 1].kind == GE_END;
            const int32_t first = g->alt_first[e.arg], count = g->alt_count[e.arg];
            if (!tail && len + 1 > GRAMMAR_MAX_DEPTH) {
                w->peak = len + 1;
                continue; /* nesting past the bound: this parse ends */
            }
            /* Pushed in reverse so alternatives expand in grammar order. */
            for (int32_t a = count - 1; a >= 0; a--) {
                const uint32_t start = (uint32_t)g->alts[first + a];
                if (tail) rc = work_push(w, cur, len, start, true, false, 0);
                else rc = work_push(w, cur, len, top + 1, true, true, start);
                if (rc) break;
            }
            if (rc) break;
        }
    }
    w->n = 0;
    return rc;
}

int gstate_init(gstate *s, const grammar *g, gscratch *w) {
    state_clear(s);
    w->n = 0;
    /* The root as one rule reference followed by an end: a one-frame stack
     * at a virtual position would need its own element, so expand the root's
     * alternatives directly as one-frame stacks. */
    const int32_t first = g->alt_first[g->root], count = g->alt_count[g->root];
    for (int32_t a = count - 1; a >= 0; a--) {
        const uint32_t start = (uint32_t)g->alts[first + a];
        if (work_push(w, &start, 1, 0, false, false, 0)) return -1;
    }
    return expand(g, s, w);
}

int gstate_add_stack(gstate *s, const uint32_t *pos, uint32_t len, gscratch *w, bool fresh) {
    if (fresh) {
        state_clear(s);
        new_generation(w);
    }
    return add_stack(s, w, pos, len);
}

int gstate_advance(const grammar *g, const gstate *from, unsigned char byte, gstate *to, gscratch *w) {
    state_clear(to);
    w->n = 0;
    size_t off = 0;
    for (int i = 0; i < from->n_stacks; i++) {
        const uint32_t len = from->data[off];
        const uint32_t *pos = from->data + off + 1;
        const uint32_t top = pos[len - 1];
        off += 1 + len;
        if (!byte_set_has(&g->sets[g->elems[top].arg], byte)) continue;
        if (work_push(w, pos, len, top + 1, true, false, 0)) return -1;
    }
    if (w->n == 0) return 0;
    if (expand(g, to, w)) return -1;
    return to->n_stacks > 0 || to->accept;
}

int gstate_copy(gstate *dst, const gstate *src) {
    size_t cap_st = (size_t)dst->cap_stacks;
    if (array_reserve((void **)&dst->data, &dst->cap, src->n ? src->n : 1, sizeof *dst->data) ||
        array_reserve((void **)&dst->hashes, &cap_st, src->n_stacks ? (size_t)src->n_stacks : 1, sizeof *dst->hashes))
        return -1;
    dst->cap_stacks = (int)cap_st;
    if (src->n) memcpy(dst->data, src->data, src->n * sizeof *src->data);
    if (src->n_stacks) memcpy(dst->hashes, src->hashes, (size_t)src->n_stacks * sizeof *src->hashes);
    dst->n = src->n;
    dst->n_stacks = src->n_stacks;
    dst->accept = src->accept;
    dst->hash = src->hash;
    return 0;
}

bool gstate_equal(const gstate *a, const gstate *b) {
    return a->hash == b->hash && a->accept == b->accept && a->n == b->n && a->n_stacks == b->n_stacks &&
           (a->n == 0 || !memcmp(a->data, b->data, a->n * sizeof *a->data));
}

int gstate_advance_bytes(const grammar *g, gstate *s, const unsigned char *bytes, size_t n, gscratch *w) {
    gstate a = {0}, b = {0};
    if (gstate_copy(&a, s)) return -1;
    int rc = 1;
    for (size_t i = 0; i < n && rc == 1; i++) {
        rc = gstate_advance(g, &a, bytes[i], &b, w);
        gstate t = a;
        a = b, b = t;
    }
    if (rc == 1) rc = gstate_copy(s, &a) ? -1 : 1;
    gstate_free(&a);
    gstate_free(&b);
    return rc;
}

void gstate_next_bytes(const grammar *g, const gstate *s, byte_set *out) {
    *out = (byte_set){{0}};
    size_t off = 0;
    for (int i = 0; i < s->n_stacks; i++) {
        const uint32_t len = s->data[off];
        const byte_set *set = &g->sets[g->elems[s->data[off + len]].arg];
        for (int k = 0; k < 4; k++) out->bits[k] |= set->bits[k];
        off += 1 + len;
    }
}
