/* Re-rotation of cached keys for KV eviction (kv/kv_evict.h): a key stored
 * with RoPE at position p becomes the key at position p + delta. The rows are
 * in the cache's dim order, rope pairs in halves (forward.c stores every
 * family that way), except latent attention's: the latent, then the rope
 * key with its pairs adjacent (mla.c). */
#ifndef CLLM_MODEL_KV_SHIFT_H
#define CLLM_MODEL_KV_SHIFT_H

#include "model/model.h"

/* What a shift needs: the model, and the rope factors its forward uses. */
typedef struct {
    const model *m;
    const float *rope_factors;
} kv_shift_ctx;

/* A kv_key_shift_fn; user is a const kv_shift_ctx. */
void model_shift_keys(void *user, int layer, float *rows, int n_rows, int delta);

#endif
