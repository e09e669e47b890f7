/* GGUF writer: every value type (arrays of numbers, strings and nested
 * arrays too) and tensors of several types read back through the GGUF
 * reader; copying a file's metadata and tensors gives the same bytes;
 * replacing and removing keys; alignment; and every failure (an unwritable
 * folder, a missing tensor, an out-of-order write, an abort) leaves neither
 * the output nor its temporary file behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/gguf.h"
#include "format/gguf_write.h"
#include "format/qgroup.h"
#include "kernels/wtype.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/cllm_test_gguf_write_%d", (int)getpid());
    mkdir(g_dir, 0700);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rmdir(g_dir);
    return 0;
}

static const char *path_in_dir(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static bool tmp_exists(const char *p) {
    char t[600];
    snprintf(t, sizeof t, "%s.tmp", p);
    return exists(t);
}

static uint8_t *read_all(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

/* Tensors: an F32 matrix, a Q8_0 row, a per-row GQ matrix, an I32 vector. */
static float g_f32[3 * 4];
static uint8_t g_q8[34 * 2];
static uint8_t g_gq[2 * (4 + 64 / 2)];
static int32_t g_i32[5] = {4, 3, 2, 1, 0};

static gguf_writer *make_writer(void) {
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_u8(w, "t.u8", 200), 0);
    assert_int_equal(gguf_writer_set_i8(w, "t.i8", -100), 0);
    assert_int_equal(gguf_writer_set_u16(w, "t.u16", 60000), 0);
    assert_int_equal(gguf_writer_set_i16(w, "t.i16", -30000), 0);
    assert_int_equal(gguf_writer_set_u32(w, "t.u32", 4000000000u), 0);
    assert_int_equal(gguf_writer_set_i32(w, "t.i32", -2000000000), 0);
    assert_int_equal(gguf_writer_set_u64(w, "t.u64", 1ull << 40), 0);
    assert_int_equal(gguf_writer_set_i64(w, "t.i64", -5), 0);
    assert_int_equal(gguf_writer_set_f32(w, "t.f32", 1.5f), 0);
    assert_int_equal(gguf_writer_set_f64(w, "t.f64", 2.25), 0);
    assert_int_equal(gguf_writer_set_bool(w, "t.bool", true), 0);
    assert_int_equal(gguf_writer_set_str(w, "t.str", "first"), 0);
    assert_int_equal(gguf_writer_set_str(w, "t.str", "hello"), 0); /* replaces in place */
    assert_int_equal(gguf_writer_set_str(w, "t.gone", "x"), 0);
    gguf_writer_remove(w, "t.gone");
    const float fa[3] = {0.5f, -1.0f, 3.0f};
    assert_int_equal(gguf_writer_set_arr(w, "t.arr_f32", GGUF_TYPE_FLOAT32, fa, 3), 0);
    const int32_t ia[2] = {-7, 9};
    assert_int_equal(gguf_writer_set_arr(w, "t.arr_i32", GGUF_TYPE_INT32, ia, 2), 0);
    const char *sa[3] = {"a", "", "ccc"};
    assert_int_equal(gguf_writer_set_arr_str(w, "t.arr_str", sa, 3), 0);
    /* A nested array [[1, 2], ["x"]] through set_value. */
    const uint16_t inner0[2] = {1, 2};
    gguf_str inner1[1] = {{"x", 1}};
    gguf_value items[2] = {
        {.type = GGUF_TYPE_ARRAY, .arr = {.type = GGUF_TYPE_UINT16, .n = 2, .raw = inner0}},
        {.type = GGUF_TYPE_ARRAY, .arr = {.type = GGUF_TYPE_STRING, .n = 1, .strs = inner1}},
    };
    gguf_value nested = {.type = GGUF_TYPE_ARRAY, .arr = {.type = GGUF_TYPE_ARRAY, .n = 2, .items = items}};
    assert_int_equal(gguf_writer_set_value(w, "t.nested", &nested), 0);
    assert_int_equal(gguf_writer_set_alignment(w, 64), 0);

    for (int i = 0; i < 12; i++) g_f32[i] = (float)i * 0.25f - 1;
    for (size_t i = 0; i < sizeof g_q8; i++) g_q8[i] = (uint8_t)(i * 7);
    g_q8[0] = g_q8[1] = g_q8[34] = g_q8[35] = 0x3c; /* finite scales */
    for (size_t i = 0; i < sizeof g_gq; i++) g_gq[i] = (uint8_t)(i * 13 + 1);
    const int64_t ne_f32[2] = {4, 3}, ne_q8[1] = {64}, ne_gq[2] = {64, 2}, ne_i32[1] = {5};
    assert_int_equal(gguf_writer_add_tensor(w, "a.f32", WT_F32, 2, ne_f32, g_f32), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "b.q8", WT_Q8_0, 1, ne_q8, g_q8), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "c.gq", (uint32_t)gq_type(4, GQ_GROUP_ROW), 2, ne_gq, g_gq), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "c.gq.perm", 26 /* I32 */, 1, ne_i32, g_i32), 0);
    return w;
}

