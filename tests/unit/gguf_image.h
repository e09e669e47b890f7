/* Unit-test helper: a GGUF image with metadata only, built in memory, and a
 * tokenizer loaded from it (test_tokenizer.c, test_chat_prompt.c). Include
 * after cmocka.h. */
#ifndef CLLM_TESTS_UNIT_GGUF_IMAGE_H
#define CLLM_TESTS_UNIT_GGUF_IMAGE_H

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv;
} image;

static inline void put(image *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static inline void put_u32(image *b, uint32_t v) { put(b, &v, 4); }
static inline void put_u64(image *b, uint64_t v) { put(b, &v, 8); }
static inline void put_str(image *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static inline void put_key(image *b, const char *k, gguf_type t) {
    put_str(b, k);
    put_u32(b, t);
    b->n_kv++;
}

static inline image image_new(void) {
    image b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0); /* tensors */
    put_u64(&b, 0); /* kv count, patched by image_open */
    return b;
}

static inline void kv_str(image *b, const char *k, const char *v) {
    put_key(b, k, GGUF_TYPE_STRING);
    put_str(b, v);
}
static inline void kv_u32(image *b, const char *k, uint32_t v) {
    put_key(b, k, GGUF_TYPE_UINT32);
    put_u32(b, v);
}
static inline void kv_bool(image *b, const char *k, bool v) {
    uint8_t x = v;
    put_key(b, k, GGUF_TYPE_BOOL);
    put(b, &x, 1);
}
static inline void kv_array(image *b, const char *k, gguf_type et, uint64_t n) {
    put_key(b, k, GGUF_TYPE_ARRAY);
    put_u32(b, et);
    put_u64(b, n);
}
static inline void kv_strs(image *b, const char *k, const char *const *v, int n) {
    kv_array(b, k, GGUF_TYPE_STRING, (uint64_t)n);
    for (int i = 0; i < n; i++) put_str(b, v[i]);
}
static inline void kv_f32s(image *b, const char *k, const float *v, int n) {
    kv_array(b, k, GGUF_TYPE_FLOAT32, (uint64_t)n);
    put(b, v, (size_t)n * 4);
}
static inline void kv_i32s(image *b, const char *k, const int32_t *v, int n) {
    kv_array(b, k, GGUF_TYPE_INT32, (uint64_t)n);
    put(b, v, (size_t)n * 4);
}

/* Builds the tokenizer and drops the image at once: the tokenizer must not
 * keep pointers into the GGUF. NULL on error (err_get() says why). */
static inline tokenizer *image_load(image *b) {
    memcpy(b->p + 16, &b->n_kv, 8);
    gguf_ctx *g = gguf_open_memory(b->p, b->n, "mem");
    assert_non_null(g);
    tokenizer *t = tokenizer_from_gguf(g);
    gguf_close(g);
    memset(b->p, 0xAB, b->n);
    free(b->p);
    b->p = NULL;
    return t;
}

#endif
