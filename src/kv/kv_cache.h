/* KV cache storage in fixed-size blocks (pages), shared by layer groups.
 *
 * Layers are grouped by attention kind (full, or sliding window) into groups
 * of equal size, as vLLM's hybrid allocator does: Gemma 3 270m's 3 full and 15
 * sliding layers make one full group and five sliding groups of 3 layers. Every
 * group draws from the same pool of blocks, and a block holds `block_size`
 * tokens of K and V for the layers of one group. A sequence keeps a block table
 * per group; a sliding group's table drops the blocks that left the window, so
 * memory follows the workload whatever its mix of short and long sequences.
 *
 * Layout: [block][slot in group][kv_head][token][row], so the keys of one head
 * within a block are contiguous for the attention kernels. A row is one
 * token's K (or V) of one kv head, stored as kernels/kv_row.h defines for the
 * cache's dtype: f32, f16, bf16, or 8 bits (int8, fp8 e4m3/e5m2) with an f32
 * scale per row, i.e. per token and kv head. Whole blocks move (prefix cache,
 * copy-on-write, preemption) without knowing the dtype: every size here is
 * the rows' real bytes. */
#ifndef CLLM_KV_KV_CACHE_H
#define CLLM_KV_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kv_row.h"

#define KV_MAX_GROUPS 32
#define KV_MAX_LAYERS 256

/* What the cache needs to know of a model, handed down by the model layer
 * (model_kv_spec): kv/ knows no architecture. */
typedef struct {
    int n_layers;
    int n_kv_heads;
    int head_dim_k;
    int head_dim_v;
    int window[KV_MAX_LAYERS]; /* each layer's sliding window in tokens; 0 = full attention */
    /* V is the first head_dim_v dims of each K row and takes no bytes of its
     * own (latent attention: the key row is [latent | rope key], the value
     * the latent). */
    bool v_in_k;
} kv_spec;

typedef struct kv_cache {
    kv_dtype dtype;
    int block_size;
    int n_kv_heads;
    int head_dim_k;
    int head_dim_v;
    bool v_in_k;           /* kv_spec's: no V pages; V rows are K rows' prefixes */
    int n_blocks;
    int n_layers;
    int layers_per_group;
    int n_groups;
    int group_window[KV_MAX_GROUPS];   /* sliding window in tokens; 0 = full attention */
    int layer_group[KV_MAX_LAYERS];    /* group of each model layer */
    int layer_slot[KV_MAX_LAYERS];     /* its index within the group */
    size_t k_layer_bytes;  /* one layer's K for one block */
    size_t v_layer_bytes;  /* 0 when v_in_k */
    uint8_t *k;
    uint8_t *v;
    /* When set, told of every kv_cache_copy_block before it copies (tensor
     * parallelism: the other ranks' caches copy the same block). */
    void (*on_copy)(void *user, const struct kv_cache *kv, int src, int dst);
    void *on_copy_user;
} kv_cache;

const char *kv_dtype_name(kv_dtype dtype);
/* The names --kv-cache-dtype accepts, in the order of the error message. */
#define KV_DTYPE_NAMES "auto, f16, bf16 (= bfloat16), f32, fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2, int8"
/* Parses a --kv-cache-dtype value. "auto" is the models' compute type, f16. */
int kv_dtype_parse(const char *s, kv_dtype *out);
/* Bytes of K and V of one layer for one token. */
size_t kv_bytes_per_layer_token(const kv_spec *spec, kv_dtype dtype);
/* Bytes of KV per token over all layers (what `cllm info` reports). */
size_t kv_bytes_per_token(const kv_spec *spec, kv_dtype dtype);

/* Fills the grouping fields for a model without allocating. */
void kv_cache_layout(const kv_spec *spec, kv_dtype dtype, int block_size, kv_cache *kv);
/* Bytes one block takes (K and V of one group's layers). */
size_t kv_block_bytes(const kv_cache *layout);
/* Allocates n_blocks blocks. NULL with err_get() on failure. */
kv_cache *kv_cache_create(const kv_spec *spec, kv_dtype dtype, int block_size, int n_blocks);
void kv_cache_free(kv_cache *kv);
/* Copies block src to block dst (all slots). */
void kv_cache_copy_block(kv_cache *kv, int src, int dst);

/* Start of layer il's K (or V) within block b. */
static inline uint8_t *kv_k_block(const kv_cache *kv, int il, int b) {
    return kv->k + ((size_t)b * kv->layers_per_group + kv->layer_slot[il]) * kv->k_layer_bytes;
}
/* With v_in_k, V is read from the K block (row stride: a K row). */
static inline uint8_t *kv_v_block(const kv_cache *kv, int il, int b) {
    if (kv->v_in_k) return kv_k_block(kv, il, b);
    return kv->v + ((size_t)b * kv->layers_per_group + kv->layer_slot[il]) * kv->v_layer_bytes;
}

#endif
