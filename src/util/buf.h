/* A growable byte buffer for building response bodies and SSE streams: appends
 * never fail silently (a failed allocation sticks in `oom` and later appends
 * are ignored, so a caller checks once at the end), and the bytes are always
 * NUL-terminated. */
#ifndef CLLM_UTIL_BUF_H
#define CLLM_UTIL_BUF_H

#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *data;
    size_t len, cap;
    bool oom;
} buf;

void buf_append(buf *b, const void *p, size_t n);
void buf_puts(buf *b, const char *s);
void buf_printf(buf *b, const char *fmt, ...) CLLM_PRINTF(2, 3);
/* Drops the first n bytes. */
void buf_consume(buf *b, size_t n);
void buf_reset(buf *b);
void buf_free(buf *b);

/* Appends p[0..n) with each byte that does not start a well-formed UTF-8
 * character (util/utf8.h) replaced by U+FFFD, for text that must become a
 * JSON string. */
void buf_append_utf8(buf *b, const char *p, size_t n);

#endif
