/* The model's tensor table; see tensors.h. */
#include "model/tensors.h"

#include "util/error.h"
#include "util/array.h"
#include "util/big_alloc.h"

#include <stdlib.h>
#include <string.h>

model_tensor *tensors_add(tensor_table *tt, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                          const void *data, size_t nbytes) {
    if (n_dims < 1 || n_dims > MODEL_MAX_DIMS) {
        err_set("tensor '%s' has %d dimensions", name, n_dims);
        return NULL;
    }
    if (array_reserve((void **)&tt->v, &tt->cap, (size_t)tt->n + 1, sizeof *tt->v)) return NULL;
    model_tensor *t = &tt->v[tt->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) {
        err_oom("out of memory");
        return NULL;
    }
    tt->n++;
    t->n_dims = n_dims;
    for (int d = 0; d < MODEL_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = type;
    t->data = data;
    t->nbytes = nbytes;
    tt->sorted = 0;
    return t;
}

void *tensors_alloc(tensor_table *tt, size_t bytes) {
    if (array_reserve((void **)&tt->owned, &tt->cap_owned, (size_t)tt->n_owned + 1, sizeof *tt->owned))
        return NULL;
    void *p = big_alloc(bytes);
    if (!p) {
        err_oom("out of memory for a %zu-byte tensor", bytes);
        return NULL;
    }
    tt->owned[tt->n_owned++] = p;
    return p;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const model_tensor *)a)->name, ((const model_tensor *)b)->name);
}

int tensors_finish(tensor_table *tt) {
    if (tt->n) qsort(tt->v, (size_t)tt->n, sizeof *tt->v, cmp_name);
    for (int64_t i = 1; i < tt->n; i++)
        if (!strcmp(tt->v[i - 1].name, tt->v[i].name)) return err_set("tensor '%s' appears twice", tt->v[i].name);
    tt->sorted = 1;
    return 0;
}

const model_tensor *tensors_find(const tensor_table *tt, const char *name) {
    if (!tt->sorted) {
        for (int64_t i = 0; i < tt->n; i++)
            if (!strcmp(tt->v[i].name, name)) return &tt->v[i];
        return NULL;
    }
    int64_t lo = 0, hi = tt->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(tt->v[mid].name, name);
        if (c == 0) return &tt->v[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void tensors_free(tensor_table *tt) {
    for (int64_t i = 0; i < tt->n; i++) free(tt->v[i].name);
    free(tt->v);
    for (int64_t i = 0; i < tt->n_owned; i++) free(tt->owned[i]);
    free(tt->owned);
    memset(tt, 0, sizeof *tt);
}
