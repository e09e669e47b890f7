/* Safetensors reader: a valid image parses (dtypes, shapes, data views, a
 * zero-size tensor, metadata skipped), sharded folders are joined through the
 * index, and every malformed image (short file, header length past the end,
 * bad JSON, unknown dtype, bad shape, offsets outside the data or not
 * matching the shape, overlapping tensors, duplicate names, every truncation,
 * random byte corruption) is refused with a message instead of crashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/json_file.h"
#include "format/safetensors.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint8_t *p;
    size_t n;
} image;

/* 8-byte length, the header padded with spaces to a multiple of 8, the data. */
static image make_image(const char *header, const void *data, size_t data_len) {
    size_t h = strlen(header), padded = (h + 7) / 8 * 8;
    image im = {malloc(8 + padded + data_len + 1), 8 + padded + data_len};
    for (int i = 0; i < 8; i++) im.p[i] = (uint8_t)(padded >> (8 * i));
    memcpy(im.p + 8, header, h);
    memset(im.p + 8 + h, ' ', padded - h);
    if (data_len) memcpy(im.p + 8 + padded, data, data_len);
    return im;
}

/* A [2, 3] F32 tensor, a [4] BF16 one and an empty [0, 5] I32 one. */
static const char k_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"e\":{\"dtype\":\"I32\",\"shape\":[0,5],\"data_offsets\":[32,32]}}";

static image valid_image(void) {
    uint8_t data[32];
    float w[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    memcpy(data, w, 24);
    memcpy(data + 24, b, 8);
    return make_image(k_header, data, sizeof data);
}

static void test_valid_image(void **state) {
    (void)state;
    image im = valid_image();
    st_set *s = st_open_memory(im.p, im.n, "mem");
    assert_non_null(s);
    assert_int_equal(st_n_tensors(s), 3);
    const st_tensor *w = st_find(s, "w"), *b = st_find(s, "b"), *e = st_find(s, "e");
    assert_non_null(w);
    assert_non_null(b);
    assert_non_null(e);
    assert_null(st_find(s, "__metadata__"));
    assert_null(st_find(s, "x"));
    assert_int_equal(w->dtype, ST_F32);
    assert_int_equal(w->n_dims, 2);
    assert_int_equal(w->shape[0], 2);
    assert_int_equal(w->shape[1], 3);
    assert_int_equal(w->n_elems, 6);
    assert_int_equal(w->nbytes, 24);
    float w4;
    memcpy(&w4, (const float *)w->data + 4, 4);
    assert_true(w4 == 5.0f);
    assert_int_equal(b->dtype, ST_BF16);
    assert_int_equal(b->nbytes, 8);
    assert_int_equal(e->n_elems, 0);
    assert_int_equal(e->nbytes, 0);
    assert_string_equal(st_dtype_name(b->dtype), "BF16");
    assert_int_equal(st_dtype_size(ST_I64), 8);
    assert_int_equal(st_data_bytes(s), 32);
    /* sorted by name */
    assert_string_equal(st_tensor_at(s, 0)->name, "b");
    assert_string_equal(st_tensor_at(s, 2)->name, "w");
    assert_null(st_tensor_at(s, 3));
    st_close(s);
    free(im.p);
}

/* Expects the header to be refused with a message containing `word`. */
static void expect_bad(const char *header, size_t data_len, const char *word) {
    uint8_t data[64] = {0};
    image im = make_image(header, data, data_len);
    err_clear();
    st_set *s = st_open_memory(im.p, im.n, "mem");
    if (s) fail_msg("accepted: %s", header);
    if (!strstr(err_get(), word)) fail_msg("message '%s' lacks '%s' for %s", err_get(), word, header);
    free(im.p);
}

/* A header with no tensors at all ("{}", as tests/fuzz found) is a valid,
 * empty file; the overlap check once offset a NULL tensor array (UBSan). */
static void test_header_without_tensors(void **state) {
    (void)state;
    image im = make_image("{}", NULL, 0);
    st_set *s = st_open_memory(im.p, im.n, "mem");
    assert_non_null(s);
    assert_int_equal(st_n_tensors(s), 0);
    assert_int_equal(st_data_bytes(s), 0);
    st_close(s);
    free(im.p);
}

static void test_malformed_headers(void **state) {
    (void)state;
    expect_bad("[1,2]", 0, "not a safetensors file");
    expect_bad("{\"w\":", 0, "not valid JSON");
    expect_bad("{\"w\":[1]}", 8, "not an object");
    expect_bad("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "no dtype");
    expect_bad("{\"w\":{\"dtype\":\"F24\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'F24'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "no shape");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape entry");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "shape entry");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "data_offsets");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "data_offsets");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "outside the data");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "outside the data");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
               "absurd shape");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8,
               "absurd shape");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               16, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "not valid JSON");
}

static void test_bad_lengths(void **state) {
    (void)state;
    uint8_t tiny[7] = {0};
    assert_null(st_open_memory(tiny, sizeof tiny, "mem"));
    assert_non_null(strstr(err_get(), "too short"));
    image im = valid_image();
    uint64_t huge = im.n; /* header length that runs past the end */
    memcpy(im.p, &huge, 8);
    assert_null(st_open_memory(im.p, im.n, "mem"));
    assert_non_null(strstr(err_get(), "runs past the end"));
    free(im.p);
}

static void test_every_truncation_is_refused(void **state) {
    (void)state;
    image im = valid_image();
    for (size_t n = 0; n < im.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any overread */
        memcpy(copy, im.p, n);
        st_set *s = st_open_memory(copy, n, "mem");
        if (s) fail_msg("a %zu-byte prefix of %zu was accepted", n, im.n);
        free(copy);
    }
    free(im.p);
}

