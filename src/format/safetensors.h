/* Safetensors reader. A file is an 8-byte little-endian header length N, N
 * bytes of JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]},
 * "__metadata__": {...}}), then the tensor bytes; offsets are relative to the
 * end of the header. Files are memory-mapped and tensor data are views into
 * the mapping, never copies. Every offset, size and shape is checked against
 * the file before use, so a malformed file gives one error line.
 *
 * A checkpoint may be sharded: model.safetensors.index.json's "weight_map"
 * names the file of each tensor; st_open_dir opens either layout and exposes
 * all tensors as one set. */
#ifndef CLLM_FORMAT_SAFETENSORS_H
#define CLLM_FORMAT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_I64,
    ST_U64,
    ST_F64,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_DTYPE_COUNT
} st_dtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    st_dtype dtype;
    int n_dims;
    int64_t shape[ST_MAX_DIMS]; /* row-major: shape[n_dims - 1] is contiguous */
    int64_t n_elems;
    uint64_t nbytes;
    const void *data; /* into the mapping; aligned to the element size or not */
    int shard;        /* index of the file it came from */
} st_tensor;

typedef struct st_set st_set;

/* One .safetensors file. NULL with err_get() saying why. */
st_set *st_open(const char *path);
/* A model folder: model.safetensors.index.json with its shards if present,
 * else model.safetensors, else the folder's only *.safetensors file. */
st_set *st_open_dir(const char *dir);
/* An in-memory image (not copied; must outlive the set). */
st_set *st_open_memory(const void *data, size_t size, const char *name);
void st_close(st_set *s);

int64_t st_n_tensors(const st_set *s);
const st_tensor *st_tensor_at(const st_set *s, int64_t i); /* sorted by name */
const st_tensor *st_find(const st_set *s, const char *name);
/* The file a tensor came from (for messages). */
const char *st_shard_path(const st_set *s, int shard);
/* Total bytes of tensor data over all files. */
uint64_t st_data_bytes(const st_set *s);

const char *st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);

#endif
