/* Huge-page-advised allocation; see big_alloc.h. */
#include "util/big_alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *big_alloc(size_t bytes) {
    const size_t size = bytes ? (bytes + 63) / 64 * 64 : 64;
    const size_t align = size >= HUGE_PAGE ? HUGE_PAGE : 64;
    void *p = NULL;
    if (posix_memalign(&p, align, size)) return NULL;
#ifdef MADV_HUGEPAGE
    /* before the first touch, so the pages are born huge; advice only */
    if (align == HUGE_PAGE) (void)madvise(p, size, MADV_HUGEPAGE);
#endif
    memset(p, 0, size);
    return p;
}
