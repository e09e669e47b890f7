/* See token_mask_class.h. */
#include "grammar/token_mask_class.h"

#include "util/error.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Bounds: 1024 classified cuts per vocabulary, and at most 64 MiB of them
 * (with gemma's 262k tokens a cut that allows many tokens keeps 32 KiB of
 * bits, one that allows few a list); a canonical form of at most 16,384
 * words (a string, a number, any JSON value, most patterns), past which a
 * cut is keyed by its grammar and positions, shared only by that grammar's
 * states; at most 256 stacks. A state whose first bytes start fewer than 4096 tokens is
 * walked whole: that walk is as cheap as classifying. */
#define CLASS_ENTRIES 1024
#define CLASS_BYTES (64u << 20)
#define KEY_MAX 16384
#define MAX_FRAMES 32
#define MIN_TOKENS 4096
#define MAX_STACKS 256

typedef struct {
    uint64_t hash;
    uint32_t *key;
    uint32_t key_len;
    uint32_t *allowed_bits; /* bits by token id: matched wholly inside the suffix; or NULL and: */
    int32_t *allowed_ids;   /* the same as a list, when shorter */
    int n_allowed;
    int32_t *dependent; /* positions in v->order, ascending: reach past the suffix */
    int n_dependent;
    uint32_t peak; /* the deepest stack the classifying walk met */
    size_t bytes;
    uint64_t used;
} class_entry;

struct token_class_cache {
    pthread_mutex_t mu;
    class_entry *items[CLASS_ENTRIES];
    int n;
    size_t bytes;
    uint64_t clock;
    token_class_stats stats;
};

