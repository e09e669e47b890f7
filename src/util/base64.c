/* See base64.h. */
#include "util/base64.h"

#include <stdint.h>

static const char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

void base64_encode(const void *src, size_t n, char *out) {
    const uint8_t *p = src;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *out++ = k_alphabet[v >> 18];
        *out++ = k_alphabet[(v >> 12) & 63];
        *out++ = k_alphabet[(v >> 6) & 63];
        *out++ = k_alphabet[v & 63];
    }
    if (i < n) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *out++ = k_alphabet[v >> 18];
        *out++ = k_alphabet[(v >> 12) & 63];
        *out++ = i + 1 < n ? k_alphabet[(v >> 6) & 63] : '=';
        *out++ = '=';
    }
    *out = 0;
}
