/* GGUF parsing: header, metadata key/values (all value types, arrays nested to
 * any depth), tensor infos, alignment and the data section. A cursor walks the
 * mapped bytes and refuses every read that would pass the end of the file;
 * counts read from the file are checked against the bytes left before anything
 * is allocated for them. */
#include "format/gguf.h"

#include "format/wtype_geom.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
/* Deeper nesting than this is not a real model; refusing it bounds recursion. */
#define GGUF_MAX_ARRAY_DEPTH 8

struct gguf_ctx {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint32_t version;
    uint64_t alignment;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    gguf_tensor_info *tensors;
    uint64_t data_offset;
};

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
    const uint8_t *base;
} cursor;

static uint64_t cur_pos(const cursor *c) { return (uint64_t)(c->p - c->base); }
static uint64_t cur_left(const cursor *c) { return (uint64_t)(c->end - c->p); }

static int cur_read(cursor *c, void *dst, size_t n, const char *what) {
    if (cur_left(c) < n)
        return err_set("file is truncated: reading %s at offset %" PRIu64 " needs %zu bytes, %" PRIu64
                       " left",
                       what, cur_pos(c), n, cur_left(c));
    memcpy(dst, c->p, n);
    c->p += n;
    return 0;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_read(c, v, 4, what); }
static int cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_read(c, v, 8, what); }

static int cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len = 0;
    if (cur_u64(c, &len, what)) return -1;
    if (len > cur_left(c))
        return err_set("file is truncated or corrupt: %s at offset %" PRIu64 " claims %" PRIu64
                       " bytes, %" PRIu64 " left",
                       what, cur_pos(c), len, cur_left(c));
    s->ptr = (const char *)c->p;
    s->len = len;
    c->p += len;
    return 0;
}

static size_t scalar_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

size_t gguf_type_size(gguf_type t) { return scalar_size(t); }

const char *gguf_type_name(gguf_type t) {
    static const char *names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                  "bool",  "string", "array",  "uint64", "int64", "float64"};
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "unknown";
}

static void value_free(gguf_value *v) {
    if (v->type != GGUF_TYPE_ARRAY) return;
    free(v->arr.strs);
    if (v->arr.items) {
        for (uint64_t i = 0; i < v->arr.n; i++) value_free(&v->arr.items[i]);
        free(v->arr.items);
    }
}

static int read_scalar(cursor *c, gguf_type t, gguf_value *v, const char *what) {
    uint8_t buf[8] = {0};
    size_t n = scalar_size(t);
    if (cur_read(c, buf, n, what)) return -1;
    switch (t) {
    case GGUF_TYPE_UINT8: v->u = buf[0]; break;
    case GGUF_TYPE_INT8: v->i = (int8_t)buf[0]; break;
    case GGUF_TYPE_BOOL:
        if (buf[0] > 1) return err_set("%s: bool value %u is neither 0 nor 1", what, buf[0]);
        v->b = buf[0];
        break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, buf, 2); v->u = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, buf, 2); v->i = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, buf, 4); v->u = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, buf, 4); v->i = x; break; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, buf, 4); v->f = x; break; }
    case GGUF_TYPE_UINT64: memcpy(&v->u, buf, 8); break;
    case GGUF_TYPE_INT64: memcpy(&v->i, buf, 8); break;
    case GGUF_TYPE_FLOAT64: memcpy(&v->f, buf, 8); break;
    default: return err_set("%s: bad scalar type %d", what, (int)t);
    }
    return 0;
}

