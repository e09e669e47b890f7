/* GGUF writer; see gguf_write.h. Each metadata value is serialized into its
 * own byte buffer when set (type tag and payload, exactly as it goes in the
 * file), so copying a reader's value is a deep copy and writing is
 * concatenation. Tensor offsets are laid out when the output begins. */
#include "format/gguf_write.h"

#include "format/wtype_geom.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/array.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_VERSION 3
#define DEFAULT_ALIGNMENT 32

typedef struct {
    char *key;
    buf val; /* u32 type tag, then the payload */
} kv_entry;

typedef struct {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
    uint64_t offset;
} tensor_entry;

struct gguf_writer {
    kv_entry *kv;
    int64_t n_kv;
    size_t cap_kv;
    tensor_entry *t;
    int64_t n_t;
    size_t cap_t;
    uint32_t alignment;
    /* Streaming state. */
    FILE *f;
    char *path, *tmp_path;
    int64_t next_tensor;
    uint64_t pos;
};

/* ---- serialized values ---- */

static void put_u32(buf *b, uint32_t v) { buf_append(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { buf_append(b, &v, 8); }

static void put_str(buf *b, const char *s, uint64_t len) {
    put_u64(b, len);
    buf_append(b, s, (size_t)len);
}

/* ---- metadata ---- */

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) {
        err_oom("out of memory");
        return NULL;
    }
    w->alignment = DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    gguf_writer_abort(w);
    for (int64_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), buf_free(&w->kv[i].val);
    for (int64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int64_t find_key(const gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return i;
    return -1;
}

/* Takes ownership of val (freed on failure). */
static int set_kv(gguf_writer *w, const char *key, buf val) {
    if (val.oom) {
        buf_free(&val);
        return err_oom("out of memory setting '%s'", key);
    }
    if (!key[0]) {
        buf_free(&val);
        return err_set("gguf: empty metadata key");
    }
    int64_t i = find_key(w, key);
    if (i >= 0) {
        buf_free(&w->kv[i].val);
        w->kv[i].val = val;
        return 0;
    }
    if (array_reserve((void **)&w->kv, &w->cap_kv, (size_t)w->n_kv + 1, sizeof *w->kv)) {
        buf_free(&val);
        return -1;
    }
    char *k = strdup(key);
    if (!k) {
        buf_free(&val);
        return err_oom("out of memory");
    }
    w->kv[w->n_kv++] = (kv_entry){.key = k, .val = val};
    return 0;
}

static int set_scalar(gguf_writer *w, const char *key, gguf_type t, const void *v) {
    buf b = {0};
    put_u32(&b, (uint32_t)t);
    buf_append(&b, v, gguf_type_size(t));
    return set_kv(w, key, b);
}

int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v) { return set_scalar(w, key, GGUF_TYPE_UINT8, &v); }
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v) { return set_scalar(w, key, GGUF_TYPE_INT8, &v); }
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v) { return set_scalar(w, key, GGUF_TYPE_UINT16, &v); }
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v) { return set_scalar(w, key, GGUF_TYPE_INT16, &v); }
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return set_scalar(w, key, GGUF_TYPE_UINT32, &v); }
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return set_scalar(w, key, GGUF_TYPE_INT32, &v); }
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return set_scalar(w, key, GGUF_TYPE_UINT64, &v); }
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v) { return set_scalar(w, key, GGUF_TYPE_INT64, &v); }
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return set_scalar(w, key, GGUF_TYPE_FLOAT32, &v); }
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v) { return set_scalar(w, key, GGUF_TYPE_FLOAT64, &v); }

int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    const uint8_t b = v;
    return set_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    buf b = {0};
    put_u32(&b, GGUF_TYPE_STRING);
    put_str(&b, v, strlen(v));
    return set_kv(w, key, b);
}

int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n) {
    const size_t es = gguf_type_size(elem_type);
    if (!es) return err_set("gguf: '%s': arrays of %s need their own setter", key, gguf_type_name(elem_type));
    buf b = {0};
    put_u32(&b, GGUF_TYPE_ARRAY);
    put_u32(&b, (uint32_t)elem_type);
    put_u64(&b, n);
    buf_append(&b, data, (size_t)n * es);
    return set_kv(w, key, b);
}

