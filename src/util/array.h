/* Growable arrays: a struct keeps a pointer, a count and a capacity of its
 * own, and calls array_reserve before it appends. The capacity doubles, so n
 * appends cost O(n) copying in all. One helper instead of a grow-by-doubling
 * loop beside every array. */
#ifndef CLLM_UTIL_ARRAY_H
#define CLLM_UTIL_ARRAY_H

#include <stddef.h>

/* Makes *data (now *cap items of elem_size bytes) hold at least `need` items:
 * the capacity doubles, from 16, until it does. Returns 0, or -1 with
 * err_get() saying how many items of how many bytes did not fit (the byte
 * count overflows size_t, or memory ran out); then *data and *cap are as
 * they were. Use: array_reserve((void **)&a->items, &a->cap, a->n + 1,
 * sizeof *a->items). */
int array_reserve(void **data, size_t *cap, size_t need, size_t elem_size);

#endif
