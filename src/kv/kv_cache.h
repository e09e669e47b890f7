/* KV cache storage in fixed-size blocks (pages). Layers are split into groups
 * by attention kind: full-attention layers in one, sliding-window layers in
 * another, because their sequences need different numbers of blocks (a sliding
 * layer only keeps the last `window` tokens). Each group has its own block ids
 * and block pool; a block of a group holds `block_size` tokens of K and V for
 * every layer of that group. Layout per layer: [block][kv_head][token][dim], so
 * the keys of one head within a block are contiguous for the attention kernels. */
#ifndef CLLM_KV_KV_CACHE_H
#define CLLM_KV_KV_CACHE_H

#include "model/arch.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { KV_F32 = 0, KV_F16 = 1 } kv_dtype;

#define KV_MAX_GROUPS 2

typedef struct {
    int n_layers;    /* layers stored in this group */
    int window;      /* sliding window in tokens; 0 = full attention */
    int n_blocks;
    size_t layer_stride; /* bytes between consecutive layers of K (and of V) */
    uint8_t *k;
    uint8_t *v;
} kv_group;

typedef struct {
    kv_dtype dtype;
    int block_size;
    int n_kv_heads;
    int head_dim_k;
    int head_dim_v;
    int n_groups;
    kv_group groups[KV_MAX_GROUPS];
    int layer_group[CLLM_MAX_LAYERS]; /* group of each model layer */
    int layer_slot[CLLM_MAX_LAYERS];  /* its index within the group */
} kv_cache;

/* Bytes one block of a group takes (K and V, all its layers). */
size_t kv_block_bytes(const model_hparams *hp, kv_dtype dtype, int block_size, int group_n_layers);
/* Bytes of KV per token over all layers (what `cllm info` reports). */
size_t kv_bytes_per_token(const model_hparams *hp, kv_dtype dtype);
size_t kv_dtype_size(kv_dtype dtype);
const char *kv_dtype_name(kv_dtype dtype);
int kv_dtype_parse(const char *s, kv_dtype *out);

/* Assigns layers to groups (full first, then sliding) without allocating. */
void kv_cache_layout(const model_hparams *hp, kv_cache *kv);
/* Allocates n_blocks[g] blocks for each group g. NULL with err_get() on failure. */
kv_cache *kv_cache_create(const model_hparams *hp, kv_dtype dtype, int block_size, const int *n_blocks);
void kv_cache_free(kv_cache *kv);
/* Copies the contents of block src to block dst in group g (all its layers). */
void kv_cache_copy_block(kv_cache *kv, int g, int src, int dst);

static inline size_t kv_k_offset(const kv_cache *kv, int block, int head, int tok) {
    return (((size_t)block * kv->n_kv_heads + head) * kv->block_size + tok) * kv->head_dim_k *
           kv_dtype_size(kv->dtype);
}
static inline size_t kv_v_offset(const kv_cache *kv, int block, int head, int tok) {
    return (((size_t)block * kv->n_kv_heads + head) * kv->block_size + tok) * kv->head_dim_v *
           kv_dtype_size(kv->dtype);
}

#endif
