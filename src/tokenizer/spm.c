/* SentencePiece-style encoding of one piece of raw text (llama.cpp's
 * llm_tokenizer_spm): spaces become U+2581, the text is cut into UTF-8
 * characters, and the adjacent pair whose concatenation is the vocabulary
 * token with the highest score is merged, leftmost first on ties, until no
 * pair forms a token. A piece left that is not a token (a character outside
 * the vocabulary) falls back to its bytes' <0xXX> tokens. */
#include "tokenizer/tok_internal.h"

#include "util/error.h"

#include <string.h>

typedef struct {
    int32_t prev, next;
    uint32_t off, n; /* n == 0: merged into its left neighbour */
} spm_sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

typedef struct {
    spm_bigram *v;
    size_t n, cap;
} spm_heap;

/* a comes out of the queue before b */
static bool bigram_first(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(spm_heap *h, spm_bigram x) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        spm_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return err_set("tokenizer: out of memory merging pieces");
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_first(&x, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
    return 0;
}

static spm_bigram heap_pop(spm_heap *h) {
    spm_bigram top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_first(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_first(&h->v[c], &x)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = x;
    return top;
}

typedef struct {
    const tokenizer *t;
    const char *text;
    spm_sym *sym;
    spm_heap heap;
} spm_session;

static int try_add_bigram(spm_session *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    uint32_t size = s->sym[left].n + s->sym[right].n;
    int32_t id = strtab_find(&s->t->vocab, s->text + s->sym[left].off, size);
    if (id < 0) return 0;
    return heap_push(&s->heap, (spm_bigram){s->t->score[id], left, right, size});
}

static int emit_symbol(const tokenizer *t, const char *p, uint32_t n, tokvec *out) {
    int32_t id = strtab_find(&t->vocab, p, n);
    if (id >= 0) return tokvec_push(out, id);
    for (uint32_t i = 0; i < n; i++) {
        int32_t b = t->byte_tok[(uint8_t)p[i]];
        if (b < 0) b = t->unk;
        if (b < 0)
            return err_set("tokenizer: byte 0x%02X has no token (no <0x%02X> and no unknown token)",
                           (uint8_t)p[i], (uint8_t)p[i]);
        if (tokvec_push(out, b)) return -1;
    }
    return 0;
}

int spm_encode(const tokenizer *t, const char *text, size_t len, bool space_prefix, tokvec *out) {
    if (len > (UINT32_MAX - 3) / 3) return err_set("tokenizer: text of %zu bytes is too long", len);
    char *buf = malloc(3 * (len + 1));
    if (!buf) return err_set("tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    if (space_prefix) memcpy(buf + n, "\xe2\x96\x81", 3), n += 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ')
            memcpy(buf + n, "\xe2\x96\x81", 3), n += 3;
        else
            buf[n++] = text[i];
    }
    /* At most one symbol per byte: invalid UTF-8 before an escaped space can
     * split the space's three bytes. */
    spm_sym *sym = malloc((n + 1) * sizeof *sym);
    if (!sym) {
        free(buf);
        return err_set("tokenizer: out of memory for %zu bytes of text", len);
    }

    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t l = utf8_len_lax((unsigned char)buf[off]);
        if (l > n - off) l = n - off;
        sym[n_sym] = (spm_sym){n_sym - 1, off + l == n ? -1 : n_sym + 1, (uint32_t)off, (uint32_t)l};
        n_sym++;
        off += l;
    }

    spm_session s = {t, buf, sym, {0}};
    int rc = 0;
    for (int32_t i = 1; i < n_sym && rc == 0; i++) rc = try_add_bigram(&s, i - 1, i);
    while (s.heap.n && rc == 0) {
        spm_bigram bg = heap_pop(&s.heap);
        spm_sym *l = &sym[bg.left], *r = &sym[bg.right];
        /* stale: one side was merged since this pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != bg.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = bg.left;
        rc = try_add_bigram(&s, l->prev, bg.left);
        if (rc == 0) rc = try_add_bigram(&s, bg.left, l->next);
    }
    for (int32_t i = n_sym ? 0 : -1; i >= 0 && rc == 0; i = sym[i].next)
        rc = emit_symbol(t, buf + sym[i].off, sym[i].n, out);

    free(s.heap.v);
    free(sym);
    free(buf);
    return rc;
}
