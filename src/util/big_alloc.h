/* Zeroed memory for large read-mostly buffers (the repacked weights), on
 * transparent huge pages where the kernel gives them. A decode step streams
 * every weight byte once; on 4 KiB pages that is a TLB miss every 4 KiB, and
 * on 2 MiB pages almost none: on a Q4_K_M model the Q6_K output matrix went
 * from 9 to 13 GB/s at one thread (bench/RESULTS.md). Linux's default THP
 * mode ("madvise") gives huge pages only to memory that asks, so a buffer of
 * 2 MiB or more is aligned to 2 MiB and advised MADV_HUGEPAGE; where the
 * kernel refuses, it is ordinary memory. Free with free(). */
#ifndef CLLM_UTIL_BIG_ALLOC_H
#define CLLM_UTIL_BIG_ALLOC_H

#include <stddef.h>

/* `bytes` zeroed bytes aligned to at least 64; NULL when out of memory. */
void *big_alloc(size_t bytes);

#endif
