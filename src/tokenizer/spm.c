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
    const tokenizer *t;
    const char *text;
    char *key; /* "left right" when merging by rank */
    size_t key_cap;
} spm_ctx;

/* Two symbols merge when their joined text is a token; the best score first.
 * With merges (Hugging Face's BPE form of a SentencePiece model) they merge
 * when "left right" is a merge; the lowest rank first. */
static int spm_pair_key(void *ctx, const tok_sym *l, const tok_sym *r, double *key) {
    spm_ctx *c = ctx;
    if (c->t->n_merges > 0) return tok_merge_rank(c->t, c->text, l, r, &c->key, &c->key_cap, key);
    int32_t id = strtab_find(&c->t->vocab, c->text + l->off, (size_t)l->n + r->n);
    if (id < 0) return 0;
    *key = -(double)c->t->score[id];
    return 1;
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
    if (!buf) return err_oom("tokenizer: out of memory for %zu bytes of text", len);
    size_t n = 0;
    if (space_prefix) memcpy(buf + n, "\xe2\x96\x81", 3), n += 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ')
            memcpy(buf + n, "\xe2\x96\x81", 3), n += 3;
        else
            buf[n++] = text[i];
    }
    /* One symbol per byte at most: invalid UTF-8 before an escaped space can
     * split the space's three bytes. */
    tok_sym *sym = malloc((n + 1) * sizeof *sym);
    if (!sym) {
        free(buf);
        return err_oom("tokenizer: out of memory for %zu bytes of text", len);
    }
    int32_t n_sym = tok_split_chars(buf, n, sym);
    spm_ctx ctx = {.t = t, .text = buf};
    tok_merge_state m = {.pair_key = spm_pair_key, .ctx = &ctx};
    int rc = tok_merge(&m, sym, n_sym);
    for (int32_t i = n_sym ? 0 : -1; i >= 0 && rc == 0; i = sym[i].next)
        rc = emit_symbol(t, buf + sym[i].off, sym[i].n, out);
    tok_merge_free(&m);
    free(ctx.key);
    free(sym);
    free(buf);
    return rc;
}
