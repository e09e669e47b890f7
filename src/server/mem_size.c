/* See mem_size.h. */
#include "server/mem_size.h"

#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int mem_size_parse(const char *s, size_t avail, size_t *out) {
    char *end;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v <= 0 || s[0] == ' ')
        return err_set("'%s' is not a memory size (e.g. 2GiB, 512MiB, 0.5)", s);
    if (*end == 0 && strchr(s, '.') && !strpbrk(s, "eE")) {
        if (v > 1) return err_set("'%s': a fraction of free memory must be in (0, 1]", s);
        if (!avail) return err_set("'%s': the available memory is unknown, give a size in bytes", s);
        *out = (size_t)(v * (double)avail);
        return 0;
    }
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},         {"B", 1},          {"K", 1024.0},      {"KiB", 1024.0},
                 {"KB", 1e3},     {"M", 1048576.0},  {"MiB", 1048576.0}, {"MB", 1e6},
                 {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0},
                 {"TiB", 1099511627776.0}, {"TB", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcasecmp(end, units[i].unit)) continue;
        if (!strcmp(units[i].unit, "") || !strcmp(units[i].unit, "B"))
            if (v != floor(v)) return err_set("'%s': a size in bytes must be a whole number", s);
        const double bytes = v * units[i].mult;
        if (bytes >= 18446744073709551615.0) return err_set("'%s' is too large", s);
        *out = (size_t)bytes;
        if (*out == 0) return err_set("'%s' is less than one byte", s);
        return 0;
    }
    return err_set("'%s': unknown unit '%s' (use KiB, MiB, GiB or a fraction such as 0.5)", s, end);
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