int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    buf b = {0};
    put_u32(&b, GGUF_TYPE_ARRAY);
    put_u32(&b, GGUF_TYPE_STRING);
    put_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) put_str(&b, strs[i], strlen(strs[i]));
    return set_kv(w, key, b);
}

/* The payload of a value (no type tag); nested array elements carry none either. */
static void put_value(buf *b, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING:
        put_str(b, v->s.ptr, v->s.len);
        return;
    case GGUF_TYPE_ARRAY: {
        put_u32(b, (uint32_t)v->arr.type);
        put_u64(b, v->arr.n);
        const size_t es = gguf_type_size(v->arr.type);
        if (es) {
            buf_append(b, v->arr.raw, (size_t)v->arr.n * es);
        } else if (v->arr.type == GGUF_TYPE_STRING) {
            for (uint64_t i = 0; i < v->arr.n; i++) put_str(b, v->arr.strs[i].ptr, v->arr.strs[i].len);
        } else {
            for (uint64_t i = 0; i < v->arr.n; i++) put_value(b, &v->arr.items[i]);
        }
        return;
    }
    case GGUF_TYPE_BOOL: {
        const uint8_t x = v->b;
        buf_append(b, &x, 1);
        return;
    }
    case GGUF_TYPE_FLOAT32: {
        const float x = (float)v->f;
        buf_append(b, &x, 4);
        return;
    }
    case GGUF_TYPE_FLOAT64:
        buf_append(b, &v->f, 8);
        return;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        buf_append(b, &v->i, gguf_type_size(v->type)); /* little-endian: the low buf come first */
        return;
    default:
        buf_append(b, &v->u, gguf_type_size(v->type));
        return;
    }
}

int gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    if ((unsigned)v->type >= GGUF_TYPE_COUNT) return err_set("gguf: '%s' has an invalid value type", key);
    if (!strcmp(key, "general.alignment")) {
        if (v->type != GGUF_TYPE_UINT32) return err_set("gguf: general.alignment must be a uint32");
        return gguf_writer_set_alignment(w, (uint32_t)v->u);
    }
    buf b = {0};
    put_u32(&b, (uint32_t)v->type);
    put_value(&b, v);
    return set_kv(w, key, b);
}

void gguf_writer_remove(gguf_writer *w, const char *key) {
    int64_t i = find_key(w, key);
    if (i < 0) return;
    free(w->kv[i].key);
    buf_free(&w->kv[i].val);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
}

int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) {
    if (!alignment || (alignment & (alignment - 1)) || alignment > 65536)
        return err_set("gguf: alignment %u is not a power of two up to 65536", alignment);
    w->alignment = alignment;
    return gguf_writer_set_u32(w, "general.alignment", alignment);
}

/* ---- tensors ---- */

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *data) {
    if (w->f) return err_set("gguf: tensor '%s' added after the output began", name);
    if (!name[0] || strlen(name) > 256) return err_set("gguf: tensor name '%s' must be 1..256 buf", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return err_set("gguf: tensor '%s' has %d dimensions", name, n_dims);
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return err_set("gguf: duplicate tensor '%s'", name);
    tensor_entry e = {.type = type, .n_dims = n_dims, .data = data};
    uint64_t rows = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        e.ne[d] = d < n_dims ? ne[d] : 1;
        if (e.ne[d] < 1) return err_set("gguf: tensor '%s' has dimension %d of size %" PRId64, name, d, e.ne[d]);
        if (d) rows *= (uint64_t)e.ne[d];
    }
    const size_t row = wtype_row_size(type, e.ne[0]);
    if (!row)
        return err_set("gguf: tensor '%s': type %s cannot hold rows of %" PRId64 " elements", name, wtype_name(type),
                       e.ne[0]);
    e.nbytes = row * rows;
    if (array_reserve((void **)&w->t, &w->cap_t, (size_t)w->n_t + 1, sizeof *w->t)) return -1;
    if (!(e.name = strdup(name))) return err_oom("out of memory");
    w->t[w->n_t++] = e;
    return 0;
}

int64_t gguf_writer_n_tensors(const gguf_writer *w) { return w->n_t; }

uint64_t gguf_writer_tensor_bytes(const gguf_writer *w, int64_t i) {
    return i >= 0 && i < w->n_t ? w->t[i].nbytes : 0;
}

