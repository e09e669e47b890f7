/* See utf8.h. Everything is built on utf8_scan, which walks the ranges of
 * Unicode's table 3-7: the lead byte fixes the length and the range of the
 * second byte (which is where overlongs, surrogates and > U+10FFFF show),
 * later bytes are plain continuations. */
#include "util/utf8.h"

int utf8_scan(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    if (n == 0) return 0;
    unsigned c = s[0], lo = 0x80, hi = 0xBF; /* the range of the second byte */
    int need;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0; /* no overlongs */
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90; /* no overlongs */
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

int utf8_seq_len(const char *p, size_t n) {
    const int r = utf8_scan(p, n);
    return r > 0 ? r : 0;
}

int utf8_decode(const char *p, size_t n, uint32_t *cp) {
    const int len = utf8_seq_len(p, n);
    if (len == 0) return 0;
    const unsigned char *s = (const unsigned char *)p;
    static const unsigned char lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t v = s[0] & lead_mask[len];
    for (int i = 1; i < len; i++) v = (v << 6) | (s[i] & 0x3F);
    *cp = v;
    return len;
}

bool utf8_valid(const char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        const int len = utf8_seq_len(p + i, n - i);
        if (len == 0) return false;
        i += (size_t)len;
    }
    return true;
}

size_t utf8_count(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

int utf8_encode(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
