/* The tensors a model binds its weights from, whatever file they came from:
 * each under llama.cpp's GGUF name (token_embd.weight, blk.N.attn_q.weight,
 * ...) with GGUF's shape convention (ne[0] is the contiguous row length), a
 * registered weight type, and a view of its data. A GGUF file's tensors go in
 * as they are; a Hugging Face folder's are renamed and, where its conventions
 * differ from GGUF's, converted at load time into buffers the table owns
 * (hf_source.c). model.c binds from the table only. */
#ifndef CLLM_MODEL_TENSORS_H
#define CLLM_MODEL_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_DIMS 4

typedef struct {
    char *name;
    int n_dims;
    int64_t ne[MODEL_MAX_DIMS]; /* unused dimensions are 1 */
    uint32_t type;              /* wtype id (kernels/wtype.h, format/qgroup.h) */
    const void *data;
    size_t nbytes;
    /* Act-order GQ weights: stored column k is original input column perm[k]
     * (format/qgroup.h); NULL otherwise. */
    const int32_t *perm;
} model_tensor;

typedef struct {
    model_tensor *v;
    int64_t n;
    size_t cap;
    void **owned; /* buffers converted at load time */
    int64_t n_owned;
    size_t cap_owned;
    int sorted;
} tensor_table;

/* Adds a tensor (the name is copied; the data is not). NULL on out of memory. */
model_tensor *tensors_add(tensor_table *tt, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                          const void *data, size_t nbytes);
/* Allocates a buffer the table frees with it (64-byte aligned, zeroed). */
void *tensors_alloc(tensor_table *tt, size_t bytes);
/* Sorts by name and refuses duplicates; call once after the last add. */
int tensors_finish(tensor_table *tt);
const model_tensor *tensors_find(const tensor_table *tt, const char *name);
void tensors_free(tensor_table *tt);

#endif
