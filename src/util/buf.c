/* See buf.h. */
#include "util/buf.h"

#include "util/utf8.h"
#include "util/array.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(buf *b, size_t extra) {
    if (b->oom) return false;
    if (extra > SIZE_MAX - b->len - 1 || array_reserve((void **)&b->data, &b->cap, b->len + extra + 1, 1)) {
        b->oom = true;
        return false;
    }
    return true;
}

void buf_append(buf *b, const void *p, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void buf_puts(buf *b, const char *s) { buf_append(b, s, strlen(s)); }

void buf_printf(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        buf_append(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void buf_consume(buf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data) b->data[b->len] = 0;
}

void buf_reset(buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void buf_free(buf *b) {
    free(b->data);
    *b = (buf){0};
}

void buf_append_utf8(buf *b, const char *p, size_t n) {
    size_t run = 0; /* start of the current valid run */
    for (size_t i = 0; i < n;) {
        const int l = utf8_seq_len(p + i, n - i);
        if (l) {
            i += (size_t)l;
            continue;
        }
        buf_append(b, p + run, i - run);
        buf_append(b, "\xEF\xBF\xBD", 3);
        i++;
        run = i;
    }
    buf_append(b, p + run, n - run);
}
