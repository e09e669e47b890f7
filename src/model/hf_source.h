/* A Hugging Face model folder as a tensor source: its safetensors tensors
 * renamed to llama.cpp's names and converted where the conventions differ
 * (see hf_source.c), into the model's tensor table. */
#ifndef CLLM_MODEL_HF_SOURCE_H
#define CLLM_MODEL_HF_SOURCE_H

#include "format/safetensors.h"
#include "model/hf_config.h"
#include "model/tensors.h"

#include <stddef.h>

typedef struct hf_source hf_source;

/* Opens DIR's safetensors (single or sharded) and adds every tensor the
 * family can use to tt. NULL with err_get() on a malformed checkpoint. */
hf_source *hf_source_open(const char *dir, const model_hparams *hp, const hf_config *cfg, tensor_table *tt);
void hf_source_close(hf_source *s);

/* Adds a safetensors tensor (F32, F16 or BF16; a vector or a matrix) to tt
 * under a llama.cpp name, as a view of the mapping (an aligned copy when the
 * data is misaligned); a matrix [out, in] becomes ne = [in, out]. */
int hf_add_float_tensor(tensor_table *tt, const char *gguf_name, const st_tensor *t);


/* The checkpoint's name for a llama.cpp tensor name, for messages
 * ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"). */
void hf_source_name(const hf_source *s, const char *gguf_name, char *buf, size_t cap);

#endif
