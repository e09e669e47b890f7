/* Safetensors reader; see safetensors.h. Each file is mapped once; its JSON
 * header is parsed with jansson and every entry checked (dtype known, shape
 * non-negative, byte count = elements x element size without overflow,
 * offsets inside the data section, no two tensors overlapping) before any
 * tensor is handed out. A sharded folder is the union of its files' tensors,
 * cross-checked against the index's weight_map. */
#include "format/safetensors.h"

#include "format/json_file.h"
#include "util/error.h"
#include "util/array.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The safetensors library refuses headers over 100 MB; so do we. */
#define ST_MAX_HEADER (100u << 20)

typedef struct {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint64_t data_off; /* 8 + header length */
} st_shard;

struct st_set {
    st_shard *shards;
    int n_shards;
    st_tensor *t;
    int64_t n;
    size_t cap;
    uint64_t data_bytes;
};

static const struct {
    const char *name;
    size_t size;
} k_dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},   [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},
    [ST_I16] = {"I16", 2},     [ST_U16] = {"U16", 2},   [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},   [ST_I32] = {"I32", 4},   [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},     [ST_I64] = {"I64", 8},   [ST_U64] = {"U64", 8},
    [ST_F64] = {"F64", 8},     [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? k_dtypes[t].name : "?"; }
size_t st_dtype_size(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? k_dtypes[t].size : 0; }

static int dtype_from_name(const char *s, st_dtype *out) {
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(k_dtypes[i].name, s)) {
            *out = (st_dtype)i;
            return 0;
        }
    return -1;
}

/* --- set bookkeeping ------------------------------------------------------ */

static st_set *set_new(void) {
    st_set *s = calloc(1, sizeof *s);
    if (!s) err_oom("out of memory");
    return s;
}

void st_close(st_set *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) free(s->t[i].name);
    free(s->t);
    for (int i = 0; i < s->n_shards; i++) {
        if (s->shards[i].mapped && s->shards[i].base) munmap((void *)s->shards[i].base, s->shards[i].size);
        free(s->shards[i].path);
    }
    free(s->shards);
    free(s);
}

static int add_shard(st_set *s, const char *path, const void *base, size_t size, bool mapped) {
    st_shard *grown = realloc(s->shards, (size_t)(s->n_shards + 1) * sizeof *grown);
    if (!grown) return err_oom("out of memory");
    s->shards = grown;
    st_shard *sh = &s->shards[s->n_shards];
    *sh = (st_shard){.path = strdup(path), .base = base, .size = size, .mapped = mapped};
    s->n_shards++; /* owns the mapping from here on, even on failure below */
    if (!sh->path) return err_oom("out of memory");
    return 0;
}

static st_tensor *add_tensor(st_set *s) {
    if (array_reserve((void **)&s->t, &s->cap, (size_t)s->n + 1, sizeof *s->t)) return NULL;
    st_tensor *t = &s->t[s->n++];
    memset(t, 0, sizeof *t);
    return t;
}

/* --- one file ------------------------------------------------------------- */

static int get_u64(json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Checks and records one header entry. */
static int parse_entry(st_set *s, int shard, const char *name, json_t *e, uint64_t data_size) {
    const char *path = s->shards[shard].path;
    if (!json_is_object(e)) return err_set("%s: header entry '%s' is not an object", path, name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd)) return err_set("%s: tensor '%s' has no dtype string", path, name);
    st_dtype dt;
    if (dtype_from_name(json_string_value(jd), &dt))
        return err_set("%s: tensor '%s' has unknown dtype '%.32s'", path, name, json_string_value(jd));
    if (!json_is_array(js)) return err_set("%s: tensor '%s' has no shape array", path, name);
    size_t nd = json_array_size(js);
    if (nd > ST_MAX_DIMS) return err_set("%s: tensor '%s' has %zu dimensions (at most %d)", path, name, nd, ST_MAX_DIMS);
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return err_set("%s: tensor '%s' has no data_offsets [begin, end]", path, name);
    uint64_t begin, end;
    if (get_u64(json_array_get(jo, 0), &begin) || get_u64(json_array_get(jo, 1), &end))
        return err_set("%s: tensor '%s' has data_offsets that are not non-negative integers", path, name);

    st_tensor *t = add_tensor(s);
    if (!t) return -1;
    t->name = strdup(name);
    if (!t->name) return err_oom("out of memory");
    t->dtype = dt;
    t->n_dims = (int)nd;
    t->shard = shard;
    uint64_t n = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (get_u64(json_array_get(js, i), &d) || d > INT64_MAX)
            return err_set("%s: tensor '%s' has a shape entry that is not a non-negative integer", path, name);
        t->shape[i] = (int64_t)d;
        if (d && n > UINT64_MAX / d) return err_set("%s: tensor '%s' has an absurd shape", path, name);
        n *= d;
    }
    size_t esz = k_dtypes[dt].size;
    if (n > (uint64_t)INT64_MAX / esz) return err_set("%s: tensor '%s' has an absurd shape", path, name);
    t->n_elems = (int64_t)n;
    t->nbytes = n * esz;
    if (begin > end || end > data_size)
        return err_set("%s: tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] are outside the data (%" PRIu64
                       " bytes)",
                       path, name, begin, end, data_size);
    if (end - begin != t->nbytes)
        return err_set("%s: tensor '%s' spans %" PRIu64 " bytes, but %s x %" PRIu64 " elements need %" PRIu64,
                       path, name, end - begin, k_dtypes[dt].name, n, t->nbytes);
    const st_shard *sh = &s->shards[shard];
    t->data = sh->base + sh->data_off + begin;
    return 0;
}

