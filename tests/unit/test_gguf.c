/* GGUF reader: every value type round-trips, nested arrays parse, tensor data
 * is found at its aligned offset, and every malformed image (each truncation,
 * bad magic, bad version, tensor past the end, absurd counts, random byte
 * corruption) is refused with a message instead of crashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/gguf.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_key(buf *b, const char *k, gguf_type t) {
    put_str(b, k);
    put_u32(b, t);
}

/* A file with one of each value type, a nested array, and two tensors. */
static buf make_image(uint32_t version) {
    buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, version);
    put_u64(&b, 2);  /* tensors */
    put_u64(&b, 14); /* kv */
    uint8_t u8 = 200; int8_t i8 = -100; uint16_t u16 = 60000; int16_t i16 = -30000;
    int32_t i32 = -2000000000; float f32 = 1.5f; uint8_t bl = 1; int64_t i64 = -5; double f64 = 2.25;
    put_key(&b, "t.u8", GGUF_TYPE_UINT8); put(&b, &u8, 1);
    put_key(&b, "t.i8", GGUF_TYPE_INT8); put(&b, &i8, 1);
    put_key(&b, "t.u16", GGUF_TYPE_UINT16); put(&b, &u16, 2);
    put_key(&b, "t.i16", GGUF_TYPE_INT16); put(&b, &i16, 2);
    put_key(&b, "t.u32", GGUF_TYPE_UINT32); put_u32(&b, 4000000000u);
    put_key(&b, "t.i32", GGUF_TYPE_INT32); put(&b, &i32, 4);
    put_key(&b, "t.f32", GGUF_TYPE_FLOAT32); put(&b, &f32, 4);
    put_key(&b, "t.bool", GGUF_TYPE_BOOL); put(&b, &bl, 1);
    put_key(&b, "t.str", GGUF_TYPE_STRING); put_str(&b, "hello");
    put_key(&b, "t.u64", GGUF_TYPE_UINT64); put_u64(&b, 1ull << 40);
    put_key(&b, "t.i64", GGUF_TYPE_INT64); put(&b, &i64, 8);
    put_key(&b, "t.f64", GGUF_TYPE_FLOAT64); put(&b, &f64, 8);
    put_key(&b, "t.strs", GGUF_TYPE_ARRAY); put_u32(&b, GGUF_TYPE_STRING); put_u64(&b, 3);
    put_str(&b, "a"); put_str(&b, ""); put_str(&b, "ccc");
    /* [[1, 2], [3]] as int32 arrays inside an array */
    put_key(&b, "t.nested", GGUF_TYPE_ARRAY); put_u32(&b, GGUF_TYPE_ARRAY); put_u64(&b, 2);
    put_u32(&b, GGUF_TYPE_INT32); put_u64(&b, 2); put_u32(&b, 1); put_u32(&b, 2);
    put_u32(&b, GGUF_TYPE_INT32); put_u64(&b, 1); put_u32(&b, 3);
    /* tensors: a 4x2 F32 and an 8-element F16 */
    put_str(&b, "w.f32"); put_u32(&b, 2); put_u64(&b, 4); put_u64(&b, 2); put_u32(&b, 0); put_u64(&b, 0);
    put_str(&b, "w.f16"); put_u32(&b, 1); put_u64(&b, 8); put_u32(&b, 1); put_u64(&b, 32);
    while (b.n % 32) put(&b, "", 1);
    for (int i = 0; i < 8; i++) { float v = (float)i; put(&b, &v, 4); }
    for (int i = 0; i < 8; i++) { uint16_t h = 0x3c00; put(&b, &h, 2); }
    return b;
}