static void test_roundtrip_through_reader(void **state) {
    (void)state;
    const char *p = path_in_dir("rt.gguf");
    gguf_writer *w = make_writer();
    /* Refusals: a duplicate name, a row length the type cannot hold. */
    const int64_t ne[1] = {48};
    assert_int_equal(gguf_writer_add_tensor(w, "a.f32", WT_F32, 1, ne, g_f32), -1);
    assert_int_equal(gguf_writer_add_tensor(w, "bad", WT_Q8_0, 1, ne, g_q8), -1);
    assert_non_null(strstr(err_get(), "cannot hold rows of 48"));
    assert_int_equal(gguf_writer_n_tensors(w), 4);
    assert_int_equal(gguf_writer_write_file(w, p), 0);
    gguf_writer_free(w);
    assert_false(tmp_exists(p));

    gguf_ctx *g = gguf_open(p);
    if (!g) fail_msg("%s", err_get());
    assert_int_equal(gguf_version(g), 3);
    assert_int_equal(gguf_alignment(g), 64);
    assert_int_equal(gguf_n_kv(g), 17);
    uint32_t u32;
    int64_t i64;
    float f;
    bool b;
    gguf_str s;
    assert_true(gguf_get_u32(g, "t.u8", &u32) && u32 == 200);
    assert_true(gguf_get_i64(g, "t.i8", &i64) && i64 == -100);
    assert_true(gguf_get_u32(g, "t.u16", &u32) && u32 == 60000);
    assert_true(gguf_get_i64(g, "t.i16", &i64) && i64 == -30000);
    assert_true(gguf_get_u32(g, "t.u32", &u32) && u32 == 4000000000u);
    assert_true(gguf_get_i64(g, "t.i32", &i64) && i64 == -2000000000);
    assert_true(gguf_get_i64(g, "t.u64", &i64) && i64 == 1ll << 40);
    assert_true(gguf_get_i64(g, "t.i64", &i64) && i64 == -5);
    assert_true(gguf_get_f32(g, "t.f32", &f) && f == 1.5f);
    assert_true(gguf_get_f32(g, "t.f64", &f) && f == 2.25f);
    assert_int_equal(gguf_find(g, "t.f64")->type, GGUF_TYPE_FLOAT64);
    assert_true(gguf_get_bool(g, "t.bool", &b) && b);
    assert_true(gguf_get_str(g, "t.str", &s) && gguf_str_eq(s, "hello"));
    assert_true(gguf_str_eq(gguf_kv_at(g, 11)->key, "t.str")); /* kept its place when replaced */
    assert_null(gguf_find(g, "t.gone"));
    const gguf_value *a = gguf_get_arr(g, "t.arr_f32", GGUF_TYPE_FLOAT32);
    assert_non_null(a);
    assert_int_equal(a->arr.n, 3);
    assert_true(gguf_arr_num(a, 1) == -1.0);
    a = gguf_get_arr(g, "t.arr_i32", GGUF_TYPE_INT32);
    assert_true(a && gguf_arr_num(a, 0) == -7 && gguf_arr_num(a, 1) == 9);
    a = gguf_get_arr(g, "t.arr_str", GGUF_TYPE_STRING);
    assert_true(a && a->arr.n == 3 && gguf_str_eq(a->arr.strs[1], "") && gguf_str_eq(a->arr.strs[2], "ccc"));
    a = gguf_get_arr(g, "t.nested", GGUF_TYPE_ARRAY);
    assert_true(a && a->arr.n == 2);
    assert_int_equal(a->arr.items[0].arr.type, GGUF_TYPE_UINT16);
    assert_true(gguf_arr_num(&a->arr.items[0], 1) == 2);
    assert_true(gguf_str_eq(a->arr.items[1].arr.strs[0], "x"));

    assert_int_equal(gguf_n_tensors(g), 4);
    const gguf_tensor_info *t = gguf_find_tensor(g, "a.f32");
    assert_true(t && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 3 && t->type == WT_F32);
    assert_memory_equal(t->data, g_f32, sizeof g_f32);
    t = gguf_find_tensor(g, "b.q8");
    assert_true(t && t->nbytes == sizeof g_q8);
    assert_memory_equal(t->data, g_q8, sizeof g_q8);
    t = gguf_find_tensor(g, "c.gq");
    assert_true(t && t->nbytes == sizeof g_gq && t->type == (uint32_t)gq_type(4, GQ_GROUP_ROW));
    assert_memory_equal(t->data, g_gq, sizeof g_gq);
    t = gguf_find_tensor(g, "c.gq.perm");
    assert_memory_equal(t->data, g_i32, sizeof g_i32);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) assert_int_equal(gguf_tensor_at(g, i)->offset % 64, 0);

    /* Copying every value and tensor through the writer reproduces the file. */
    const char *p2 = path_in_dir("copy.gguf");
    gguf_writer *w2 = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const gguf_kv *kv = gguf_kv_at(g, i);
        char *key = gguf_str_dup(kv->key);
        assert_int_equal(gguf_writer_set_value(w2, key, &kv->value), 0);
        free(key);
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        t = gguf_tensor_at(g, i);
        assert_int_equal(gguf_writer_add_tensor(w2, t->name, t->type, t->n_dims, t->ne, t->data), 0);
    }
    /* Streamed this time. */
    assert_int_equal(gguf_writer_begin(w2, p2), 0);
    assert_true(tmp_exists(p2));
    assert_false(exists(p2));
    for (int64_t i = 0; i < gguf_n_tensors(g); i++)
        assert_int_equal(gguf_writer_write_tensor(w2, i, gguf_tensor_at(g, i)->data), 0);
    assert_int_equal(gguf_writer_finish(w2), 0);
    gguf_writer_free(w2);
    gguf_close(g);
    size_t n1, n2;
    uint8_t *b1 = read_all(p, &n1), *b2 = read_all(p2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    free(b1), free(b2);
    unlink(p);
    unlink(p2);
}