static int read_value(cursor *c, gguf_type t, gguf_value *v, int depth, const char *what) {
    memset(v, 0, sizeof *v);
    v->type = t;
    if (t == GGUF_TYPE_STRING) return cur_str(c, &v->s, what);
    if (t != GGUF_TYPE_ARRAY) {
        if (scalar_size(t) == 0) return err_set("%s: unknown value type %u", what, (unsigned)t);
        return read_scalar(c, t, v, what);
    }
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return err_set("%s: arrays nested deeper than %d", what, GGUF_MAX_ARRAY_DEPTH);
    uint32_t et = 0;
    uint64_t n = 0;
    if (cur_u32(c, &et, what) || cur_u64(c, &n, what)) return -1;
    if (et >= GGUF_TYPE_COUNT) return err_set("%s: unknown array element type %u", what, et);
    v->arr.type = (gguf_type)et;
    size_t es = scalar_size((gguf_type)et);
    if (es) {
        if (n > cur_left(c) / es)
            return err_set("file is truncated or corrupt: %s array of %" PRIu64
                           " %s elements does not fit in the %" PRIu64 " bytes left",
                           what, n, gguf_type_name((gguf_type)et), cur_left(c));
        v->arr.raw = c->p;
        v->arr.n = n;
        c->p += n * es;
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (((const uint8_t *)v->arr.raw)[i] > 1)
                    return err_set("%s: bool element %" PRIu64 " is neither 0 nor 1", what, i);
        return 0;
    }
    /* Strings take at least 8 bytes each, arrays at least 12: bound n first. */
    uint64_t min_elem = et == GGUF_TYPE_STRING ? 8 : 12;
    if (n > cur_left(c) / min_elem)
        return err_set("file is truncated or corrupt: %s array of %" PRIu64
                       " elements cannot fit in the %" PRIu64 " bytes left",
                       what, n, cur_left(c));
    if (et == GGUF_TYPE_STRING) {
        v->arr.strs = malloc((n ? n : 1) * sizeof *v->arr.strs);
        if (!v->arr.strs) return err_oom("out of memory reading %s", what);
        v->arr.n = n;
        for (uint64_t i = 0; i < n; i++)
            if (cur_str(c, &v->arr.strs[i], what)) return -1;
        return 0;
    }
    v->arr.items = calloc(n ? n : 1, sizeof *v->arr.items);
    if (!v->arr.items) return err_oom("out of memory reading %s", what);
    v->arr.n = n;
    /* Elements of a nested array carry no type tag of their own: each is
     * (element type, count, elements), as gguf-py writes them. */
    for (uint64_t i = 0; i < n; i++)
        if (read_value(c, GGUF_TYPE_ARRAY, &v->arr.items[i], depth + 1, what)) return -1;
    return 0;
}

void gguf_close(gguf_ctx *ctx) {
    if (!ctx) return;
    if (ctx->kv) {
        for (int64_t i = 0; i < ctx->n_kv; i++) value_free(&ctx->kv[i].value);
        free(ctx->kv);
    }
    if (ctx->tensors) {
        for (int64_t i = 0; i < ctx->n_tensors; i++) free(ctx->tensors[i].name);
        free(ctx->tensors);
    }
    if (ctx->mapped && ctx->base) munmap((void *)ctx->base, ctx->size);
    free(ctx->path);
    free(ctx);
}

static int parse_tensor_info(gguf_ctx *ctx, cursor *c, int64_t idx) {
    gguf_tensor_info *t = &ctx->tensors[idx];
    gguf_str name;
    uint32_t n_dims = 0;
    if (cur_str(c, &name, "tensor name")) return -1;
    if (name.len == 0 || name.len > 256)
        return err_set("tensor %" PRId64 " has a name of %" PRIu64 " bytes (must be 1..256)", idx,
                       name.len);
    t->name = gguf_str_dup(name);
    if (!t->name) return err_oom("out of memory");
    if (memchr(name.ptr, 0, name.len)) return err_set("tensor %" PRId64 " name contains a NUL byte", idx);
    if (cur_u32(c, &n_dims, t->name)) return -1;
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return err_set("tensor '%s' has %u dimensions (must be 1..%d)", t->name, n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    uint64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne = 0;
        if (cur_u64(c, &ne, t->name)) return -1;
        if (ne == 0 || ne > ((uint64_t)1 << 40) || n_elem > (((uint64_t)1 << 50) / ne))
            return err_set("tensor '%s' has an invalid dimension %u of size %" PRIu64, t->name, d, ne);
        t->ne[d] = (int64_t)ne;
        n_elem *= ne;
    }
    if (cur_u32(c, &t->type, t->name) || cur_u64(c, &t->offset, t->name)) return -1;
    int bs = wtype_block_size(t->type);
    if (bs > 0 || wtype_row_block(t->type)) {
        if (bs > 0 && t->ne[0] % bs)
            return err_set("tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %d",
                           t->name, t->ne[0], wtype_name(t->type), bs);
        const size_t row = wtype_row_size(t->type, t->ne[0]);
        if (!row)
            return err_set("tensor '%s': row length %" PRId64 " is not valid for %s", t->name, t->ne[0],
                           wtype_name(t->type));
        t->nbytes = row * (n_elem / (uint64_t)t->ne[0]);
    }
    return 0;
}

static int check_duplicates(const gguf_ctx *ctx) {
    /* Quadratic, but the counts are small (hundreds) and it runs once. */
    for (int64_t i = 0; i < ctx->n_kv; i++)
        for (int64_t j = 0; j < i; j++)
            if (ctx->kv[i].key.len == ctx->kv[j].key.len &&
                !memcmp(ctx->kv[i].key.ptr, ctx->kv[j].key.ptr, ctx->kv[i].key.len))
                return err_set("duplicate metadata key '%.*s'", (int)ctx->kv[i].key.len,
                               ctx->kv[i].key.ptr);
    for (int64_t i = 0; i < ctx->n_tensors; i++)
        for (int64_t j = 0; j < i; j++)
            if (!strcmp(ctx->tensors[i].name, ctx->tensors[j].name))
                return err_set("duplicate tensor '%s'", ctx->tensors[i].name);
    return 0;
}

