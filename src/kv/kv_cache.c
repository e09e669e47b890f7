/* KV cache storage; see kv_cache.h. */
#include "kv/kv_cache.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

size_t kv_dtype_size(kv_dtype dtype) { return dtype == KV_F32 ? 4 : 2; }

const char *kv_dtype_name(kv_dtype dtype) { return dtype == KV_F32 ? "f32" : "f16"; }

int kv_dtype_parse(const char *s, kv_dtype *out) {
    if (!strcmp(s, "f32")) *out = KV_F32;
    else if (!strcmp(s, "f16")) *out = KV_F16;
    else return err_set("unknown KV cache type '%s' (supported: f16, f32)", s);
    return 0;
}

size_t kv_bytes_per_token(const model_hparams *hp, kv_dtype dtype) {
    return (size_t)hp->n_layer * hp->n_head_kv * (hp->head_dim_k + hp->head_dim_v) * kv_dtype_size(dtype);
}

void kv_cache_layout(const model_hparams *hp, kv_dtype dtype, int block_size, kv_cache *kv) {
    int n_full = 0, n_swa = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        if (hp->is_swa[il]) n_swa++;
        else n_full++;
    }
    /* Groups as large as the smaller kind (so that kind fills one group exactly),
     * but never so many groups that they exceed KV_MAX_GROUPS. */
    int size = n_full && n_swa ? (n_full < n_swa ? n_full : n_swa) : hp->n_layer;
    while ((n_full + size - 1) / size + (n_swa + size - 1) / size > KV_MAX_GROUPS) size++;
    kv->dtype = dtype;
    kv->block_size = block_size;
    kv->n_kv_heads = hp->n_head_kv;
    kv->head_dim_k = hp->head_dim_k;
    kv->head_dim_v = hp->head_dim_v;
    kv->layers_per_group = size;
    kv->k_layer_bytes = (size_t)block_size * hp->n_head_kv * hp->head_dim_k * kv_dtype_size(dtype);
    kv->v_layer_bytes = (size_t)block_size * hp->n_head_kv * hp->head_dim_v * kv_dtype_size(dtype);
    kv->n_groups = 0;
    /* Full layers first, then sliding, each kind filling groups in layer order. */
    for (int kind = 0; kind < 2; kind++) {
        int filled = size;
        for (int il = 0; il < hp->n_layer; il++) {
            if (hp->is_swa[il] != (kind == 1)) continue;
            if (filled == size) {
                kv->group_window[kv->n_groups++] = kind ? hp->n_swa : 0;
                filled = 0;
            }
            kv->layer_group[il] = kv->n_groups - 1;
            kv->layer_slot[il] = filled++;
        }
    }
}

size_t kv_block_bytes(const kv_cache *layout) {
    return (size_t)layout->layers_per_group * (layout->k_layer_bytes + layout->v_layer_bytes);
}

kv_cache *kv_cache_create(const model_hparams *hp, kv_dtype dtype, int block_size, int n_blocks) {
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) {
        err_set("out of memory");
        return NULL;
    }
    kv_cache_layout(hp, dtype, block_size, kv);
    kv->n_blocks = n_blocks;
    const size_t k_bytes = (size_t)n_blocks * kv->layers_per_group * kv->k_layer_bytes;
    const size_t v_bytes = (size_t)n_blocks * kv->layers_per_group * kv->v_layer_bytes;
    /* calloc: pages cost nothing until a block is first written. */
    kv->k = calloc(1, k_bytes ? k_bytes : 1);
    kv->v = calloc(1, v_bytes ? v_bytes : 1);
    if (!kv->k || !kv->v) {
        err_set("cannot allocate %zu bytes of KV cache", k_bytes + v_bytes);
        kv_cache_free(kv);
        return NULL;
    }
    return kv;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv);
}

void kv_cache_copy_block(kv_cache *kv, int src, int dst) {
    const size_t kb = kv->layers_per_group * kv->k_layer_bytes, vb = kv->layers_per_group * kv->v_layer_bytes;
    memcpy(kv->k + (size_t)dst * kb, kv->k + (size_t)src * kb, kb);
    memcpy(kv->v + (size_t)dst * vb, kv->v + (size_t)src * vb, vb);
}
