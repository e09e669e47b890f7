/* KV cache storage; see kv_cache.h. */
#include "kv/kv_cache.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static const char *const k_dtype_names[KV_DTYPE_COUNT] = {
    [KV_F32] = "f32", [KV_F16] = "f16", [KV_BF16] = "bf16", [KV_FP8_E4M3] = "fp8_e4m3",
    [KV_FP8_E5M2] = "fp8_e5m2", [KV_INT8] = "int8",
};

const char *kv_dtype_name(kv_dtype dtype) {
    return dtype >= 0 && dtype < KV_DTYPE_COUNT ? k_dtype_names[dtype] : "?";
}

int kv_dtype_parse(const char *s, kv_dtype *out) {
    /* vLLM's spellings: fp8 is e4m3; auto is the compute type, f16 for every
     * model cllm runs (activations are f32, the cache's f16 is what "model
     * precision" means here, as vLLM's auto gives a model's f16/bf16). */
    if (!strcmp(s, "auto")) s = "f16";
    else if (!strcmp(s, "fp8")) s = "fp8_e4m3";
    else if (!strcmp(s, "bfloat16")) s = "bf16";
    for (int t = 0; t < KV_DTYPE_COUNT; t++)
        if (!strcmp(s, k_dtype_names[t])) {
            *out = (kv_dtype)t;
            return 0;
        }
    return err_set("unknown KV cache type '%s' (supported: " KV_DTYPE_NAMES ")", s);
}

size_t kv_bytes_per_layer_token(const kv_spec *spec, kv_dtype dtype) {
    const size_t v_row = spec->v_in_k ? 0 : kv_row_bytes(dtype, spec->head_dim_v);
    return (size_t)spec->n_kv_heads * (kv_row_bytes(dtype, spec->head_dim_k) + v_row);
}

size_t kv_bytes_per_token(const kv_spec *spec, kv_dtype dtype) {
    return (size_t)spec->n_layers * kv_bytes_per_layer_token(spec, dtype);
}

void kv_cache_layout(const kv_spec *spec, kv_dtype dtype, int block_size, kv_cache *kv) {
    /* The distinct windows (full attention, 0, first), and how many layers
     * have each: layers of one window share groups. */
    int windows[KV_MAX_GROUPS], counts[KV_MAX_GROUPS], n_kinds = 0;
    windows[n_kinds] = 0, counts[n_kinds++] = 0;
    for (int il = 0; il < spec->n_layers; il++) {
        int k = 0;
        while (k < n_kinds && windows[k] != spec->window[il]) k++;
        if (k == n_kinds) {
            if (n_kinds == KV_MAX_GROUPS) k = n_kinds - 1; /* cannot happen for real models */
            else windows[n_kinds] = spec->window[il], counts[n_kinds++] = 0;
        }
        counts[k]++;
    }
    /* Groups as large as the smallest kind (so that kind fills one group
     * exactly), but never so many groups that they exceed KV_MAX_GROUPS. */
    int size = spec->n_layers;
    for (int k = 0; k < n_kinds; k++)
        if (counts[k] && counts[k] < size) size = counts[k];
    for (;;) {
        int n_groups = 0;
        for (int k = 0; k < n_kinds; k++) n_groups += (counts[k] + size - 1) / size;
        if (n_groups <= KV_MAX_GROUPS) break;
        size++;
    }
    kv->dtype = dtype;
    kv->block_size = block_size;
    kv->n_kv_heads = spec->n_kv_heads;
    kv->head_dim_k = spec->head_dim_k;
    kv->head_dim_v = spec->head_dim_v;
    kv->v_in_k = spec->v_in_k;
    kv->n_layers = spec->n_layers;
    kv->layers_per_group = size;
    kv->k_layer_bytes = (size_t)block_size * spec->n_kv_heads * kv_row_bytes(dtype, spec->head_dim_k);
    kv->v_layer_bytes = spec->v_in_k ? 0 : (size_t)block_size * spec->n_kv_heads * kv_row_bytes(dtype, spec->head_dim_v);
    kv->n_groups = 0;
    /* Full layers first, then each window, each kind filling groups in layer order. */
    for (int k = 0; k < n_kinds; k++) {
        int filled = size;
        for (int il = 0; il < spec->n_layers; il++) {
            if (spec->window[il] != windows[k]) continue;
            if (filled == size) {
                kv->group_window[kv->n_groups++] = windows[k];
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

kv_cache *kv_cache_create(const kv_spec *spec, kv_dtype dtype, int block_size, int n_blocks) {
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) {
        err_oom("out of memory");
        return NULL;
    }
    kv_cache_layout(spec, dtype, block_size, kv);
    kv->n_blocks = n_blocks;
    const size_t k_bytes = (size_t)n_blocks * kv->layers_per_group * kv->k_layer_bytes;
    const size_t v_bytes = (size_t)n_blocks * kv->layers_per_group * kv->v_layer_bytes;
    /* calloc: pages cost nothing until a block is first written. */
    kv->k = calloc(1, k_bytes ? k_bytes : 1);
    kv->v = calloc(1, v_bytes ? v_bytes : 1);
    if (!kv->k || !kv->v) {
        err_oom("cannot allocate %zu bytes of KV cache", k_bytes + v_bytes);
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
    if (kv->on_copy) kv->on_copy(kv->on_copy_user, kv, src, dst);
    const size_t kb = kv->layers_per_group * kv->k_layer_bytes, vb = kv->layers_per_group * kv->v_layer_bytes;
    memcpy(kv->k + (size_t)dst * kb, kv->k + (size_t)src * kb, kb);
    memcpy(kv->v + (size_t)dst * vb, kv->v + (size_t)src * vb, vb);
}
