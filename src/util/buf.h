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

/* UTF-8 helpers for text that must become a JSON string. */
/* Whether p[0..n) is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF). */
bool buf_utf8_valid(const char *p, size_t n);
/* Appends p[0..n) with each ill-formed sequence replaced by U+FFFD. */
void buf_append_utf8(buf *b, const char *p, size_t n);
/* Length of the well-formed UTF-8 sequence at p (1..4), 0 if ill-formed. */
int buf_utf8_seq_len(const unsigned char *p, size_t n);
/* Code points in well-formed UTF-8 text. */
size_t buf_utf8_count(const char *p, size_t n);

#endif
