/* What both encoders build on: token arrays, cutting text into characters
 * the way llama.cpp does, and the merge loop. SentencePiece merges the pair
 * whose joined text is the best-scoring token (or, for a vocabulary that came
 * with merges, the lowest-ranked merge), BPE the pair with the lowest merge
 * rank; both are "smallest key first, leftmost on ties" over a binary
 * heap, with pairs gone stale (a side merged since) skipped when popped. */
#include "tokenizer/tok_internal.h"

#include "util/error.h"
#include "util/array.h"

#include <string.h>

int tokvec_grow(tokvec *a, size_t need) {
    return array_reserve((void **)&a->v, &a->cap, need, sizeof *a->v);
}

int tok_merge_rank(const tokenizer *t, const char *text, const tok_sym *l, const tok_sym *r, char **buf,
                   size_t *cap, double *rank) {
    size_t need = (size_t)l->n + 1 + r->n;
    if (array_reserve((void **)buf, cap, need, 1)) return -1;
    memcpy(*buf, text + l->off, l->n);
    (*buf)[l->n] = ' ';
    memcpy(*buf + l->n + 1, text + r->off, r->n);
    int32_t found = strtab_find(&t->merges, *buf, need);
    if (found < 0) return 0;
    *rank = found;
    return 1;
}

int32_t tok_split_chars(const char *text, size_t len, tok_sym *sym) {
    int32_t n = 0;
    for (size_t off = 0; off < len;) {
        size_t l = utf8_len_lax((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        sym[n] = (tok_sym){n - 1, off + l == len ? -1 : n + 1, (uint32_t)off, (uint32_t)l};
        n++;
        off += l;
    }
    return n;
}

typedef struct {
    double key;
    int32_t left, right;
    uint32_t left_n, right_n; /* sizes when queued: a change means stale */
} tok_pair;

/* a comes out of the queue before b */
static bool pair_first(const tok_pair *a, const tok_pair *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int pair_push(tok_merge_state *m, tok_pair x) {
    if (array_reserve((void **)&m->heap, &m->heap_cap, m->heap_n + 1, sizeof x)) return -1;
    tok_pair *h = m->heap;
    size_t i = m->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!pair_first(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
    return 0;
}

static tok_pair pair_pop(tok_merge_state *m) {
    tok_pair *h = m->heap;
    tok_pair top = h[0], x = h[--m->heap_n];
    size_t i = 0, n = m->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_first(&h[c + 1], &h[c])) c++;
        if (!pair_first(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = x;
    return top;
}

static int try_pair(tok_merge_state *m, tok_sym *sym, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    double key;
    int rc = m->pair_key(m->ctx, &sym[left], &sym[right], &key);
    if (rc <= 0) return rc;
    return pair_push(m, (tok_pair){key, left, right, sym[left].n, sym[right].n});
}

int tok_merge(tok_merge_state *m, tok_sym *sym, int32_t n) {
    m->heap_n = 0;
    for (int32_t i = 1; i < n; i++)
        if (try_pair(m, sym, i - 1, i)) return -1;
    while (m->heap_n) {
        tok_pair p = pair_pop(m);
        tok_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n != p.left_n || r->n != p.right_n) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        if (try_pair(m, sym, l->prev, p.left) || try_pair(m, sym, p.left, l->next)) return -1;
    }
    return 0;
}

void tok_merge_free(tok_merge_state *m) {
    free(m->heap);
    m->heap = NULL;
    m->heap_n = m->heap_cap = 0;
}