static void test_failures_leave_no_file(void **state) {
    (void)state;
    /* A folder that does not exist. */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/missing/out.gguf", g_dir);
    gguf_writer *w = make_writer();
    assert_int_equal(gguf_writer_write_file(w, bad), -1);
    assert_non_null(strstr(err_get(), "cannot create"));
    assert_false(exists(bad));
    gguf_writer_free(w);

    /* Finishing before every tensor is written. */
    const char *p = path_in_dir("short.gguf");
    w = make_writer();
    assert_int_equal(gguf_writer_begin(w, p), 0);
    assert_int_equal(gguf_writer_write_tensor(w, 0, g_f32), 0);
    assert_int_equal(gguf_writer_finish(w), -1);
    assert_non_null(strstr(err_get(), "only 1 of 4 tensors"));
    assert_false(exists(p));
    assert_false(tmp_exists(p));
    gguf_writer_free(w);

    /* Out of order. */
    w = make_writer();
    assert_int_equal(gguf_writer_begin(w, p), 0);
    assert_int_equal(gguf_writer_write_tensor(w, 1, g_q8), -1);
    assert_false(tmp_exists(p));
    gguf_writer_free(w);

    /* An explicit abort, and a writer freed mid-way. */
    w = make_writer();
    assert_int_equal(gguf_writer_begin(w, p), 0);
    gguf_writer_abort(w);
    assert_false(tmp_exists(p));
    assert_int_equal(gguf_writer_begin(w, p), 0);
    gguf_writer_free(w);
    assert_false(tmp_exists(p));
    assert_false(exists(p));

    /* A tensor without data cannot be written in one go. */
    w = gguf_writer_new();
    const int64_t ne[1] = {4};
    assert_int_equal(gguf_writer_add_tensor(w, "x", WT_F32, 1, ne, NULL), 0);
    assert_int_equal(gguf_writer_write_file(w, p), -1);
    assert_false(exists(p));
    gguf_writer_free(w);

    /* An existing output is replaced only by a complete new one. */
    FILE *f = fopen(p, "wb");
    fputs("old", f);
    fclose(f);
    w = make_writer();
    assert_int_equal(gguf_writer_begin(w, p), 0);
    gguf_writer_free(w);
    size_t n;
    uint8_t *old = read_all(p, &n);
    assert_int_equal(n, 3);
    free(old);
    unlink(p);
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_through_reader),
        cmocka_unit_test(test_failures_leave_no_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
