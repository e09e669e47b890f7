/* See unicode.h. Binary search over the sorted tables of unicode_data.c. */
#include "util/unicode.h"

#include "util/unicode_tables.h"

#include <stddef.h>

/* The entry holding cp in a table sorted by code point, or NULL. Every
 * entry (of `size` bytes) starts with its first code point, lo; hi_off is
 * where its last one, hi, lies (0 for a single code point: hi is lo). */
static const void *find_entry(const void *table, int n, size_t size, size_t hi_off, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        const char *e = (const char *)table + (size_t)mid * size;
        if (cp < *(const uint32_t *)e) hi = mid - 1;
        else if (cp > *(const uint32_t *)(e + hi_off)) lo = mid + 1;
        else return e;
    }
    return NULL;
}

static const unicode_range *find_range(const unicode_range *r, int n, uint32_t cp) {
    return find_entry(r, n, sizeof *r, offsetof(unicode_range, hi), cp);
}

static bool in_ranges(const unicode_range *r, int n, uint32_t cp) { return find_range(r, n, cp) != NULL; }

bool unicode_is_other(uint32_t cp) { return in_ranges(unicode_other, unicode_other_count, cp); }
bool unicode_is_punct(uint32_t cp) { return in_ranges(unicode_punct, unicode_punct_count, cp); }
bool unicode_is_nonspacing_mark(uint32_t cp) {
    return in_ranges(unicode_mark_nonspacing, unicode_mark_nonspacing_count, cp);
}
bool unicode_is_cased(uint32_t cp) { return in_ranges(unicode_cased, unicode_cased_count, cp); }
bool unicode_is_case_ignorable(uint32_t cp) {
    return in_ranges(unicode_case_ignorable, unicode_case_ignorable_count, cp);
}

bool unicode_is_printable(uint32_t cp) {
    if (cp == ' ') return true; /* the one printable separator (the generator checks this rule) */
    return !unicode_is_other(cp) && !in_ranges(unicode_separator, unicode_separator_count, cp);
}

bool unicode_is_space(uint32_t cp) {
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int unicode_decimal_value(uint32_t cp) {
    const unicode_range *run = find_range(unicode_decimal, unicode_decimal_count, cp);
    return run ? (int)((cp - run->lo) % 10) : -1; /* runs of ten, from 0 (the generator checks) */
}

static const unicode_case_run *find_run(const unicode_case_run *r, int n, uint32_t cp) {
    const unicode_case_run *run = find_entry(r, n, sizeof *r, offsetof(unicode_case_run, hi), cp);
    return run && (cp - run->lo) % (uint32_t)run->stride == 0 ? run : NULL;
}

static int case_map(uint32_t cp, const unicode_case_run *runs, int n_runs, const unicode_map3 *multi, int n_multi,
                    uint32_t out[UNICODE_MAX_CASE_MAP]) {
    const unicode_map3 *m = find_entry(multi, n_multi, sizeof *multi, 0, cp);
    if (m) {
        int n = 0;
        for (; n < UNICODE_MAX_CASE_MAP && m->to[n]; n++) out[n] = m->to[n];
        return n;
    }
    const unicode_case_run *run = find_run(runs, n_runs, cp);
    out[0] = run ? (uint32_t)((int32_t)cp + run->delta) : cp;
    return 1;
}

int unicode_to_lower(uint32_t cp, uint32_t out[UNICODE_MAX_CASE_MAP]) {
    return case_map(cp, unicode_lower_runs, unicode_lower_runs_count, unicode_lower_multi, unicode_lower_multi_count,
                    out);
}

int unicode_to_upper(uint32_t cp, uint32_t out[UNICODE_MAX_CASE_MAP]) {
    return case_map(cp, unicode_upper_runs, unicode_upper_runs_count, unicode_upper_multi, unicode_upper_multi_count,
                    out);
}

int unicode_to_title(uint32_t cp, uint32_t out[UNICODE_MAX_CASE_MAP]) {
    return case_map(cp, unicode_title_runs, unicode_title_runs_count, unicode_title_multi, unicode_title_multi_count,
                    out);
}

int unicode_nfd(uint32_t cp, uint32_t out[UNICODE_MAX_DECOMPOSITION]) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T) */
        const uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28 == 0) return 2;
        out[2] = 0x11A7 + s % 28;
        return 3;
    }
    const unicode_map4 *m = find_entry(unicode_nfd_map, unicode_nfd_map_count, sizeof *unicode_nfd_map, 0, cp);
    if (m) {
        int n = 0;
        for (; n < UNICODE_MAX_DECOMPOSITION && m->to[n]; n++) out[n] = m->to[n];
        return n;
    }
    out[0] = cp;
    return 1;
}