static void test_all_value_types(void **state) {
    (void)state;
    buf b = make_image(3);
    gguf_ctx *g = gguf_open_memory(b.p, b.n, "mem");
    assert_non_null(g);
    assert_int_equal(gguf_version(g), 3);
    assert_int_equal(gguf_n_kv(g), 14);
    uint32_t u32; int64_t i64; float f; bool bl; gguf_str s;
    assert_true(gguf_get_u32(g, "t.u8", &u32)); assert_int_equal(u32, 200);
    assert_true(gguf_get_i64(g, "t.i8", &i64)); assert_int_equal(i64, -100);
    assert_true(gguf_get_u32(g, "t.u16", &u32)); assert_int_equal(u32, 60000);
    assert_true(gguf_get_i64(g, "t.i16", &i64)); assert_int_equal(i64, -30000);
    assert_true(gguf_get_u32(g, "t.u32", &u32)); assert_int_equal(u32, 4000000000u);
    assert_true(gguf_get_i64(g, "t.i32", &i64)); assert_int_equal(i64, -2000000000);
    assert_false(gguf_get_u32(g, "t.i32", &u32)); /* negative does not convert */
    assert_true(gguf_get_f32(g, "t.f32", &f)); assert_true(f == 1.5f);
    assert_true(gguf_get_bool(g, "t.bool", &bl)); assert_true(bl);
    assert_true(gguf_get_str(g, "t.str", &s)); assert_true(gguf_str_eq(s, "hello"));
    assert_true(gguf_get_i64(g, "t.u64", &i64)); assert_int_equal(i64, 1ll << 40);
    assert_false(gguf_get_u32(g, "t.u64", &u32)); /* out of range */
    assert_true(gguf_get_i64(g, "t.i64", &i64)); assert_int_equal(i64, -5);
    assert_true(gguf_get_f32(g, "t.f64", &f)); assert_true(f == 2.25f);
    const gguf_value *a = gguf_get_arr(g, "t.strs", GGUF_TYPE_STRING);
    assert_non_null(a);
    assert_int_equal(a->arr.n, 3);
    assert_true(gguf_str_eq(a->arr.strs[2], "ccc"));
    assert_int_equal(a->arr.strs[1].len, 0);
    const gguf_value *nested = gguf_get_arr(g, "t.nested", GGUF_TYPE_ARRAY);
    assert_non_null(nested);
    assert_int_equal(nested->arr.n, 2);
    assert_int_equal(nested->arr.items[0].arr.n, 2);
    assert_true(gguf_arr_num(&nested->arr.items[0], 1) == 2);
    assert_true(gguf_arr_num(&nested->arr.items[1], 0) == 3);
    assert_null(gguf_find(g, "missing"));

    assert_int_equal(gguf_n_tensors(g), 2);
    const gguf_tensor_info *t = gguf_find_tensor(g, "w.f32");
    assert_non_null(t);
    assert_int_equal(t->ne[0], 4);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->nbytes, 32);
    float v;
    memcpy(&v, (const uint8_t *)t->data + 4 * 7, 4);
    assert_true(v == 7.0f);
    t = gguf_find_tensor(g, "w.f16");
    assert_int_equal(t->nbytes, 16);
    assert_int_equal(((const uint8_t *)t->data - b.p) % 32, 0);
    gguf_close(g);
    free(b.p);
}

static void test_version2_accepted(void **state) {
    (void)state;
    buf b = make_image(2);
    gguf_ctx *g = gguf_open_memory(b.p, b.n, "mem");
    assert_non_null(g);
    assert_int_equal(gguf_version(g), 2);
    assert_int_equal(gguf_n_kv(g), 14);
    assert_int_equal(gguf_n_tensors(g), 2);
    gguf_close(g);
    free(b.p);
}

static void expect_error(const uint8_t *p, size_t n, const char *needle) {
    err_clear();
    gguf_ctx *g = gguf_open_memory(p, n, "bad");
    if (g) fail_msg("image of %zu bytes was accepted", n);
    if (needle && !strstr(err_get(), needle)) fail_msg("error '%s' does not mention '%s'", err_get(), needle);
}