static int cmp_data(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->data, q = (uintptr_t)y->data;
    return (p > q) - (p < q);
}

/* Tensors of one file may not share bytes. */
static int check_overlaps(st_set *s, int64_t first) {
    int64_t n = s->n - first;
    if (n < 2) return 0; /* also keeps a file without tensors from offsetting a NULL s->t */
    st_tensor *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return err_oom("out of memory");
    memcpy(v, s->t + first, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_data);
    int rc = 0;
    for (int64_t i = 1; i < n && !rc; i++)
        if ((const uint8_t *)v[i - 1].data + v[i - 1].nbytes > (const uint8_t *)v[i].data)
            rc = err_set("%s: tensors '%s' and '%s' overlap", s->shards[v[i].shard].path, v[i - 1].name,
                         v[i].name);
    free(v);
    return rc;
}

static int parse_shard(st_set *s, int shard) {
    st_shard *sh = &s->shards[shard];
    if (sh->size < 8) return err_set("%s: %zu bytes is too short for a safetensors file", sh->path, sh->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | sh->base[i];
    if (hlen > sh->size - 8)
        return err_set("%s: header length %" PRIu64 " runs past the end of the file (%zu bytes)", sh->path, hlen,
                       sh->size);
    if (hlen > ST_MAX_HEADER) return err_set("%s: header of %" PRIu64 " bytes is too large", sh->path, hlen);
    if (hlen < 2 || sh->base[8] != '{')
        return err_set("%s: not a safetensors file (the header is not a JSON object)", sh->path);
    sh->data_off = 8 + hlen;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)sh->base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return err_set("%s: header is not valid JSON: %s (at byte %d)", sh->path, jerr.text, jerr.position);
    int rc = 0;
    if (!json_is_object(root)) rc = err_set("%s: header is not a JSON object", sh->path);
    const uint64_t data_size = sh->size - sh->data_off;
    const int64_t first = s->n;
    const char *name;
    json_t *e;
    json_object_foreach(root, name, e) {
        if (rc) break;
        if (!strcmp(name, "__metadata__")) continue;
        rc = parse_entry(s, shard, name, e, data_size);
    }
    json_decref(root);
    if (!rc) rc = check_overlaps(s, first);
    for (int64_t i = first; i < s->n && !rc; i++) s->data_bytes += s->t[i].nbytes;
    return rc;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int finish(st_set *s) {
    if (s->n == 0) return 0; /* s->t is NULL: qsort may not be given it */
    qsort(s->t, (size_t)s->n, sizeof *s->t, cmp_name);
    for (int64_t i = 1; i < s->n; i++)
        if (!strcmp(s->t[i - 1].name, s->t[i].name))
            return err_set("tensor '%s' is in both %s and %s", s->t[i].name, s->shards[s->t[i - 1].shard].path,
                           s->shards[s->t[i].shard].path);
    return 0;
}

static int map_file(st_set *s, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set("%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        return err_set("%s: %lld bytes is too short for a safetensors file", path, (long long)st.st_size);
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return err_set("%s: cannot map: %s", path, strerror(errno));
    if (add_shard(s, path, base, (size_t)st.st_size, true)) {
        if (s->n_shards == 0 || s->shards[s->n_shards - 1].base != base) munmap(base, (size_t)st.st_size);
        return -1;
    }
    return parse_shard(s, s->n_shards - 1);
}

st_set *st_open(const char *path) {
    st_set *s = set_new();
    if (!s || map_file(s, path) || finish(s)) {
        st_close(s);
        return NULL;
    }
    return s;
}

st_set *st_open_memory(const void *data, size_t size, const char *name) {
    st_set *s = set_new();
    if (!s || add_shard(s, name, data, size, false) || parse_shard(s, 0) || finish(s)) {
        st_close(s);
        return NULL;
    }
    return s;
}

/* --- sharded folders ------------------------------------------------------- */

static char *join_path(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* A shard name must be a plain file name inside the folder. */
static bool plain_file_name(const char *f) {
    return *f && !strchr(f, '/') && strcmp(f, ".") && strcmp(f, "..");
}

static int open_index(st_set *s, const char *dir, const char *index_path) {
    json_t *root = json_file_load(index_path, JSON_REJECT_DUPLICATES, NULL);
    if (!root) return -1;
    int rc = 0;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0)
        rc = err_set("%s: no \"weight_map\" object", index_path);
    /* Open each distinct file once, in order of first mention. */
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        if (rc) break;
        const char *file = json_string_value(v);
        if (!file || !plain_file_name(file)) {
            rc = err_set("%s: weight_map entry '%s' is not a file name in the folder", index_path, name);
            break;
        }
        bool seen = false;
        for (int i = 0; i < s->n_shards && !seen; i++) {
            const char *p = strrchr(s->shards[i].path, '/');
            seen = !strcmp(p ? p + 1 : s->shards[i].path, file);
        }
        if (seen) continue;
        char *path = join_path(dir, file);
        if (!path) rc = err_oom("out of memory");
        else rc = map_file(s, path);
        free(path);
    }
    if (!rc) rc = finish(s);
    /* Every tensor the index names is in the file it names. */
    json_object_foreach(map, name, v) {
        if (rc) break;
        const st_tensor *t = st_find(s, name);
        const char *p = t ? strrchr(s->shards[t->shard].path, '/') : NULL;
        if (!t || strcmp(p ? p + 1 : s->shards[t->shard].path, json_string_value(v)))
            rc = err_set("%s: tensor '%s' is mapped to %s, which does not hold it", index_path, name,
                         json_string_value(v));
    }
    json_decref(root);
    return rc;
}

/* The folder's only *.safetensors file (older GPTQ checkpoints name theirs
 * after the quantization, e.g. gptq_model-4bit-128g.safetensors). */
static char *only_safetensors(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        err_set("%s: cannot open the folder: %s", dir, strerror(errno));
        return NULL;
    }
    char *found = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 12 && !strcmp(e->d_name + len - 12, ".safetensors") && n++ == 0) found = join_path(dir, e->d_name);
    }
    closedir(d);
    if (n == 1 && found) return found;
    free(found);
    if (n == 0) err_set("%s: no model.safetensors or model.safetensors.index.json", dir);
    else if (n > 1) err_set("%s: %d .safetensors files but no model.safetensors.index.json to join them", dir, n);
    else err_oom("out of memory");
    return NULL;
}