/* ---- output ---- */

static int write_bytes(gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n) return err_set("%s: write failed: %s", w->tmp_path, strerror(errno));
    w->pos += n;
    return 0;
}

static int pad_to(gguf_writer *w, uint64_t align) {
    static const uint8_t zeros[256];
    while (w->pos % align) {
        uint64_t n = align - w->pos % align;
        if (write_bytes(w, zeros, n > sizeof zeros ? sizeof zeros : (size_t)n)) return -1;
    }
    return 0;
}

void gguf_writer_abort(gguf_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp_path) unlink(w->tmp_path);
    w->f = NULL;
    free(w->path);
    free(w->tmp_path);
    w->path = w->tmp_path = NULL;
}

int gguf_writer_begin(gguf_writer *w, const char *path) {
    if (w->f) return err_set("gguf: output already begun");
    w->path = strdup(path);
    w->tmp_path = malloc(strlen(path) + 5);
    if (!w->path || !w->tmp_path) {
        gguf_writer_abort(w);
        return err_oom("out of memory");
    }
    sprintf(w->tmp_path, "%s.tmp", path);
    w->f = fopen(w->tmp_path, "wb");
    if (!w->f) {
        err_set("%s: cannot create: %s", w->tmp_path, strerror(errno));
        free(w->tmp_path); /* nothing to remove */
        w->tmp_path = NULL;
        gguf_writer_abort(w);
        return -1;
    }
    w->pos = 0;
    w->next_tensor = 0;
    /* Lay out the data section. */
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off = (off + w->t[i].nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    buf h = {0};
    buf_append(&h, "GGUF", 4);
    put_u32(&h, GGUF_VERSION);
    put_u64(&h, (uint64_t)w->n_t);
    put_u64(&h, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        put_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        buf_append(&h, w->kv[i].val.data, w->kv[i].val.len);
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        const tensor_entry *t = &w->t[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, t->offset);
    }
    int rc = h.oom ? err_oom("out of memory") : write_bytes(w, h.data, h.len);
    buf_free(&h);
    if (rc || pad_to(w, w->alignment)) {
        gguf_writer_abort(w);
        return -1;
    }
    return 0;
}

int gguf_writer_write_tensor(gguf_writer *w, int64_t i, const void *data) {
    if (!w->f) return err_set("gguf: no output begun");
    if (i != w->next_tensor || i >= w->n_t) {
        err_set("gguf: tensor %" PRId64 " written out of order (expected %" PRId64 ")", i, w->next_tensor);
        gguf_writer_abort(w);
        return -1;
    }
    if (write_bytes(w, data, (size_t)w->t[i].nbytes) || pad_to(w, w->alignment)) {
        gguf_writer_abort(w);
        return -1;
    }
    w->next_tensor++;
    return 0;
}

int gguf_writer_finish(gguf_writer *w) {
    if (!w->f) return err_set("gguf: no output begun");
    if (w->next_tensor != w->n_t) {
        err_set("gguf: %s: only %" PRId64 " of %" PRId64 " tensors were written", w->path, w->next_tensor, w->n_t);
        gguf_writer_abort(w);
        return -1;
    }
    int rc = 0;
    if (fflush(w->f) || fsync(fileno(w->f))) rc = err_set("%s: write failed: %s", w->tmp_path, strerror(errno));
    if (fclose(w->f) && !rc) rc = err_set("%s: write failed: %s", w->tmp_path, strerror(errno));
    w->f = NULL;
    if (!rc && rename(w->tmp_path, w->path))
        rc = err_set("cannot rename %s to %s: %s", w->tmp_path, w->path, strerror(errno));
    if (!rc) { /* nothing left to remove */
        free(w->tmp_path);
        w->tmp_path = NULL;
    }
    gguf_writer_abort(w);
    return rc;
}

int gguf_writer_write_file(gguf_writer *w, const char *path) {
    for (int64_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data) return err_set("gguf: tensor '%s' has no data", w->t[i].name);
    if (gguf_writer_begin(w, path)) return -1;
    for (int64_t i = 0; i < w->n_t; i++)
        if (gguf_writer_write_tensor(w, i, w->t[i].data)) return -1;
    return gguf_writer_finish(w);
}
