/* See mem_size.h. The number is read by strtod; what follows it must be one
 * of the units in the table, compared case-insensitively. */
#include "util/mem_size.h"

#include "util/error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KIB 1024.0
#define MIB (KIB * KIB)
#define GIB (MIB * KIB)
#define TIB (GIB * KIB)

static const struct {
    const char *unit;
    double bytes;
} k_units[] = {
    {"", 1},     {"b", 1},
    {"k", KIB},  {"ki", KIB}, {"kib", KIB}, {"kb", 1e3},
    {"m", MIB},  {"mi", MIB}, {"mib", MIB}, {"mb", 1e6},
    {"g", GIB},  {"gi", GIB}, {"gib", GIB}, {"gb", 1e9},
    {"t", TIB},  {"ti", TIB}, {"tib", TIB}, {"tb", 1e12},
};

/* A share of the available memory: a decimal point, no unit, no exponent. */
static bool is_fraction(const char *s, const char *end) {
    return *end == 0 && strchr(s, '.') && !strpbrk(s, "eE");
}

static int parse_fraction(const char *s, double v, size_t avail, size_t *out) {
    if (v > 1) return err_set("'%s': a fraction of the available memory must be in (0, 1]", s);
    if (!avail) return err_set("'%s': the available memory is unknown, give a size in bytes", s);
    *out = (size_t)(v * (double)avail);
    if (*out == 0) return err_set("'%s' of %zu available bytes is less than one byte", s, avail);
    return 0;
}

static int parse_with_unit(const char *s, double v, const char *unit, size_t *out) {
    for (size_t i = 0; i < sizeof k_units / sizeof *k_units; i++) {
        if (strcasecmp(unit, k_units[i].unit)) continue;
        if (k_units[i].bytes == 1 && v != floor(v))
            return err_set("'%s': a size in bytes must be a whole number", s);
        const double bytes = v * k_units[i].bytes;
        if (bytes >= (double)SIZE_MAX) return err_set("'%s' is too large (at most %zu bytes)", s, SIZE_MAX);
        *out = (size_t)bytes;
        if (*out == 0) return err_set("'%s' is less than one byte", s);
        return 0;
    }
    return err_set("'%s': unknown unit '%s' (use K, M, G or T, optionally with i or B: e.g. 512M, 1GiB, "
                   "1.5GB; or a fraction such as 0.5)",
                   s, unit);
}

int mem_size_parse(const char *s, size_t avail, size_t *out) {
    char *end = (char *)s;
    double v = 0;
    if (isdigit((unsigned char)s[0]) || s[0] == '.') { /* no sign, no space, no "inf" */
        errno = 0;
        v = strtod(s, &end);
    }
    if (end == s || errno || !isfinite(v))
        return err_set("'%s' is not a memory size (e.g. 2GiB, 512M, 1.5GB, 0.5)", s);
    if (v == 0) return err_set("'%s': a memory size must be more than 0", s);
    if (is_fraction(s, end)) return parse_fraction(s, v, avail, out);
    return parse_with_unit(s, v, end, out);
}

size_t mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}
