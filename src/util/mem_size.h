/* Memory sizes as users write them on the command line (--kv-cache-memory,
 * --max-body-size), with one rule set for every command:
 *   - a whole number of bytes: "4096", "4096b";
 *   - a number with a unit, case-insensitive: K, M, G, T, alone or followed by
 *     "i" and/or "B". K means 1024 (and M 1024^2, ...) in every spelling but
 *     one: KB, MB, GB and TB are powers of 1000. So 512m, 1g, 1Gi, 1gib and
 *     1GiB are binary, 1.5GB is 1.5e9 bytes;
 *   - a fraction in (0, 1] written with a decimal point and no unit ("0.5"):
 *     that share of the memory available now. */
#ifndef CLLM_UTIL_MEM_SIZE_H
#define CLLM_UTIL_MEM_SIZE_H

#include <stddef.h>

/* Returns 0 and the size in *out, or -1 with err_get() naming the value and
 * what was wrong with it. `avail` is what a fraction applies to (0: unknown,
 * and a fraction is an error). */
int mem_size_parse(const char *s, size_t avail, size_t *out);
/* MemAvailable from /proc/meminfo in bytes; 0 when unknown. */
size_t mem_available_bytes(void);

#endif
