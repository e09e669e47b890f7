/* The server's pure pieces: SSE framing, OpenAI's error object and the
 * status -> type mapping, the Prometheus text of /metrics, the API-key check,
 * UTF-8 repair for JSON strings, and the shapes of response bodies and
 * stream chunks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/auth.h"
#include "server/errors.h"
#include "server/metrics.h"
#include "server/completion_json.h"
#include "server/sse.h"
#include "util/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_sse_framing(void **state) {
    (void)state;
    buf b = {0};
    json_t *j = json_pack("{s:s,s:i}", "text", "line1\nline2", "n", 1);
    assert_int_equal(sse_append_json(&b, j), 0);
    sse_append_done(&b);
    /* the newline inside the value is escaped, so each event is one data line */
    assert_string_equal(b.data, "data: {\"text\":\"line1\\nline2\",\"n\":1}\n\ndata: [DONE]\n\n");
    json_decref(j);
    buf_consume(&b, 6);
    assert_int_equal(strncmp(b.data, "{\"text\"", 7), 0);
    buf_free(&b);
}

/* A prompt that failed because memory ran out is the server's failure (500),
 * even when the prompt code reports it as bad input; err_set clears the mark
 * and err_prefix keeps it. */
static void test_out_of_memory_is_a_server_error(void **state) {
    (void)state;
    api_error e;
    err_oom("tokenizer: out of memory for %d bytes of text", 99);
    err_prefix("cannot tokenize the prompt: ");
    assert_true(err_is_oom());
    api_fail_prompt(&e, -1, "invalid_prompt", "prompt");
    assert_int_equal(e.status, 500);
    assert_string_equal(e.type, "server_error");
    assert_non_null(strstr(e.message, "out of memory for 99 bytes"));
    err_set("cannot tokenize the prompt: bad");
    assert_false(err_is_oom());
    api_fail_prompt(&e, -1, "invalid_prompt", "prompt");
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "prompt");
    err_clear();
}

static void test_error_object(void **state) {
    (void)state;
    api_error e;
    assert_int_equal(api_fail(&e, 400, "invalid_value", "temperature", "bad %d", 5), -1);
    json_t *j = api_error_json(&e);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"error\":{\"code\":\"invalid_value\",\"message\":\"bad 5\",\"param\":\"temperature\","
                           "\"type\":\"invalid_request_error\"}}");
    free(s);
    json_decref(j);
    api_fail(&e, 401, "invalid_api_key", NULL, "no");
    j = api_error_json(&e);
    assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
                        "authentication_error");
    json_decref(j);
    assert_string_equal(api_error_type(404), "invalid_request_error");
    assert_string_equal(api_error_type(413), "invalid_request_error");
    assert_string_equal(api_error_type(503), "server_error");
    /* a message quoting invalid UTF-8 still makes a JSON string */
    api_fail(&e, 400, NULL, "x\xff", "bad \xc3(");
    j = api_error_json(&e);
    assert_non_null(json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    assert_non_null(json_string_value(json_object_get(json_object_get(j, "error"), "param")));
    assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "code")));
    json_decref(j);
}

static void init_histograms(engine_stats *s) {
    hist_init_seconds(&s->ttft);
    hist_init_seconds(&s->tpot);
    hist_init_seconds(&s->e2e);
    hist_init_seconds(&s->queue);
}

/* Every line is a comment or "name{labels} value" / "name value", each
 * sample after its family's # TYPE. */
static void assert_every_line_a_sample(const char *t) {
    char family[128] = "";
    for (const char *p = t; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        if (!strncmp(p, "# TYPE ", 7)) {
            const char *sp = memchr(p + 7, ' ', (size_t)(nl - p - 7));
            assert_non_null(sp);
            snprintf(family, sizeof family, "%.*s", (int)(sp - p - 7), p + 7);
        } else if (*p != '#') {
            assert_non_null(memchr(p, ' ', (size_t)(nl - p)));
            assert_true(family[0] && !strncmp(p, family, strlen(family)));
        }
        p = nl + 1;
    }
}

