/* Incremental detokenization: each token's piece is appended to what is still
 * pending from earlier tokens, complete UTF-8 characters go out, and a valid
 * but unfinished sequence at the end waits for the next token. Bytes that can
 * never be part of a character become U+FFFD as soon as that is certain, one
 * per maximal invalid subpart (Unicode's recommended practice, which is what
 * Python's bytes.decode(errors="replace") does). */
#include "tokenizer/detok.h"

#include "util/utf8.h"

#include <stdlib.h>
#include <string.h>

static const char k_replacement[3] = {'\xEF', '\xBF', '\xBD'};

/* Writes what is decided in buf[0..n) to out and returns the bytes written;
 * *used says how much of buf was consumed (the rest is an unfinished prefix,
 * unless `final`, when it too becomes U+FFFD). Stops early rather than write
 * past cap. */
static size_t emit(const unsigned char *buf, size_t n, bool final, char *out, size_t cap,
                   size_t *used) {
    size_t i = 0, w = 0;
    while (i < n) {
        const char *src = (const char *)buf + i;
        const int r = utf8_scan(src, n - i);
        if (r == 0 && !final) break;
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