static void test_random_corruption_never_crashes(void **state) {
    (void)state;
    image im = valid_image();
    uint8_t *copy = malloc(im.n);
    srand(7);
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(copy, im.p, im.n);
        for (int k = 0, m = 1 + rand() % 4; k < m; k++) copy[rand() % im.n] = (uint8_t)rand();
        st_set *s = st_open_memory(copy, im.n, "mem");
        if (s) {
            accepted++;
            for (int64_t i = 0; i < st_n_tensors(s); i++) {
                const st_tensor *t = st_tensor_at(s, i);
                assert_true((const uint8_t *)t->data + t->nbytes <= copy + im.n);
            }
            st_close(s);
        }
    }
    assert_true(accepted > 0); /* data bytes may change freely */
    free(copy);
    free(im.p);
}

/* --- folders ------------------------------------------------------------ */

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text) {
    write_file(dir, name, text, strlen(text));
}

static void shard(const char *dir, const char *name, const char *tensor) {
    char header[256];
    float v[2] = {1, 2};
    snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", tensor);
    image im = make_image(header, v, sizeof v);
    write_file(dir, name, im.p, im.n);
    free(im.p);
}

static void remove_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_sharded_folder(void **state) {
    (void)state;
    char dir[] = "/tmp/cllm_st_XXXXXX";
    assert_non_null(mkdtemp(dir));
    err_clear();
    assert_null(st_open_dir(dir));
    assert_non_null(strstr(err_get(), "no model.safetensors"));

    shard(dir, "a.safetensors", "x");
    shard(dir, "b.safetensors", "y");
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{},\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\"}}");
    st_set *s = st_open_dir(dir);
    assert_non_null(s);
    assert_int_equal(st_n_tensors(s), 2);
    assert_non_null(strstr(st_shard_path(s, st_find(s, "y")->shard), "b.safetensors"));
    st_close(s);

    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"a.safetensors\"}}");
    assert_null(st_open_dir(dir));
    assert_non_null(strstr(err_get(), "does not hold it"));

    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"../a.safetensors\"}}");
    assert_null(st_open_dir(dir));
    assert_non_null(strstr(err_get(), "not a file name"));

    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"c.safetensors\"}}");
    assert_null(st_open_dir(dir));
    assert_non_null(strstr(err_get(), "cannot open"));

    shard(dir, "b.safetensors", "x"); /* the same name in two shards */
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"x\":\"a.safetensors\",\"z\":\"b.safetensors\"}}");
    assert_null(st_open_dir(dir));
    assert_non_null(strstr(err_get(), "is in both"));

    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":");
    assert_null(st_open_dir(dir));
    assert_non_null(strstr(err_get(), "not valid JSON"));

    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unlink(path);
    assert_null(st_open_dir(dir)); /* a.safetensors and b.safetensors, no index */
    assert_non_null(strstr(err_get(), "2 .safetensors files"));
    snprintf(path, sizeof path, "%s/b.safetensors", dir);
    unlink(path);
    s = st_open_dir(dir); /* the only one, whatever its name */
    assert_non_null(s);
    assert_non_null(st_find(s, "x"));
    st_close(s);
    shard(dir, "model.safetensors", "w");
    s = st_open_dir(dir);
    assert_non_null(s);
    assert_non_null(st_find(s, "w"));
    st_close(s);
    remove_dir(dir);
}

/* The JSON file reader beside it (format/json_file.c): an absent file is
 * told apart from a broken one only where the caller asks. */
static void test_json_file_load(void **state) {
    (void)state;
    char dir[] = "/tmp/cllm_json_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    bool absent = false;
    assert_null(json_file_load(path, 0, &absent));
    assert_true(absent);
    assert_null(strstr(err_get(), "cannot open")); /* absence asked about is not an error */
    assert_null(json_file_load(path, 0, NULL));
    char want[600];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    assert_string_equal(err_get(), want);

    write_text(dir, "config.json", "{\"a\": 1,\n \"b\": }");
    assert_null(json_file_load(path, 0, &absent));
    assert_false(absent);
    snprintf(want, sizeof want, "%s: not valid JSON: ", path);
    assert_memory_equal(err_get(), want, strlen(want));
    assert_non_null(strstr(err_get(), "(line 2)"));

    write_text(dir, "config.json", "{\"a\": 1, \"a\": 2}");
    json_t *j = json_file_load(path, 0, &absent);
    assert_non_null(j);
    assert_false(absent);
    assert_int_equal(json_integer_value(json_object_get(j, "a")), 2);
    json_decref(j);
    assert_null(json_file_load(path, JSON_REJECT_DUPLICATES, &absent)); /* the flags reach the decoder */
    assert_non_null(strstr(err_get(), "duplicate"));

    snprintf(path, sizeof path, "%s", dir); /* a folder: there, but not readable as a file */
    assert_null(json_file_load(path, 0, &absent));
    assert_false(absent);
    assert_non_null(strstr(err_get(), path));
    remove_dir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_image),
        cmocka_unit_test(test_header_without_tensors),
        cmocka_unit_test(test_malformed_headers),
        cmocka_unit_test(test_bad_lengths),
        cmocka_unit_test(test_every_truncation_is_refused),
        cmocka_unit_test(test_random_corruption_never_crashes),
        cmocka_unit_test(test_sharded_folder),
        cmocka_unit_test(test_json_file_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