static int parse(gguf_ctx *ctx) {
    cursor c = {ctx->base, ctx->base + ctx->size, ctx->base};
    char magic[4];
    if (ctx->size < 4 || cur_read(&c, magic, 4, "magic"))
        return err_set("not a GGUF file: %zu bytes is too short for the header", ctx->size);
    if (memcmp(magic, GGUF_MAGIC, 4))
        return err_set("not a GGUF file: bad magic %02x %02x %02x %02x (expected 'GGUF')",
                       (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    if (cur_u32(&c, &ctx->version, "version")) return -1;
    if (ctx->version != 2 && ctx->version != 3)
        return err_set("unsupported GGUF version %u (supported: 2, 3)", ctx->version);
    uint64_t n_tensors = 0, n_kv = 0;
    if (cur_u64(&c, &n_tensors, "tensor count") || cur_u64(&c, &n_kv, "metadata count")) return -1;
    /* A key/value takes at least 12 bytes and a tensor info at least 28. */
    if (n_kv > cur_left(&c) / 12)
        return err_set("file is truncated or corrupt: %" PRIu64 " metadata entries cannot fit", n_kv);
    if (n_tensors > cur_left(&c) / 28)
        return err_set("file is truncated or corrupt: %" PRIu64 " tensors cannot fit", n_tensors);

    ctx->kv = calloc(n_kv ? n_kv : 1, sizeof *ctx->kv);
    ctx->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *ctx->tensors);
    if (!ctx->kv || !ctx->tensors) return err_oom("out of memory");

    ctx->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &ctx->kv[i];
        uint32_t t = 0;
        ctx->n_kv = (int64_t)i + 1;
        if (cur_str(&c, &kv->key, "metadata key")) return -1;
        char what[160];
        snprintf(what, sizeof what, "metadata '%.*s'", (int)(kv->key.len > 100 ? 100 : kv->key.len),
                 kv->key.ptr);
        if (cur_u32(&c, &t, what)) return -1;
        if (t >= GGUF_TYPE_COUNT) return err_set("%s has unknown value type %u", what, t);
        if (read_value(&c, (gguf_type)t, &kv->value, 0, what)) return -1;
        if (gguf_str_eq(kv->key, "general.alignment")) {
            if (t != GGUF_TYPE_UINT32 || kv->value.u == 0 || (kv->value.u & (kv->value.u - 1)) ||
                kv->value.u > 65536)
                return err_set("general.alignment must be a uint32 power of two up to 65536");
            ctx->alignment = kv->value.u;
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        ctx->n_tensors = (int64_t)i + 1;
        if (parse_tensor_info(ctx, &c, (int64_t)i)) return -1;
    }
    if (check_duplicates(ctx)) return -1;

    uint64_t pos = cur_pos(&c);
    ctx->data_offset = (pos + ctx->alignment - 1) / ctx->alignment * ctx->alignment;
    if (n_tensors && ctx->data_offset > ctx->size)
        return err_set("file is truncated: data section starts at %" PRIu64 " but the file has %zu bytes",
                       ctx->data_offset, ctx->size);
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        gguf_tensor_info *t = &ctx->tensors[i];
        if (t->offset % ctx->alignment)
            return err_set("tensor '%s' offset %" PRIu64 " is not aligned to %" PRIu64, t->name,
                           t->offset, ctx->alignment);
        uint64_t avail = ctx->size - ctx->data_offset;
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return err_set("tensor '%s' extends past end of file (offset %" PRIu64 ", size %" PRIu64
                           ", file %zu)",
                           t->name, ctx->data_offset + t->offset, t->nbytes, ctx->size);
        t->data = ctx->base + ctx->data_offset + t->offset;
    }
    return 0;
}

gguf_ctx *gguf_open_memory(const void *data, size_t size, const char *name) {
    gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        err_oom("out of memory");
        return NULL;
    }
    ctx->path = strdup(name ? name : "<memory>");
    ctx->base = data;
    ctx->size = size;
    if (parse(ctx)) {
        err_prefix("%s: ", ctx->path ? ctx->path : "<memory>");
        gguf_close(ctx);
        return NULL;
    }
    return ctx;
}

