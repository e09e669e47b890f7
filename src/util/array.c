/* See vec.h. */
#include "util/array.h"

#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>

enum { VEC_MIN_CAP = 16 };

int array_reserve(void **data, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) return 0;
    const size_t max_items = elem_size ? SIZE_MAX / elem_size : SIZE_MAX;
    if (need > max_items)
        return err_oom("an array of %zu items of %zu bytes does not fit in memory", need, elem_size);
    size_t c = *cap ? *cap : VEC_MIN_CAP;
    while (c < need) c = c > max_items / 2 ? max_items : c * 2;
    void *p = realloc(*data, c * elem_size);
    if (!p) return err_oom("out of memory for an array of %zu items of %zu bytes", c, elem_size);
    *data = p;
    *cap = c;
    return 0;
}