static void test_every_truncation_is_refused(void **state) {
    (void)state;
    buf b = make_image(3);
    for (size_t n = 0; n < b.n; n++) {
        /* Copy into an exact-size allocation so ASan sees any over-read. */
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, b.p, n);
        expect_error(p, n, NULL);
        free(p);
    }
    free(b.p);
}

static void test_bad_header(void **state) {
    (void)state;
    buf b = make_image(3);
    b.p[0] = 'X';
    expect_error(b.p, b.n, "magic");
    b.p[0] = 'G';
    b.p[4] = 7;
    expect_error(b.p, b.n, "version 7");
    free(b.p);
}

static void test_absurd_counts(void **state) {
    (void)state;
    buf b = make_image(3);
    uint64_t huge = 1ull << 60;
    memcpy(b.p + 8, &huge, 8); /* tensor count */
    expect_error(b.p, b.n, "tensors");
    free(b.p);
    b = make_image(3);
    memcpy(b.p + 16, &huge, 8); /* kv count */
    expect_error(b.p, b.n, "metadata");
    free(b.p);
}

static void test_tensor_past_end(void **state) {
    (void)state;
    buf b = make_image(3);
    /* Drop the last 4 bytes of tensor data: w.f16 now ends past the file. */
    expect_error(b.p, b.n - 4, "past end of file");
    free(b.p);
}

/* Whether [q, q + len) lies inside the image [p, p + n). */
static bool inside(const uint8_t *p, size_t n, const void *q, uint64_t len) {
    const uint8_t *at = q;
    return at >= p && at <= p + n && len <= (uint64_t)(p + n - at);
}

/* An accepted image is one the reader vouches for: every key, string and
 * tensor it hands out lies inside the image, and tensor data is aligned. */
static void expect_sound(const gguf_ctx *g, const uint8_t *p, size_t n) {
    assert_true(gguf_version(g) == 2 || gguf_version(g) == 3);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const gguf_kv *kv = gguf_kv_at(g, i);
        assert_true(inside(p, n, kv->key.ptr, kv->key.len));
        if (kv->value.type == GGUF_TYPE_STRING) assert_true(inside(p, n, kv->value.s.ptr, kv->value.s.len));
        if (kv->value.type == GGUF_TYPE_ARRAY && kv->value.arr.type == GGUF_TYPE_STRING)
            for (uint64_t k = 0; k < kv->value.arr.n; k++)
                assert_true(inside(p, n, kv->value.arr.strs[k].ptr, kv->value.arr.strs[k].len));
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(g, i);
        assert_true(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS);
        assert_true(inside(p, n, t->data, t->nbytes));
        assert_int_equal(((const uint8_t *)t->data - p) % gguf_alignment(g), 0);
    }
}

static void test_random_corruption_never_crashes(void **state) {
    (void)state;
    buf b = make_image(3);
    uint8_t *p = malloc(b.n);
    uint64_t x = 12345;
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(p, b.p, b.n);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            p[(x >> 33) % b.n] ^= (uint8_t)(1u << ((x >> 20) % 8));
        }
        err_clear();
        gguf_ctx *g = gguf_open_memory(p, b.n, "fuzz");
        if (g) {
            expect_sound(g, p, b.n);
            accepted++;
        } else {
            /* refused with a message naming the image and saying why */
            if (strncmp(err_get(), "fuzz: ", 6) || strlen(err_get()) <= 6)
                fail_msg("refused with the message '%s'", err_get());
            refused++;
        }
        gguf_close(g); /* accepted or not, nothing may crash or leak */
    }
    /* both outcomes happen: flips in tensor data keep the image valid, most others do not */
    assert_true(accepted > 0);
    assert_true(refused > 0);
    free(p);
    free(b.p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_value_types),
        cmocka_unit_test(test_version2_accepted),
        cmocka_unit_test(test_every_truncation_is_refused),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_absurd_counts),
        cmocka_unit_test(test_tensor_past_end),
        cmocka_unit_test(test_random_corruption_never_crashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
