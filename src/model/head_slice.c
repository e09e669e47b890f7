/* See head_slice.h. */
#include "model/head_slice.h"

#include "format/gguf.h"
#include "util/big_alloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

int head_slice_init(head_slice *h, const model *m, const int32_t *ids, int n) {
    memset(h, 0, sizeof *h);
    const weight *out = &m->w.output;
    if (n < 1) return err_set("an empty draft vocabulary");
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= out->n_out) return err_set("draft token %d is not in the model's vocabulary", ids[i]);
    const size_t rb = out->row_bytes, bytes = (size_t)n * rb;
    h->data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    h->ids = malloc((size_t)n * sizeof *h->ids);
    if (!h->data || !h->ids) {
        head_slice_free(h);
        return err_set("out of memory for %d rows of the output head", n);
    }
    memcpy(h->ids, ids, (size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        memcpy((char *)h->data + (size_t)i * rb, (const char *)out->data + (size_t)ids[i] * rb, rb);
    h->n = n;
    h->w = (weight){.name = "draft head", .data = h->data, .type = out->type, .n_in = out->n_in, .n_out = n,
                    .row_bytes = rb, .perm = out->perm};
    const size_t x8 = weight_repack_size(&h->w);
    if (x8) {
        h->x8 = big_alloc(x8);
        if (!h->x8) {
            head_slice_free(h);
            return err_set("out of memory for the draft head");
        }
        weight_repack(&h->w, h->x8, NULL);
    }
    return 0;
}

void head_slice_free(head_slice *h) {
    free(h->data);
    free(h->x8);
    free(h->ids);
    memset(h, 0, sizeof *h);
}

int head_slice_read_vocab(const char *path, const model *m, int max_n, int32_t **out) {
    *out = NULL;
    gguf_ctx *g = gguf_open(path);
    if (!g) return err_prefix("the draft vocabulary: %s: ", path);
    const gguf_value *v = gguf_get_arr(g, "medusa.draft_vocab", GGUF_TYPE_INT32);
    int n = v ? (int)v->arr.n : 0;
    if (n < 1) {
        gguf_close(g);
        return err_set("the draft vocabulary: %s has no medusa.draft_vocab (make one with `cllm medusa train`)", path);
    }
    if (max_n > 0 && n > max_n) n = max_n;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; ids && i < n; i++) {
        const double t = gguf_arr_num(v, (uint64_t)i);
        if (t < 0 || t >= m->hp.n_vocab) {
            free(ids);
            gguf_close(g);
            return err_set("the draft vocabulary: %s: token %.0f is not in the model's %d", path, t, m->hp.n_vocab);
        }
        ids[i] = (int32_t)t;
    }
    gguf_close(g);
    if (!ids) return err_set("out of memory");
    *out = ids;
    return n;
}