static void test_metrics_text(void **state) {
    (void)state;
    metrics_model m = {.name = "m\"1", .ready = true};
    m.stats.n_running = 3;
    m.stats.n_waiting = 2;
    m.stats.kv_blocks_total = 100;
    m.stats.kv_blocks_used = 25;
    m.stats.prefix_queries = 50;
    m.stats.prefix_hits = 20;
    m.stats.prompt_tokens = 77;
    init_histograms(&m.stats);
    hist_observe(&m.stats.ttft, 0.003);
    hist_observe(&m.stats.ttft, 1000);
    m.finished[FINISH_ABORT] = 4;
    metrics_input in = {.models = &m, .n_models = 1};
    in.http[2] = 9;
    buf b = {0};
    metrics_render(&b, &in);
    assert_false(b.oom);
    const char *t = b.data;
    assert_non_null(strstr(t, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\\\"1\"} 3\n"));
    assert_non_null(strstr(t, "vllm:num_requests_waiting{model_name=\"m\\\"1\"} 2\n"));
    assert_non_null(strstr(t, "vllm:kv_cache_usage_perc{model_name=\"m\\\"1\"} 0.25\n"));
    assert_non_null(strstr(t, "# TYPE vllm:prefix_cache_hits_total counter\n"));
    assert_non_null(strstr(t, "vllm:prompt_tokens_total{model_name=\"m\\\"1\"} 77\n"));
    assert_non_null(strstr(t, "vllm:request_success_total{model_name=\"m\\\"1\",finished_reason=\"abort\"} 4\n"));
    assert_non_null(strstr(t, "# TYPE vllm:time_to_first_token_seconds histogram\n"));
    /* cumulative buckets: 0.003 is under 0.005; the +Inf bucket counts both */
    assert_non_null(strstr(t, "vllm:time_to_first_token_seconds_bucket{model_name=\"m\\\"1\",le=\"0.001\"} 0\n"));
    assert_non_null(strstr(t, "vllm:time_to_first_token_seconds_bucket{model_name=\"m\\\"1\",le=\"0.005\"} 1\n"));
    assert_non_null(strstr(t, "vllm:time_to_first_token_seconds_bucket{model_name=\"m\\\"1\",le=\"300\"} 1\n"));
    assert_non_null(strstr(t, "vllm:time_to_first_token_seconds_bucket{model_name=\"m\\\"1\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(t, "vllm:time_to_first_token_seconds_count{model_name=\"m\\\"1\"} 2\n"));
    assert_non_null(strstr(t, "vllm:e2e_request_latency_seconds_count{model_name=\"m\\\"1\"} 0\n"));
    /* the server's own counters carry no model_name */
    assert_non_null(strstr(t, "\ncllm:http_responses_total{code=\"2xx\"} 9\n"));
    assert_every_line_a_sample(t);
    buf_free(&b);
}

static size_t count_of(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Two models: each family is announced once, with one sample per model told
 * apart by model_name; the response cache counts per model, its size once. */
static void test_metrics_text_two_models(void **state) {
    (void)state;
    metrics_model m[2] = {{.name = "llama", .ready = true, .cache_hits = 5, .cache_misses = 6},
                          {.name = "qwen", .ready = false, .cache_hits = 7, .cache_misses = 8}};
    m[0].stats.n_running = 1;
    m[1].stats.n_running = 2;
    m[0].stats.generation_tokens = 10;
    m[1].stats.generation_tokens = 20;
    m[0].finished[FINISH_LENGTH] = 3;
    m[1].finished[FINISH_STOP] = 4;
    init_histograms(&m[0].stats);
    init_histograms(&m[1].stats);
    hist_observe(&m[1].stats.e2e, 0.5);
    metrics_input in = {.models = m, .n_models = 2, .has_response_cache = true, .response_cache_entries = 11};
    buf b = {0};
    metrics_render(&b, &in);
    assert_false(b.oom);
    const char *t = b.data;
    assert_int_equal(count_of(t, "# TYPE vllm:num_requests_running gauge\n"), 1);
    assert_non_null(strstr(t, "vllm:num_requests_running{model_name=\"llama\"} 1\n"
                              "vllm:num_requests_running{model_name=\"qwen\"} 2\n"));
    assert_non_null(strstr(t, "vllm:generation_tokens_total{model_name=\"qwen\"} 20\n"));
    assert_non_null(strstr(t, "cllm:server_ready{model_name=\"llama\"} 1\ncllm:server_ready{model_name=\"qwen\"} 0\n"));
    assert_non_null(strstr(t, "vllm:request_success_total{model_name=\"llama\",finished_reason=\"length\"} 3\n"));
    assert_non_null(strstr(t, "vllm:request_success_total{model_name=\"qwen\",finished_reason=\"stop\"} 4\n"));
    assert_non_null(strstr(t, "vllm:request_success_total{model_name=\"qwen\",finished_reason=\"length\"} 0\n"));
    assert_non_null(strstr(t, "vllm:e2e_request_latency_seconds_count{model_name=\"llama\"} 0\n"));
    assert_non_null(strstr(t, "vllm:e2e_request_latency_seconds_count{model_name=\"qwen\"} 1\n"));
    assert_int_equal(count_of(t, "# TYPE vllm:e2e_request_latency_seconds histogram\n"), 1);
    assert_non_null(strstr(t, "cllm:response_cache_hits_total{model_name=\"qwen\"} 7\n"));
    assert_non_null(strstr(t, "cllm:response_cache_misses_total{model_name=\"llama\"} 6\n"));
    assert_non_null(strstr(t, "\ncllm:response_cache_entries 11\n"));
    assert_int_equal(count_of(t, "cllm:http_responses_total{code="), 4);
    assert_every_line_a_sample(t);
    buf_free(&b);
}

/* Writes text to a fresh temporary file and returns its key, or NULL. */
static char *key_of_file(const char *text) {
    char path[] = "/tmp/cllm_key_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char *key = auth_key_from_file(path);
    unlink(path);
    return key;
}

static void test_auth_key_file(void **state) {
    (void)state;
    const char *good[][2] = {{"sk-1\n", "sk-1"}, {"sk-1", "sk-1"}, {"  sk-1 \r\n", "sk-1"},
                             {"sk-1\nsecond line\n", "sk-1"}, {"a b\n", "a b"}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char *key = key_of_file(good[i][0]);
        assert_non_null(key);
        assert_string_equal(key, good[i][1]);
        free(key);
    }
    const char *bad[] = {"", "\n", "   \nsk-1\n", "sk\x01-1\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_null(key_of_file(bad[i]));
    assert_null(auth_key_from_file("/nonexistent/cllm/key"));
}

static void test_auth(void **state) {
    (void)state;
    assert_true(auth_check("Bearer sk-1", "sk-1"));
    assert_true(auth_check("bearer   sk-1  ", "sk-1"));
    assert_false(auth_check("Bearer sk-2", "sk-1"));
    assert_false(auth_check("Bearer sk-", "sk-1"));
    assert_false(auth_check("Bearer sk-11", "sk-1"));
    assert_false(auth_check("Bearer ", "sk-1"));
    assert_false(auth_check("sk-1", "sk-1"));
    assert_false(auth_check("Basic sk-1", "sk-1"));
    assert_false(auth_check("Bearersk-1", "sk-1"));
    assert_false(auth_check(NULL, "sk-1"));
    assert_true(auth_check(NULL, NULL));
    assert_true(auth_check(NULL, ""));
    assert_true(auth_equal_ct("abc", 3, "abc", 3));
    assert_false(auth_equal_ct("", 0, "abc", 3));
    assert_false(auth_equal_ct("abcabc", 6, "abc", 3));
    assert_true(auth_path_protected("/v1/chat/completions", false));
    assert_true(auth_path_protected("/v1/models", false));
    assert_true(auth_path_protected("/tokenize", false));
    assert_false(auth_path_protected("/health", false));
    assert_false(auth_path_protected("/metrics", false));
    assert_true(auth_path_protected("/metrics", true));
    assert_false(auth_path_protected("/health", true));
}

static void test_utf8(void **state) {
    (void)state;
    buf b = {0};
    buf_append_utf8(&b, "a\xffz\xe4\xb8", 5);
    assert_string_equal(b.data, "a\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd");
    assert_int_equal(utf8_count(b.data, b.len), 5);
    buf_free(&b);
    json_t *s = resp_string("x\x80y", 3);
    assert_string_equal(json_string_value(s), "x\xef\xbf\xbdy");
    json_decref(s);
}

static void test_response_shapes(void **state) {
    (void)state;
    resp_ctx c = {.kind = API_CHAT, .id = "chatcmpl-1", .model = "m", .created = 123};
    json_t *first = resp_chunk(&c, json_pack("[o]", resp_chunk_choice(&c, 0, "", 0, true, NULL, NULL)), true);
    char *s = json_dumps(first, JSON_COMPACT);
    assert_string_equal(s, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":123,\"model\":\"m\","
                           "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                           "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}");
    free(s);
    json_decref(first);
    json_t *last = resp_chunk(&c, json_pack("[o]", resp_chunk_choice(&c, 2, "", 0, false, NULL, "stop")), false);
    s = json_dumps(last, JSON_COMPACT);
    assert_string_equal(s, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":123,\"model\":\"m\","
                           "\"choices\":[{\"index\":2,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}");
    free(s);
    json_decref(last);

    resp_ctx t = {.kind = API_COMPLETIONS, .id = "cmpl-1", .model = "m", .created = 5};
    gen_choice ch = {.finished = true, .reason = FINISH_LENGTH};
    buf_puts(&ch.text, " world");
    json_t *choice = resp_choice(&t, &ch, 1, "hello", 5, 5);
    json_t *body = resp_body(&t, json_pack("[o]", choice), json_pack("{s:i}", "prompt_tokens", 1));
    s = json_dumps(body, JSON_COMPACT);
    assert_string_equal(s, "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":5,\"model\":\"m\",\"choices\":"
                           "[{\"index\":1,\"text\":\"hello world\",\"logprobs\":null,\"finish_reason\":\"length\"}],"
                           "\"usage\":{\"prompt_tokens\":1}}");
    free(s);
    json_decref(body);
    buf_free(&ch.text);
    assert_string_equal(resp_finish_name(FINISH_STOP), "stop");
    assert_null(resp_finish_name(FINISH_NONE));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_framing),  cmocka_unit_test(test_error_object),
        cmocka_unit_test(test_out_of_memory_is_a_server_error), cmocka_unit_test(test_metrics_text),
        cmocka_unit_test(test_metrics_text_two_models),
        cmocka_unit_test(test_auth),         cmocka_unit_test(test_auth_key_file),         cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_response_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