token_class_cache *token_class_cache_create(void) {
    token_class_cache *c = calloc(1, sizeof *c);
    if (c) pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void entry_free(class_entry *e) {
    if (!e) return;
    free(e->key);
    free(e->allowed_bits);
    free(e->allowed_ids);
    free(e->dependent);
    free(e);
}

void token_class_cache_free(token_class_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++)
        entry_free(c->items[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void token_class_stats_get(const token_vocab *v, token_class_stats *out) {
    *out = (token_class_stats){0};
    if (!v->classes) return;
    pthread_mutex_lock(&v->classes->mu);
    *out = v->classes->stats;
    pthread_mutex_unlock(&v->classes->mu);
}

/* ---- a state's suffix and its canonical form ---- */

typedef struct {
    uint32_t w[KEY_MAX];
    uint32_t n;
    bool over;
    uint32_t reach; /* the longest token's bytes: nothing farther can matter */
    int32_t *canon; /* per rule: its number in this form, -1 not yet reached */
    int32_t *queue; /* rules in the order they were numbered */
    int n_queue;
    uint32_t *dist; /* per rule: fewest bytes before its start (a lower bound), UINT32_MAX unseen */
    int32_t *todo;  /* rules whose distance fell, to propagate */
    int32_t *seen;  /* rules given a distance, to reset */
    bool *in_todo;
    int n_todo, n_seen;
    uint32_t max_words; /* past these, over: KEY_MAX words and every rule for a key, */
    int max_rules;      /* fewer for a stack compared alone (drop_copies) */
} key_builder;

#define FAR UINT32_MAX

static void put(key_builder *k, uint32_t x) {
    if (k->n == k->max_words)
        k->over = true;
    else
        k->w[k->n++] = x;
}

/* Distances along the elements from pos, starting d bytes in: a byte set
 * takes one byte, a rule none if it may be empty, else at least one. The
 * distance at the end (FAR past the reach). */
static uint32_t spread(key_builder *k, const grammar *g, uint32_t pos, uint32_t d) {
    for (;; pos++) {
        if (d > k->reach) return FAR;
        const gelem e = g->elems[pos];
        if (e.kind == GE_END) return d;
        if (e.kind == GE_BYTES) {
            d++;
            continue;
        }
        if (d < k->dist[e.arg]) {
            if (k->dist[e.arg] == FAR) k->seen[k->n_seen++] = (int32_t)e.arg;
            k->dist[e.arg] = d;
            if (!k->in_todo[e.arg]) k->in_todo[e.arg] = true, k->todo[k->n_todo++] = (int32_t)e.arg;
        }
        d += !g->nullable[e.arg];
    }
}

/* The elements from pos (d bytes in) to the end of its alternative: rules
 * by number, and what lies past the reach as one mark, since no token gets
 * there (a string's maxLength of 200 then reads like one of 300). Returns
 * the distance at the end. */
static uint32_t put_seq(key_builder *k, const grammar *g, uint32_t pos, uint32_t d) {
    for (; !k->over; pos++) {
        if (d > k->reach) {
            put(k, 5);
            return FAR;
        }
        const gelem e = g->elems[pos];
        if (e.kind == GE_END) {
            put(k, 3);
            return d;
        }
        if (e.kind == GE_BYTES) {
            put(k, 1);
            for (int i = 0; i < 4; i++)
                put(k, (uint32_t)g->sets[e.arg].bits[i]),
                    put(k, (uint32_t)(g->sets[e.arg].bits[i] >> 32));
            d++;
            continue;
        }
        int32_t *c = &k->canon[e.arg];
        if (*c < 0) *c = k->n_queue, k->queue[k->n_queue++] = (int32_t)e.arg;
        put(k, 2);
        put(k, (uint32_t)*c);
        d += !g->nullable[e.arg];
    }
    return FAR;
}

/* The canonical form of a cut state: each stack's frames (the rest of
 * each, top first), then every rule they reach within the reach, in the
 * order first reached. */
static void encode(key_builder *k, const grammar *g, const gstate *st) {
    for (int i = 0; i < k->n_queue; i++)
        k->canon[k->queue[i]] = -1;
    for (int i = 0; i < k->n_seen; i++)
        k->dist[k->seen[i]] = FAR;
    k->n = 0, k->n_queue = 0, k->n_seen = 0, k->n_todo = 0, k->over = false;
    /* First the distances: a rule's body is encoded from where it starts. */
    size_t off = 0;
    for (int s = 0; s < st->n_stacks; s++) {
        const uint32_t len = st->data[off], *pos = st->data + off + 1;
        off += 1 + len;
        uint32_t d = 0;
        for (uint32_t f = len; f-- > 0 && d != FAR;)
            d = spread(k, g, pos[f], d);
    }
    while (k->n_todo > 0) {
        const int32_t r = k->todo[--k->n_todo];
        k->in_todo[r] = false;
        if (k->n_seen > k->max_rules) continue; /* over: only the flags are reset */
        for (int32_t a = 0; a < g->alt_count[r]; a++)
            spread(k, g, (uint32_t)g->alts[g->alt_first[r] + a], k->dist[r]);
    }
    if (k->n_seen > k->max_rules) {
        k->over = true;
        return;
    }
    put(k, (uint32_t)st->n_stacks);
    off = 0;
    for (int s = 0; s < st->n_stacks; s++) {
        const uint32_t len = st->data[off], *pos = st->data + off + 1;
        off += 1 + len;
        put(k, len);
        uint32_t d = 0;
        for (uint32_t f = len; f-- > 0;) {
            if (d == FAR)
                put(k, 5);
            else
                d = put_seq(k, g, pos[f], d);
        }
    }
    for (int q = 0; q < k->n_queue && !k->over; q++) {
        const int32_t r = k->queue[q];
        put(k, (uint32_t)g->alt_count[r]);
        for (int32_t a = 0; a < g->alt_count[r]; a++)
            put_seq(k, g, (uint32_t)g->alts[g->alt_first[r] + a], k->dist[r]);
    }
}

/* When the canonical form is too long (a large pattern or format inside a
 * string): the grammar's identity and the frames' positions, which only
 * this grammar's states share. */
static void encode_local(key_builder *k, const grammar *g, const gstate *st) {
    k->n = 0, k->over = false;
    put(k, 0xffffffffu);
    put(k, (uint32_t)g->id), put(k, (uint32_t)(g->id >> 32));
    for (size_t i = 0; i < st->n; i++)
        put(k, st->data[i]);
}

static bool rest_nullable(const grammar *g, uint32_t pos) {
    for (;; pos++) {
        const gelem e = g->elems[pos];
        if (e.kind == GE_END) return true;
        if (e.kind == GE_BYTES || !g->nullable[e.arg]) return false;
    }
}

/* How many top frames a stack wants kept: the top, and the frames below it
 * down to the first whose rest needs a byte (the frame that ends what the
 * top is in, such as a string's closing quote). */
static uint32_t suffix_frames(const grammar *g, const uint32_t *pos, uint32_t len) {
    uint32_t n = 1;
    while (n < len && n < MAX_FRAMES) {
        n++;
        if (!rest_nullable(g, pos[len - n])) break;
    }
    return n;
}

/* The state of every stack's suffix; *deepest_cut is the most frames a
 * stack lost. Each stack wants its own suffix (suffix_frames), and is cut
 * at least as deep as any other stack it shares the cut-off frames with: a
 * string's closing-quote stack shares its character stacks' bottom frames,
 * so it keeps only the string's frame too, not the object around it.
 * Stacks with different bottoms (parses of several anyOf choices) keep
 * their own suffixes: a token allowed inside one is allowed by its whole
 * stack, and one that empties a suffix is checked against the whole state. */
static int cut_state(const grammar *g, const gstate *st, gstate *out, uint32_t *deepest_cut) {
    const int n = st->n_stacks;
    const uint32_t **pos = malloc((size_t)n * sizeof *pos);
    uint32_t *len = malloc((size_t)n * sizeof *len), *want = malloc((size_t)n * sizeof *want);
    int rc = pos && len && want ? 0 : err_oom("token classes: out of memory");
    size_t off = 0;
    for (int s = 0; s < n && !rc; s++) {
        len[s] = st->data[off], pos[s] = st->data + off + 1;
        off += 1 + len[s];
        want[s] = len[s] - suffix_frames(g, pos[s], len[s]);
    }
    gscratch w = {0};
    *deepest_cut = 0;
    for (int s = 0; s < n && !rc; s++) {
        uint32_t cut = want[s];
        for (int t = 0; t < n; t++)
            if (want[t] > cut && want[t] < len[s] &&
                !memcmp(pos[s], pos[t], want[t] * sizeof *pos[s]))
                cut = want[t];
        if (cut > *deepest_cut) *deepest_cut = cut;
        rc = gstate_add_stack(out, pos[s] + cut, len[s] - cut, &w, s == 0);
    }
    gscratch_free(&w);
    free(pos), free(len), free(want);
    return rc;
}

static uint64_t key_hash(const uint32_t *w, uint32_t n) {
    uint64_t h = 0x84222325cbf29ce4ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001b3ull;
    return h ^ h >> 31;
}

/* A fingerprint of a stack that copies share: along each frame, within the
 * reach, the kinds, byte sets and each rule's count of alternatives and
 * whether it may be empty. Equal sketches are then compared exactly. */
static uint64_t stack_sketch(const grammar *g, const uint32_t *pos, uint32_t len, uint32_t reach) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    for (uint32_t f = len; f-- > 0;) {
        uint32_t d = 0;
        for (uint32_t at = pos[f]; d <= reach; at++) {
            const gelem e = g->elems[at];
            uint64_t x = e.kind;
            if (e.kind == GE_END) break;
            if (e.kind == GE_BYTES) {
                const byte_set *b = &g->sets[e.arg];
                x ^= b->bits[0] * 3 ^ b->bits[1] * 5 ^ b->bits[2] * 7 ^ b->bits[3] * 11;
                d++;
            } else {
                x ^= (uint64_t)g->alt_count[e.arg] << 8 ^ (uint64_t)g->nullable[e.arg] << 40;
                d += !g->nullable[e.arg];
            }
            h = (h ^ x) * 0x100000001b3ull;
        }
        h = (h ^ 0xff) * 0x100000001b3ull;
    }
    return h;
}

/* The canonical form of one stack alone, as a new array (NULL when too
 * long to compare or out of memory: *rc says which). */
static uint32_t *stack_form(key_builder *kb, const grammar *g, const uint32_t *pos, uint32_t len,
                            gstate *one, gscratch *w, uint32_t *n, int *rc) {
    if ((*rc = gstate_add_stack(one, pos, len, w, true))) return NULL;
    /* Copies are small (the inside of a string): a stack reaching many
     * rules is not compared, which kept a 105-stack key state of Renovate's
     * from costing 16 ms here. */
    kb->max_words = 1024, kb->max_rules = 64;
    encode(kb, g, one);
    kb->max_words = KEY_MAX, kb->max_rules = INT_MAX;
    if (kb->over) return NULL;
    uint32_t *form = malloc(kb->n * sizeof *form);
    if (!form) {
        *rc = err_oom("token classes: out of memory");
        return NULL;
    }
    memcpy(form, kb->w, kb->n * sizeof *form);
    *n = kb->n;
    return form;
}

/* The cut without the stacks that read the same as an earlier one (equal
 * canonical forms, each alone): a token does on such a copy what it does
 * on the first, so classifying the first alone gives the same classes.
 * Copies come from one schema compiled at several places: Snapcraft's ten
 * project kinds each have their own "name" string, and inside it a state
 * holds 110 stacks, 11 per kind; classifying one kind's instead of all took
 * that state's first mask from 15 ms to 2. */
static int drop_copies(key_builder *kb, const grammar *g, const gstate *cut, gstate *out) {
    const int n = cut->n_stacks;
    const uint32_t **pos = malloc((size_t)n * sizeof *pos);
    uint32_t *len = malloc((size_t)n * sizeof *len), *form_len = calloc((size_t)n, sizeof *form_len);
    uint64_t *sketch = malloc((size_t)n * sizeof *sketch);
    uint32_t **form = calloc((size_t)n, sizeof *form);
    bool *copy = calloc((size_t)n, sizeof *copy), *formed = calloc((size_t)n, sizeof *formed);
    gstate one = {0};
    gscratch w = {0};
    int rc = pos && len && form_len && sketch && form && copy && formed
                 ? 0 : err_oom("token classes: out of memory");
    size_t off = 0;
    for (int s = 0; s < n && !rc; s++) {
        len[s] = cut->data[off], pos[s] = cut->data + off + 1;
        off += 1 + len[s];
        sketch[s] = stack_sketch(g, pos[s], len[s], kb->reach);
        for (int t = 0; t < s && !copy[s] && !rc; t++) {
            if (copy[t] || sketch[t] != sketch[s]) continue;
            for (int x = 0; x < 2 && !rc; x++) { /* each form taken once, when first compared */
                const int u = x ? s : t;
                if (!formed[u]) form[u] = stack_form(kb, g, pos[u], len[u], &one, &w, &form_len[u], &rc);
                formed[u] = true;
            }
            copy[s] = form[t] && form[s] && form_len[t] == form_len[s] &&
                      !memcmp(form[t], form[s], form_len[s] * sizeof *form[s]);
        }
    }
    int n_kept = 0;
    for (int s = 0; s < n && !rc; s++)
        if (!copy[s]) rc = gstate_add_stack(out, pos[s], len[s], &w, n_kept++ == 0);
    for (int s = 0; form && s < n; s++)
        free(form[s]);
    free(pos), free(len), free(form_len), free(sketch), free(form), free(copy), free(formed);
    gstate_free(&one), gscratch_free(&w);
    return rc;
}

/* ---- classifying the vocabulary against one suffix ---- */

static int push_dependent(class_entry *e, int *cap, int32_t at) {
    if (e->n_dependent == *cap) {
        const int nc = *cap ? *cap * 2 : 256;
        int32_t *p = realloc(e->dependent, (size_t)nc * sizeof *p);
        if (!p) return err_oom("token classes: out of memory");
        e->dependent = p, *cap = nc;
    }
    e->dependent[e->n_dependent++] = at;
    return 0;
}

/* The walk of token_mask.c from the cut stack's state, telling apart a
 * token refused inside the suffix from one whose path emptied the cut stack
 * (the cut-off frames would continue it) at some byte. */
static int classify(gdfa *d, const token_vocab *v, int root, class_entry *e) {
    const size_t words = (size_t)(v->n_vocab + 31) / 32;
    e->allowed_bits = calloc(words, sizeof *e->allowed_bits);
    int32_t *sid = malloc(((size_t)v->max_len + 1) * sizeof *sid);
    bool *left =
        malloc((size_t)v->max_len + 1); /* left[k]: some path emptied the stack by byte k */
    if (!e->allowed_bits || !sid || !left) {
        free(sid), free(left);
        return err_oom("token classes: out of memory");
    }
    sid[0] = root, left[0] = false;
    byte_set first;
    gstate_next_bytes(gdfa_grammar(d), gdfa_state(d, root), &first);
    int valid = 0, i = 0, rc = 0, cap = 0;
    while (i < v->n_order && !rc) {
        const int32_t id = v->order[i];
        int len;
        const unsigned char *p = token_vocab_sorted(v, i, &len);
        if (!byte_set_has(&first, p[0])) {
            i = v->first_end[p[0]];
            valid = 0;
            continue;
        }
        int k = v->lcp[i] < valid ? v->lcp[i] : valid, to = 0;
        for (; k < len; k++) {
            if ((to = gdfa_step(d, sid[k], p[k])) < 0) break;
            sid[k + 1] = to;
            left[k + 1] = left[k] || gdfa_accepts(d, to);
        }
        if (to == GDFA_DEAD) {
            /* Every token starting with bytes 0..k shares the verdict. */
            valid = k;
            int j = i + 1;
            while (j < v->n_order && v->lcp[j] >= k + 1)
                j++;
            for (; left[k] && i < j && !rc; i++)
                rc = push_dependent(e, &cap, i);
            i = j;
            continue;
        }
        if (to < 0) {
            rc = to;
            break;
        }
        /* A stack left after the last byte matched it all inside the
         * suffix; only an emptied one: the context decides what follows. */
        if (gdfa_has_stacks(d, sid[len]))
            e->allowed_bits[id >> 5] |= 1u << (id & 31), e->n_allowed++;
        else
            rc = push_dependent(e, &cap, i);
        valid = len;
        i++;
    }
    free(sid), free(left);
    e->peak = gdfa_peak(d);
    if (!rc && (size_t)e->n_allowed < words) { /* a list is shorter */
        if (!(e->allowed_ids =
                  malloc((e->n_allowed ? (size_t)e->n_allowed : 1) * sizeof *e->allowed_ids)))
            return err_oom("token classes: out of memory");
        int n = 0;
        for (size_t w = 0; w < words; w++)
            for (uint32_t b = e->allowed_bits[w]; b; b &= b - 1)
                e->allowed_ids[n++] = (int32_t)(w * 32 + (uint32_t)__builtin_ctz(b));
        free(e->allowed_bits);
        e->allowed_bits = NULL;
    }
    e->bytes = sizeof *e + e->key_len * sizeof *e->key +
               (size_t)e->n_dependent * sizeof *e->dependent +
               (e->allowed_bits ? words * sizeof *e->allowed_bits
                                : (size_t)e->n_allowed * sizeof *e->allowed_ids);
    return rc;
}

/* ---- the mask of a whole state ---- */

/* Checks the candidates (positions in v->order, ascending) from `root`, the
 * shared prefix of neighbours stepped once. */
static int check_candidates(gdfa *d, const token_vocab *v, int root, const int32_t *cand, int n,
                            uint32_t *mask) {
    int32_t *sid = malloc(((size_t)v->max_len + 1) * sizeof *sid);
    if (!sid) return err_oom("token classes: out of memory");
    sid[0] = root;
    int valid = 0, rc = 0, plen = 0;
    const unsigned char *prev = NULL;
    for (int c = 0; c < n && !rc; c++) {
        const int32_t id = v->order[cand[c]];
        int len;
        const unsigned char *p = token_vocab_sorted(v, cand[c], &len);
        int k = 0;
        while (k < valid && k < len && k < plen && p[k] == prev[k])
            k++;
        int to = 0;
        for (; k < len; k++) {
            if ((to = gdfa_step(d, sid[k], p[k])) < 0) break;
            sid[k + 1] = to;
        }
        prev = p, plen = len;
        if (to == GDFA_DEAD) {
            valid = k;
            continue;
        }
        if (to < 0) {
            rc = to;
            break;
        }
        mask[id >> 5] |= 1u << (id & 31);
        valid = len;
    }
    free(sid);
    return rc;
}

static class_entry *lookup(token_class_cache *c, uint64_t hash, const uint32_t *key, uint32_t len) {
    for (int i = 0; i < c->n; i++) {
        class_entry *e = c->items[i];
        if (e->hash == hash && e->key_len == len && !memcmp(e->key, key, len * sizeof *key))
            return e;
    }
    return NULL;
}

/* Enters a fresh entry (unless another request entered the same meanwhile;
 * then *e becomes that one and the fresh one is freed), evicting the least
 * recently used past the bounds. Under the cache's lock. */
static class_entry *enter(token_class_cache *c, class_entry *e) {
    class_entry *same = lookup(c, e->hash, e->key, e->key_len);
    if (same) {
        entry_free(e);
        return same;
    }
    while (c->n > 0 && (c->n == CLASS_ENTRIES || c->bytes + e->bytes > CLASS_BYTES)) {
        int old = 0;
        for (int i = 1; i < c->n; i++)
            if (c->items[i]->used < c->items[old]->used) old = i;
        c->bytes -= c->items[old]->bytes;
        entry_free(c->items[old]);
        c->items[old] = c->items[--c->n];
    }
    c->items[c->n++] = e;
    c->bytes += e->bytes;
    c->stats.walks++;
    return e;
}

/* Tokens the state's first bytes can start: few, and walking them all is
 * as cheap as classifying. */
static int tokens_under(const token_vocab *v, const byte_set *first) {
    int n = 0;
    for (int b = 0; b < 256; b++)
        if (byte_set_has(first, (unsigned)b)) n += v->first_end[b] - (b ? v->first_end[b - 1] : 0);
    return n;
}

/* The classes of a cut state: from the cache, or classified now and
 * entered. Returns the entry with the cache's lock held (the caller reads
 * it, then unlocks), NULL with rc set. */
static class_entry *classes_of(gdfa *d, const token_vocab *v, const gstate *cut, key_builder *kb,
                               int *rc) {
    token_class_cache *c = v->classes;
    const uint64_t hash = key_hash(kb->w, kb->n);
    pthread_mutex_lock(&c->mu);
    class_entry *e = lookup(c, hash, kb->w, kb->n);
    if (e) {
        c->stats.hits++;
        e->used = ++c->clock;
        return e;
    }
    pthread_mutex_unlock(&c->mu);
    /* Classified outside the lock (the constraint's own lock guards the DFA). */
    e = calloc(1, sizeof *e);
    if (!e || !(e->key = malloc(kb->n * sizeof *e->key))) {
        free(e);
        *rc = err_oom("token classes: out of memory");
        return NULL;
    }
    memcpy(e->key, kb->w, kb->n * sizeof *e->key);
    e->key_len = kb->n, e->hash = hash;
    gstate alone = {0}; /* the cut without copies, classified in its place */
    *rc = cut->n_stacks > 1 ? drop_copies(kb, gdfa_grammar(d), cut, &alone) : 0;
    const int root = *rc ? *rc : gdfa_intern(d, alone.n_stacks ? &alone : cut);
    if (alone.n_stacks) {
        pthread_mutex_lock(&c->mu);
        c->stats.copies += (uint64_t)(cut->n_stacks - alone.n_stacks);
        pthread_mutex_unlock(&c->mu);
    }
    gstate_free(&alone);
    *rc = root < 0 ? root : classify(d, v, root, e);
    if (*rc) {
        entry_free(e);
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    e = enter(c, e);
    e->used = ++c->clock;
    return e;
}

int token_mask_by_class(gdfa *d, const token_vocab *v, int root, uint32_t *mask) {
    const grammar *g = gdfa_grammar(d);
    const gstate *st = gdfa_state(d, root);
    if (!v->classes || !g->nullable || st->n_stacks == 0 || st->n_stacks > MAX_STACKS)
        return TOKEN_CLASS_UNUSED;
    byte_set first;
    gstate_next_bytes(g, st, &first);
    if (tokens_under(v, &first) < MIN_TOKENS) return TOKEN_CLASS_UNUSED;
    key_builder *kb = calloc(1, sizeof *kb);
    const size_t nr = (size_t)g->n_rules;
    int32_t *canon = kb ? malloc(nr * sizeof *canon) : NULL;
    int32_t *queue = canon ? malloc(nr * sizeof *queue) : NULL;
    uint32_t *dist = queue ? malloc(nr * sizeof *dist) : NULL;
    int32_t *todo = dist ? malloc(nr * sizeof *todo) : NULL;
    int32_t *seen = todo ? malloc(nr * sizeof *seen) : NULL;
    bool *in_todo = seen ? calloc(nr, sizeof *in_todo) : NULL;
    int32_t *cand = NULL;
    int n_cand = 0, rc = 0;
    const bool accept = st->accept;
    gstate cut = {0};
    uint32_t deepest_cut = 0;
    if (!in_todo) {
        rc = err_oom("token classes: out of memory");
        goto done;
    }
    if ((rc = cut_state(g, st, &cut, &deepest_cut))) goto done;
    memset(canon, 0xff, nr * sizeof *canon);
    memset(dist, 0xff, nr * sizeof *dist);
    kb->canon = canon, kb->queue = queue, kb->dist = dist, kb->todo = todo, kb->seen = seen,
    kb->in_todo = in_todo;
    kb->reach = (uint32_t)v->max_len;
    kb->max_words = KEY_MAX, kb->max_rules = INT_MAX;
    encode(kb, g, &cut);
    if (kb->over) encode_local(kb, g, &cut);
    if (kb->over) {
        rc = TOKEN_CLASS_UNUSED;
        goto done;
    }
    class_entry *e = classes_of(d, v, &cut, kb, &rc);
    if (!e) goto done;
    /* Exact only while the cut-off frames plus the suffix's deepest stack
     * stay within the depth bound the whole walk applies. */
    if (deepest_cut + e->peak > GRAMMAR_MAX_DEPTH)
        rc = TOKEN_CLASS_UNUSED;
    else if (!(cand = malloc((e->n_dependent ? (size_t)e->n_dependent : 1) * sizeof *cand)))
        rc = err_oom("token classes: out of memory");
    if (!rc) {
        const size_t words = (size_t)(v->n_vocab + 31) / 32;
        if (e->allowed_bits)
            memcpy(mask, e->allowed_bits, words * sizeof *mask);
        else
            memset(mask, 0, words * sizeof *mask);
        for (int i = 0; i < e->n_allowed && !e->allowed_bits; i++)
            mask[e->allowed_ids[i] >> 5] |= 1u << (e->allowed_ids[i] & 31);
        if (e->n_dependent) memcpy(cand, e->dependent, (size_t)e->n_dependent * sizeof *cand);
        n_cand = e->n_dependent;
    }
    pthread_mutex_unlock(&v->classes->mu);
    if (!rc) rc = check_candidates(d, v, root, cand, n_cand, mask);
    if (!rc && accept)
        for (int i = 0; i < v->n_eog; i++)
            mask[v->eog_ids[i] >> 5] |= 1u << (v->eog_ids[i] & 31);
done:
    if (rc == TOKEN_CLASS_UNUSED) {
        pthread_mutex_lock(&v->classes->mu);
        v->classes->stats.unused++;
        pthread_mutex_unlock(&v->classes->mu);
    }
    gstate_free(&cut);
    free(cand), free(queue), free(canon), free(dist), free(todo), free(seen), free(in_todo),
        free(kb);
    return rc;
}