gguf_ctx *gguf_open(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        err_set("%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        err_set("%s: not a GGUF file: the file is empty", path);
        close(fd);
        return NULL;
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        err_set("%s: cannot map: %s", path, strerror(errno));
        return NULL;
    }
    gguf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        munmap(base, (size_t)st.st_size);
        err_oom("out of memory");
        return NULL;
    }
    ctx->path = strdup(path);
    ctx->base = base;
    ctx->size = (size_t)st.st_size;
    ctx->mapped = true;
    if (parse(ctx)) {
        err_prefix("%s: ", path);
        gguf_close(ctx);
        return NULL;
    }
    return ctx;
}

void gguf_release_pages(const gguf_ctx *ctx, const void *p, size_t n) {
    const uintptr_t lo = (uintptr_t)p, hi = lo + n, base = (uintptr_t)ctx->base;
    if (!ctx->mapped || lo < base || hi > base + ctx->size) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
    /* a read-only shared file mapping: the pages come back from the file on
     * the next touch */
    if (a < b) madvise((void *)a, b - a, MADV_DONTNEED);
}

uint32_t gguf_version(const gguf_ctx *ctx) { return ctx->version; }
uint64_t gguf_alignment(const gguf_ctx *ctx) { return ctx->alignment; }
uint64_t gguf_file_size(const gguf_ctx *ctx) { return ctx->size; }
const char *gguf_path(const gguf_ctx *ctx) { return ctx->path; }
int64_t gguf_n_kv(const gguf_ctx *ctx) { return ctx->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_ctx *ctx, int64_t i) {
    return i >= 0 && i < ctx->n_kv ? &ctx->kv[i] : NULL;
}
int64_t gguf_n_tensors(const gguf_ctx *ctx) { return ctx->n_tensors; }
const gguf_tensor_info *gguf_tensor_at(const gguf_ctx *ctx, int64_t i) {
    return i >= 0 && i < ctx->n_tensors ? &ctx->tensors[i] : NULL;
}

bool gguf_str_eq(gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && !memcmp(s.ptr, cstr, n);
}

char *gguf_str_dup(gguf_str s) {
    char *r = malloc(s.len + 1);
    if (!r) return NULL;
    memcpy(r, s.ptr, s.len);
    r[s.len] = 0;
    return r;
}

const gguf_value *gguf_find(const gguf_ctx *ctx, const char *key) {
    for (int64_t i = 0; i < ctx->n_kv; i++)
        if (gguf_str_eq(ctx->kv[i].key, key)) return &ctx->kv[i].value;
    return NULL;
}

const gguf_tensor_info *gguf_find_tensor(const gguf_ctx *ctx, const char *name) {
    for (int64_t i = 0; i < ctx->n_tensors; i++)
        if (!strcmp(ctx->tensors[i].name, name)) return &ctx->tensors[i];
    return NULL;
}

static bool is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}
static bool is_unsigned(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

bool gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out) {
    const gguf_value *v = gguf_find(ctx, key);
    if (!v) return false;
    if (is_signed(v->type)) { *out = v->i; return true; }
    if (is_unsigned(v->type) && v->u <= (uint64_t)INT64_MAX) { *out = (int64_t)v->u; return true; }
    return false;
}

bool gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out) {
    int64_t x;
    if (!gguf_get_i64(ctx, key, &x) || x < 0 || x > (int64_t)UINT32_MAX) return false;
    *out = (uint32_t)x;
    return true;
}

bool gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out) {
    const gguf_value *v = gguf_find(ctx, key);
    if (!v) return false;
    if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64) { *out = (float)v->f; return true; }
    if (is_signed(v->type)) { *out = (float)v->i; return true; }
    if (is_unsigned(v->type)) { *out = (float)v->u; return true; }
    return false;
}

bool gguf_get_bool(const gguf_ctx *ctx, const char *key, bool *out) {
    const gguf_value *v = gguf_find(ctx, key);
    if (!v || v->type != GGUF_TYPE_BOOL) return false;
    *out = v->b;
    return true;
}

bool gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out) {
    const gguf_value *v = gguf_find(ctx, key);
    if (!v || v->type != GGUF_TYPE_STRING) return false;
    *out = v->s;
    return true;
}

const gguf_value *gguf_get_arr(const gguf_ctx *ctx, const char *key, gguf_type elem_type) {
    const gguf_value *v = gguf_find(ctx, key);
    if (!v || v->type != GGUF_TYPE_ARRAY || v->arr.type != elem_type) return NULL;
    return v;
}

double gguf_arr_num(const gguf_value *arr, uint64_t i) {
    const uint8_t *p = (const uint8_t *)arr->arr.raw + i * scalar_size(arr->arr.type);
    switch (arr->arr.type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: return p[0];
    case GGUF_TYPE_INT8: return (int8_t)p[0];
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p, 4); return x; }
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case GGUF_TYPE_FLOAT64: { double x; memcpy(&x, p, 8); return x; }
    default: return 0;
    }
}
