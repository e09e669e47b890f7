/* UTF-8 decoding and Python's character classes and case mappings, looked up
 * in the generated tables of template_unicode_data.c by binary search. */
#include "chat/template_internal.h"
#include "chat/template_unicode.h"

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

static const tpl_range *find_range(const tpl_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo)
            hi = mid - 1;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return &r[mid];
    }
    return NULL;
}

static bool in_ranges(const tpl_range *r, int n, uint32_t cp) {
    return find_range(r, n, cp) != NULL;
}

bool tpl_py_isspace(uint32_t cp) {
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool tpl_py_isprintable(uint32_t cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
    return !in_ranges(tpl_nonprintable, tpl_nonprintable_count, cp);
}

int tpl_py_decimal(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9' ? (int)(cp - '0') : -1;
    const tpl_range *run = find_range(tpl_decimal, tpl_decimal_count, cp);
    return run ? (int)((cp - run->lo) % 10) : -1; /* runs of ten, from 0 */
}

bool tpl_py_iscase_ignorable(uint32_t cp) {
    return in_ranges(tpl_case_ignorable, tpl_case_ignorable_count, cp);
}

static bool is_cased(uint32_t cp) {
    return in_ranges(tpl_cased, tpl_cased_count, cp);
}

static const tpl_case_run *find_run(const tpl_case_run *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo)
            hi = mid - 1;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return (cp - r[mid].lo) % (uint32_t)r[mid].stride == 0 ? &r[mid] : NULL;
    }
    return NULL;
}

static uint32_t map_single(const tpl_case_run *r, int n, uint32_t cp) {
    const tpl_case_run *run = find_run(r, n, cp);
    return run ? (uint32_t)((int32_t)cp + run->delta) : cp;
}

static int put_mapped(sbuf *b, uint32_t cp, const tpl_case_run *r, int nr, const tpl_case_multi *m,
                      int nm) {
    for (int i = 0; i < nm; i++)
        if (m[i].cp == cp) {
            for (int k = 0; k < 3 && m[i].to[k]; k++)
                if (tpl_sb_put_cp(b, m[i].to[k])) return -1;
            return 0;
        }
    return tpl_sb_put_cp(b, map_single(r, nr, cp));
}

int tpl_py_upper_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80) return tpl_sb_putc(b, (char)(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    return put_mapped(b, cp, tpl_upper_runs, tpl_upper_runs_count, tpl_upper_multi,
                      tpl_upper_multi_count);
}

int tpl_py_title_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80) return tpl_sb_putc(b, (char)(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    return put_mapped(b, cp, tpl_title_runs, tpl_title_runs_count, tpl_title_multi,
                      tpl_title_multi_count);
}

int tpl_py_lower_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80) return tpl_sb_putc(b, (char)(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return put_mapped(b, cp, tpl_lower_runs, tpl_lower_runs_count, tpl_lower_multi,
                      tpl_lower_multi_count);
}

bool tpl_py_iscased(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return is_cased(cp);
}
