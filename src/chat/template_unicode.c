/* UTF-8 decoding and Python's character classes and case mappings for the
 * interpreter: util/unicode.h's, with the ASCII fast paths and the output
 * into the interpreter's string buffers. */
#include "chat/template_internal.h"

#include "util/unicode.h"
#include "util/utf8.h"

uint32_t tpl_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = *i;
    uint32_t c = u[k];
    if (c < 0x80 || k + 1 >= n) {
        *i = k + 1;
        return c;
    }
    if (c < 0xE0) {
        *i = k + 2;
        return ((c & 0x1F) << 6) | (u[k + 1] & 0x3F);
    }
    if (c < 0xF0 || k + 3 >= n) {
        if (k + 2 >= n) {
            *i = n;
            return 0xFFFD;
        }
        *i = k + 3;
        return ((c & 0x0F) << 12) | ((u[k + 1] & 0x3F) << 6) | (u[k + 2] & 0x3F);
    }
    *i = k + 4;
    return ((c & 0x07) << 18) | ((u[k + 1] & 0x3F) << 12) | ((u[k + 2] & 0x3F) << 6) |
           (u[k + 3] & 0x3F);
}

size_t tpl_utf8_len(tstr s) { return utf8_count(s.p, s.n); }

bool tpl_py_isspace(uint32_t cp) { return unicode_is_space(cp); }

bool tpl_py_isprintable(uint32_t cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
    return unicode_is_printable(cp);
}

int tpl_py_decimal(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9' ? (int)(cp - '0') : -1;
    return unicode_decimal_value(cp);
}

bool tpl_py_iscase_ignorable(uint32_t cp) { return unicode_is_case_ignorable(cp); }

bool tpl_py_iscased(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return unicode_is_cased(cp);
}

static int put_mapped(sbuf *b, const uint32_t *cps, int n) {
    for (int i = 0; i < n; i++)
        if (tpl_sb_put_cp(b, cps[i])) return -1;
    return 0;
}

int tpl_py_upper_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80) return tpl_sb_putc(b, (char)(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    uint32_t m[UNICODE_MAX_CASE_MAP];
    return put_mapped(b, m, unicode_to_upper(cp, m));
}

int tpl_py_title_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80) return tpl_sb_putc(b, (char)(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    uint32_t m[UNICODE_MAX_CASE_MAP];
    return put_mapped(b, m, unicode_to_title(cp, m));
}

int tpl_py_lower_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80) return tpl_sb_putc(b, (char)(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    uint32_t m[UNICODE_MAX_CASE_MAP];
    return put_mapped(b, m, unicode_to_lower(cp, m));
}
