/* GGUF writer (version 3): metadata of every value type (arrays of any
 * element type, nested arrays included), tensor infos, alignment and data.
 *
 * The output goes to "<path>.tmp", which is renamed to <path> only once every
 * byte is written and synced; any failure (or gguf_writer_abort) removes the
 * temporary file, so a failed write never leaves a partial <path> behind.
 *
 * Use: add metadata and tensor infos (in file order), then either
 * gguf_writer_write_file (every tensor's data given at add time), or stream:
 * gguf_writer_begin, gguf_writer_write_tensor once per tensor in order,
 * gguf_writer_finish. Values are copied when set; tensor data is not. */
#ifndef CLLM_FORMAT_GGUF_WRITE_H
#define CLLM_FORMAT_GGUF_WRITE_H

#include "format/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
/* Frees the writer; an unfinished output is aborted (its .tmp removed). */
void gguf_writer_free(gguf_writer *w);

/* Metadata. Setting a key again replaces its value in place (keys keep the
 * order of their first setting). Return 0, or -1 with err_get(). */
int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* An array of n numeric (or bool) elements of elem_type, little-endian at data. */
int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n);
int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Any value as the reader returns it (deep copy; nested arrays included),
 * e.g. to copy a model's metadata. */
int gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Removes a key if present. */
void gguf_writer_remove(gguf_writer *w, const char *key);
/* general.alignment (a power of two; default 32). */
int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);

/* Declares the next tensor: ne[0] is the row length; type a wtype id with a
 * known row size. data may be NULL when it will be streamed. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *data);
int64_t gguf_writer_n_tensors(const gguf_writer *w);
/* Bytes of tensor i's data. */
uint64_t gguf_writer_tensor_bytes(const gguf_writer *w, int64_t i);

/* Writes everything to path (data from add time). */
int gguf_writer_write_file(gguf_writer *w, const char *path);

/* Streaming: header and tensor infos now; then each tensor's data in order. */
int gguf_writer_begin(gguf_writer *w, const char *path);
int gguf_writer_write_tensor(gguf_writer *w, int64_t i, const void *data);
/* After the last tensor: sync, close, rename "<path>.tmp" to path. */
int gguf_writer_finish(gguf_writer *w);
/* Stops an unfinished output and removes its temporary file. */
void gguf_writer_abort(gguf_writer *w);

#endif
