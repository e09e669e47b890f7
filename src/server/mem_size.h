/* Memory sizes on the command line (--kv-cache-memory): bytes with an
 * optional unit (K/M/G/T or KiB/MiB/GiB/TiB = powers of 1024; KB/MB/GB/TB =
 * powers of 1000), or a fraction in (0, 1] written with a decimal point
 * ("0.5") meaning that share of the memory available now. */
#ifndef CLLM_SERVER_MEM_SIZE_H
#define CLLM_SERVER_MEM_SIZE_H

#include <stddef.h>

/* Returns 0 and the size in *out, or -1 with err_get() saying what was wrong.
 * `avail` is what a fraction applies to (0: fractions are an error). */
int mem_size_parse(const char *s, size_t avail, size_t *out);
/* MemAvailable from /proc/meminfo in bytes; 0 when unknown. */
size_t mem_available_bytes(void);

#endif
