/* Incremental detokenization: each token's piece is appended to what is still
 * pending from earlier tokens, complete UTF-8 characters go out, and a valid
 * but unfinished sequence at the end waits for the next token. Bytes that can
 * never be part of a character become U+FFFD as soon as that is certain, one
 * per maximal invalid subpart (Unicode's recommended practice, which is what
 * Python's bytes.decode(errors="replace") does). */
#include "tokenizer/detok.h"

#include <stdlib.h>
#include <string.h>

/* How the bytes at s stand: the length of a complete, well-formed character
 * (> 0); 0 when they are a valid prefix that ends with the buffer; or -k when
 * the first k bytes are a maximal invalid subpart. */
static int utf8_check(const unsigned char *s, size_t n) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    int need;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        return -1;
    }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) return 0;
        if (s[i] < lo || s[i] > hi) return -i;
        lo = 0x80, hi = 0xBF;
    }
    return need + 1;
}

static const char k_replacement[3] = {'\xEF', '\xBF', '\xBD'};

/* Writes what is decided in buf[0..n) to out and returns the bytes written;
 * *used says how much of buf was consumed (the rest is an unfinished prefix,
 * unless `final`, when it too becomes U+FFFD). Stops early rather than write
 * past cap. */
static size_t emit(const unsigned char *buf, size_t n, bool final, char *out, size_t cap,
                   size_t *used) {
    size_t i = 0, w = 0;
    while (i < n) {
        int r = utf8_check(buf + i, n - i);
        if (r == 0 && !final) break;
        const char *src = (const char *)buf + i;
        size_t len = (size_t)r, adv = (size_t)r;
        if (r <= 0) {
            src = k_replacement;
            len = 3;
            adv = r == 0 ? n - i : (size_t)-r;
        }
        if (w + len > cap) break;
        memcpy(out + w, src, len);
        w += len;
        i += adv;
    }
    *used = i;
    return w;
}

size_t detok_push(const tokenizer *t, detok_state *st, int32_t id, bool special, char *out,
                  size_t cap) {
    unsigned char local[512];
    int np = st->n_pending;
    int n = tokenizer_token_to_piece(t, id, special, NULL, 0);
    if (n < 0) return 0;
    size_t total = (size_t)np + (size_t)n;
    unsigned char *buf = total <= sizeof local ? local : malloc(total);
    if (!buf) return 0;
    memcpy(buf, st->pending, (size_t)np);
    tokenizer_token_to_piece(t, id, special, (char *)buf + np, n);
    size_t used;
    size_t w = emit(buf, total, false, out, cap, &used);
    /* what is left is an unfinished character (at most 3 bytes), or, when out
     * was too small, whatever still fits in pending */
    size_t left = total - used;
    if (left > sizeof st->pending) left = sizeof st->pending;
    memcpy(st->pending, buf + used, left);
    st->n_pending = (int)left;
    if (buf != local) free(buf);
    return w;
}

size_t detok_flush(detok_state *st, char *out, size_t cap) {
    size_t used;
    size_t w = emit((const unsigned char *)st->pending, (size_t)st->n_pending, true, out, cap, &used);
    st->n_pending = 0;
    return w;
}