st_set *st_open_dir(const char *dir) {
    st_set *s = set_new();
    if (!s) return NULL;
    char *index = join_path(dir, "model.safetensors.index.json");
    char *single = join_path(dir, "model.safetensors");
    int rc;
    if (!index || !single) {
        rc = err_oom("out of memory");
    } else if (access(index, F_OK) == 0) {
        rc = open_index(s, dir, index);
    } else {
        if (access(single, F_OK) != 0) {
            free(single);
            single = only_safetensors(dir);
        }
        rc = !single || map_file(s, single) || finish(s) ? -1 : 0;
    }
    free(index);
    free(single);
    if (rc) {
        st_close(s);
        return NULL;
    }
    return s;
}

/* --- lookup --------------------------------------------------------------- */

int64_t st_n_tensors(const st_set *s) { return s->n; }
uint64_t st_data_bytes(const st_set *s) { return s->data_bytes; }

const st_tensor *st_tensor_at(const st_set *s, int64_t i) { return i >= 0 && i < s->n ? &s->t[i] : NULL; }

const st_tensor *st_find(const st_set *s, const char *name) {
    int64_t lo = 0, hi = s->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->t[mid].name, name);
        if (c == 0) return &s->t[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_shard_path(const st_set *s, int shard) {
    return shard >= 0 && shard < s->n_shards ? s->shards[shard].path : "?";
}
