/* GGUF reader (versions 2 and 3). The file is memory-mapped; metadata strings,
 * numeric arrays and tensor data are views into the mapping, never copies.
 * Every length, offset and size is checked against the file before it is used,
 * so a truncated or hostile file gives an error message, not a crash. */
#ifndef CLLM_FORMAT_GGUF_H
#define CLLM_FORMAT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* A string inside the mapped file: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_type type;
    union {
        uint64_t u;   /* unsigned integers */
        int64_t i;    /* signed integers */
        double f;     /* FLOAT32 and FLOAT64 */
        bool b;
        gguf_str s;
        struct {
            gguf_type type;  /* element type */
            uint64_t n;
            const void *raw; /* numeric elements, little-endian, maybe unaligned */
            gguf_str *strs;  /* STRING elements */
            gguf_value *items; /* ARRAY elements (nested arrays) */
        } arr;
    };
};

typedef struct {
    gguf_str key;
    gguf_value value;
} gguf_kv;

#define GGUF_MAX_DIMS 4

typedef struct {
    char *name;           /* NUL-terminated copy */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension */
    uint32_t type;        /* ggml type id, see kernels/wtype.h */
    uint64_t offset;      /* relative to the data section */
    uint64_t nbytes;      /* 0 when the type is unknown to us */
    const void *data;     /* into the mapping */
} gguf_tensor_info;

typedef struct gguf_ctx gguf_ctx;

/* Opens and validates `path`. NULL with err_get() saying why. */
gguf_ctx *gguf_open(const char *path);
/* Parses an in-memory image (not copied; must outlive the context). */
gguf_ctx *gguf_open_memory(const void *data, size_t size, const char *name);
void gguf_close(gguf_ctx *ctx);

/* Lets the OS drop the mapped file pages inside [p, p + n) from this
 * process's memory (a copy of them is in use instead); reading them later
 * still works. Nothing for memory that is not the file's mapping. */
void gguf_release_pages(const gguf_ctx *ctx, const void *p, size_t n);

uint32_t gguf_version(const gguf_ctx *ctx);
uint64_t gguf_alignment(const gguf_ctx *ctx);
uint64_t gguf_file_size(const gguf_ctx *ctx);
const char *gguf_path(const gguf_ctx *ctx);

int64_t gguf_n_kv(const gguf_ctx *ctx);
const gguf_kv *gguf_kv_at(const gguf_ctx *ctx, int64_t i);
const gguf_value *gguf_find(const gguf_ctx *ctx, const char *key);

/* Typed getters. They return false when the key is missing or its type does
 * not convert exactly (an integer of any width in range, a float of either
 * width, a string, a bool). */
bool gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out);
bool gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out);
bool gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out);
bool gguf_get_bool(const gguf_ctx *ctx, const char *key, bool *out);
bool gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out);
/* Array getter: element type, count and the value itself. */
const gguf_value *gguf_get_arr(const gguf_ctx *ctx, const char *key, gguf_type elem_type);
/* Element i of a numeric array, converted. */
double gguf_arr_num(const gguf_value *arr, uint64_t i);
bool gguf_str_eq(gguf_str s, const char *cstr);
/* Copies into a NUL-terminated malloc'd string. */
char *gguf_str_dup(gguf_str s);

int64_t gguf_n_tensors(const gguf_ctx *ctx);
const gguf_tensor_info *gguf_tensor_at(const gguf_ctx *ctx, int64_t i);
const gguf_tensor_info *gguf_find_tensor(const gguf_ctx *ctx, const char *name);

const char *gguf_type_name(gguf_type t);
/* Bytes of a scalar value of type t; 0 for strings and arrays. */
size_t gguf_type_size(gguf_type t);

#endif
