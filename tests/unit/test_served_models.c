/* Several models behind one server: the table of served models (names that
 * clash are refused; a served name wins over another model's alias; a body
 * without "model" goes to the first; an unknown name is a 404 listing every
 * model) and the split of one KV budget by KV bytes per token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kv/kv_share.h"
#include "server/served_models.h"
#include "util/error.h"

#include <string.h>

static const served_model_config TWO[] = {{.name = "llama", .path = "/m/qwen.gguf"},
                                          {.name = "qwen.gguf", .path = "/m/other.gguf"}};

static void test_names_must_differ(void **state) {
    (void)state;
    served_models ms;
    assert_int_equal(served_models_init(&ms, TWO, 0, NULL, 0), -1);
    const served_model_config same[] = {{.name = "a", .path = "x"}, {.name = "a", .path = "y"}};
    assert_int_equal(served_models_init(&ms, same, 2, NULL, 0), -1);
    assert_non_null(strstr(err_get(), "two models are served as 'a'"));
    const served_model_config unnamed[] = {{.name = "", .path = "x"}};
    assert_int_equal(served_models_init(&ms, unnamed, 1, NULL, 0), -1);
}

static void test_find_prefers_served_names(void **state) {
    (void)state;
    served_models ms;
    assert_int_equal(served_models_init(&ms, TWO, 2, NULL, 0), 0);
    assert_ptr_equal(served_models_find(&ms, "llama"), &ms.v[0]);
    /* "qwen.gguf" is model 0's file name and model 1's served name: the served name wins */
    assert_ptr_equal(served_models_find(&ms, "qwen.gguf"), &ms.v[1]);
    assert_ptr_equal(served_models_find(&ms, "/m/qwen.gguf"), &ms.v[0]);
    assert_ptr_equal(served_models_find(&ms, "other.gguf"), &ms.v[1]);
    assert_null(served_models_find(&ms, "gpt-4"));
    assert_null(served_models_find(&ms, ""));
    served_models_free(&ms);
}

static served_model *route_text(const served_models *ms, const char *body, api_error *e) {
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    served_model *sm = served_models_route(ms, j, e);
    json_decref(j);
    return sm;
}

static void test_route_by_the_model_field(void **state) {
    (void)state;
    served_models ms;
    assert_int_equal(served_models_init(&ms, TWO, 2, NULL, 0), 0);
    api_error e = {0};
    assert_ptr_equal(route_text(&ms, "{\"prompt\": \"hi\"}", &e), &ms.v[0]);
    assert_ptr_equal(route_text(&ms, "{\"model\": null}", &e), &ms.v[0]);
    assert_ptr_equal(route_text(&ms, "{\"model\": 3}", &e), &ms.v[0]); /* the endpoint's 400 */
    assert_ptr_equal(route_text(&ms, "[1]", &e), &ms.v[0]);
    assert_ptr_equal(route_text(&ms, "{\"model\": \"other.gguf\"}", &e), &ms.v[1]);
    assert_null(route_text(&ms, "{\"model\": \"gpt-4\"}", &e));
    assert_int_equal(e.status, 404);
    assert_string_equal(e.code, "model_not_found");
    assert_string_equal(e.param, "model");
    assert_string_equal(e.message, "The model 'gpt-4' does not exist. Available models: 'llama', 'qwen.gguf'");
    served_models_free(&ms);

    const served_model_config one[] = {{.name = "tiny", .path = NULL}};
    assert_int_equal(served_models_init(&ms, one, 1, NULL, 0), 0);
    assert_null(route_text(&ms, "{\"model\": \"x\"}", &e));
    assert_string_equal(e.message, "The model 'x' does not exist. Available model: 'tiny'");
    served_models_free(&ms);
}

static void test_kv_share_by_bytes_per_token(void **state) {
    (void)state;
    size_t out[3];
    const size_t bytes[] = {256, 768};
    kv_share_split((size_t)64 << 20, bytes, 2, out);
    assert_int_equal(out[0], (size_t)16 << 20);
    assert_int_equal(out[1], (size_t)48 << 20);
    /* shares that do not divide evenly are rounded down, never past the total */
    const size_t odd[] = {1, 1, 1};
    kv_share_split(100, odd, 3, out);
    assert_int_equal(out[0], 33);
    assert_int_equal(out[0] + out[1] + out[2], 99);
    const size_t big[] = {(size_t)1 << 40, 3};
    kv_share_split(SIZE_MAX / 2, big, 2, out);
    assert_true(out[0] + out[1] <= SIZE_MAX / 2); /* no overflow on the way */
    assert_true(out[1] >= 25165820 && out[1] <= 25165824); /* (2^63 - 1) * 3 / (2^40 + 3) = 25165823.99... */
    const size_t zero[] = {0, 0};
    kv_share_split(10, zero, 2, out);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], 5);
    const size_t one[] = {512};
    kv_share_split(12345, one, 1, out);
    assert_int_equal(out[0], 12345);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_must_differ),
        cmocka_unit_test(test_find_prefers_served_names),
        cmocka_unit_test(test_route_by_the_model_field),
        cmocka_unit_test(test_kv_share_by_bytes_per_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
