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

size_t kv_block_bytes(const model_hparams *hp, kv_dtype dtype, int block_size, int group_n_layers) {
    return (size_t)group_n_layers * block_size * hp->n_head_kv * (hp->head_dim_k + hp->head_dim_v) *
           kv_dtype_size(dtype);
}

size_t kv_bytes_per_token(const model_hparams *hp, kv_dtype dtype) {
    return kv_block_bytes(hp, dtype, 1, hp->n_layer);
}

void kv_cache_layout(const model_hparams *hp, kv_cache *kv) {
    int n_full = 0, n_swa = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        if (hp->is_swa[il]) n_swa++;
        else n_full++;
    }
    kv->n_kv_heads = hp->n_head_kv;
    kv->head_dim_k = hp->head_dim_k;
    kv->head_dim_v = hp->head_dim_v;
    kv->n_groups = 0;
    int full_group = -1, swa_group = -1;
    if (n_full) {
        full_group = kv->n_groups++;
        kv->groups[full_group] = (kv_group){.n_layers = n_full, .window = 0};
    }
    if (n_swa) {
        swa_group = kv->n_groups++;
        kv->groups[swa_group] = (kv_group){.n_layers = n_swa, .window = hp->n_swa};
    }
    int slot[KV_MAX_GROUPS] = {0};
    for (int il = 0; il < hp->n_layer; il++) {
        int g = hp->is_swa[il] ? swa_group : full_group;
        kv->layer_group[il] = g;
        kv->layer_slot[il] = slot[g]++;
    }
}

kv_cache *kv_cache_create(const model_hparams *hp, kv_dtype dtype, int block_size, const int *n_blocks) {
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) {
        err_set("out of memory");
        return NULL;
    }
    kv->dtype = dtype;
    kv->block_size = block_size;
    kv_cache_layout(hp, kv);
    for (int g = 0; g < kv->n_groups; g++) {
        kv_group *grp = &kv->groups[g];
        grp->n_blocks = n_blocks[g];
        size_t per_block_k = (size_t)block_size * hp->n_head_kv * hp->head_dim_k * kv_dtype_size(dtype);
        size_t per_block_v = (size_t)block_size * hp->n_head_kv * hp->head_dim_v * kv_dtype_size(dtype);
        /* K and V share one stride: the larger of the two, so offsets stay simple. */
        size_t per_block = per_block_k > per_block_v ? per_block_k : per_block_v;
        grp->layer_stride = per_block * (size_t)grp->n_blocks;
        size_t bytes = grp->layer_stride * (size_t)grp->n_layers;
        /* calloc: untouched pages cost nothing until a block is first written. */
        grp->k = calloc(1, bytes ? bytes : 1);
        grp->v = calloc(1, bytes ? bytes : 1);
        if (!grp->k || !grp->v) {
            err_set("cannot allocate %zu bytes of KV cache", 2 * bytes);
            kv_cache_free(kv);
            return NULL;
        }
    }
    return kv;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    for (int g = 0; g < kv->n_groups; g++) {
        free(kv->groups[g].k);
        free(kv->groups[g].v);
    }
    free(kv);
}

void kv_cache_copy_block(kv_cache *kv, int g, int src, int dst) {
    kv_group *grp = &kv->groups[g];
    const size_t kb = kv_k_offset(kv, 1, 0, 0), vb = kv_v_offset(kv, 1, 0, 0);
    for (int l = 0; l < grp->n_layers; l++) {
        uint8_t *k = grp->k + (size_t)l * grp->layer_stride, *v = grp->v + (size_t)l * grp->layer_stride;
        memcpy(k + (size_t)dst * kb, k + (size_t)src * kb, kb);
        memcpy(v + (size_t)dst * vb, v + (size_t)src * vb, vb);
    }
}
