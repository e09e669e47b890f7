/* The I/O-free parts of `cllm bench serve`: the SSE parser (events split at
 * every byte, CRLF/CR/LF line ends, comments, multi-line data, an event
 * without its blank line), the reading of OpenAI stream chunks (text, chat
 * deltas, usage, [DONE], errors), percentiles as numpy computes them, the
 * summary's arithmetic, Poisson arrivals, length jitter, and the datasets'
 * prompt fitting and jsonl reading against a toy tokenizer defined here in
 * place of the HTTP one. The .c files are compiled into this test directly,
 * so the toy tokenizer stands in for bench/serve_http.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loadgen/serve_data.c"
#include "loadgen/serve_sse.c"
#include "loadgen/serve_stats.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a toy server tokenizer: one token per space-separated word, two for
 * a word holding 'x'; ids decode to "w<id>" or, for ids divisible by 7,
 * "x<id>" ---- */

static int toy_calls;

int bench_tok_encode(bench_tok *t, const char *text, bool add_special, int32_t **ids) {
    (void)t;
    toy_calls++;
    int n = add_special ? 1 : 0, cap = 16;
    int32_t *out = malloc((size_t)cap * sizeof *out);
    if (add_special) out[0] = 1;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *w = p;
        while (*p && *p != ' ') p++;
        const int k = memchr(w, 'x', (size_t)(p - w)) ? 2 : 1;
        for (int i = 0; i < k; i++) {
            if (n == cap) out = realloc(out, (size_t)(cap *= 2) * sizeof *out);
            out[n++] = 100 + (int32_t)(p - w);
        }
    }
    *ids = out;
    return n;
}

char *bench_tok_decode(bench_tok *t, const int32_t *ids, int n) {
    (void)t;
    toy_calls++;
    char *s = calloc((size_t)n * 12 + 1, 1);
    for (int i = 0; i < n; i++) sprintf(s + strlen(s), "%s%c%d", i ? " " : "", ids[i] % 7 ? 'w' : 'x', ids[i]);
    return s;
}

/* ---- SSE ---- */

typedef struct {
    char events[16][256];
    int n;
} collected;

static void collect(void *user, const char *data, size_t len) {
    collected *c = user;
    assert_true(c->n < 16);
    assert_int_equal(strlen(data), len); /* NUL-terminated at len */
    memcpy(c->events[c->n], data, len);
    c->events[c->n][len] = 0;
    c->n++;
}

static const char STREAM[] = "data: {\"a\":1}\n\n"
                             ": keep-alive\n\n"
                             "event: message\r\ndata: two\r\ndata:lines\r\n\r\n"
                             "id: 7\rdata: cr only\r\r"
                             "data\n\n"
                             "data: [DONE]\n\n";
static const char *const EXPECTED[] = {"{\"a\":1}", "two\nlines", "cr only", "", "[DONE]"};

static void assert_events(const collected *c) {
    assert_int_equal(c->n, 5);
    for (int i = 0; i < 5; i++) assert_string_equal(c->events[i], EXPECTED[i]);
}

static void test_sse_whole_stream(void **state) {
    (void)state;
    collected c = {0};
    sse_parser p;
    sse_init(&p, collect, &c);
    sse_feed(&p, STREAM, sizeof STREAM - 1);
    sse_finish(&p);
    assert_events(&c);
    sse_free(&p);
}

static void test_sse_split_at_every_byte(void **state) {
    (void)state;
    const size_t n = sizeof STREAM - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        collected c = {0};
        sse_parser p;
        sse_init(&p, collect, &c);
        sse_feed(&p, STREAM, cut);
        sse_feed(&p, STREAM + cut, n - cut);
        sse_finish(&p);
        assert_events(&c);
        sse_free(&p);
    }
    collected c = {0};
    sse_parser p;
    sse_init(&p, collect, &c);
    for (size_t i = 0; i < n; i++) sse_feed(&p, STREAM + i, 1);
    sse_finish(&p);
    assert_events(&c);
    sse_free(&p);
}

static void test_sse_event_without_blank_line_is_delivered_at_end(void **state) {
    (void)state;
    collected c = {0};
    sse_parser p;
    sse_init(&p, collect, &c);
    sse_feed(&p, "data: one\n\ndata: last", 21);
    assert_int_equal(c.n, 1);
    sse_finish(&p);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.events[1], "last");
    sse_finish(&p); /* nothing more */
    assert_int_equal(c.n, 2);
    sse_free(&p);
}

static void count_len(void *user, const char *data, size_t len) {
    (void)data;
    *(size_t *)user = len;
}

static void test_sse_long_event(void **state) {
    (void)state;
    static char big[100000];
    memset(big, 'z', sizeof big);
    size_t got = 0;
    sse_parser p;
    sse_init(&p, count_len, &got);
    sse_feed(&p, "data: ", 6);
    for (size_t i = 0; i < sizeof big; i += 999) sse_feed(&p, big + i, i + 999 < sizeof big ? 999 : sizeof big - i);
    sse_feed(&p, "\n\n", 2);
    assert_int_equal(got, sizeof big);
    sse_free(&p);
}

/* ---- stream chunks ---- */

static void apply(bench_stream *s, const char *data, double t) { bench_chunk_apply(s, data, strlen(data), t); }

static void test_chunks_completions(void **state) {
    (void)state;
    bench_stream s;
    bench_stream_init(&s);
    s.t_start = 1.0;
    apply(&s, "{\"choices\":[{\"index\":0,\"text\":\" Hello\",\"finish_reason\":null}]}", 1.5);
    apply(&s, "{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}", 1.6); /* no text: no token */
    apply(&s, "{\"choices\":[{\"index\":0,\"text\":\" world\",\"finish_reason\":null}]}", 1.75);
    apply(&s, "{\"choices\":[{\"index\":0,\"text\":\"!\",\"finish_reason\":\"length\"}]}", 2.0);
    assert_false(bench_stream_ok(&s) && !s.finished);
    apply(&s, "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}", 2.0);
    apply(&s, " [DONE] ", 2.01);
    assert_true(bench_stream_ok(&s));
    assert_int_equal(s.n_text_chunks, 3);
    assert_true(s.t_first == 1.5);
    assert_int_equal(s.n_itl, 2);
    assert_true(fabs(s.itl[0] - 0.25) < 1e-12 && fabs(s.itl[1] - 0.25) < 1e-12);
    assert_int_equal(s.prompt_tokens, 12);
    assert_int_equal(s.completion_tokens, 3);
    assert_true(s.done && s.finished);
    bench_stream_free(&s);
}

static void test_chunks_chat_role_chunk_is_not_a_token(void **state) {
    (void)state;
    bench_stream s;
    bench_stream_init(&s);
    apply(&s, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", 0.1);
    apply(&s, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}", 0.1);
    assert_int_equal(s.n_text_chunks, 0);
    apply(&s, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}", 0.5);
    apply(&s, "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}", 0.6);
    assert_int_equal(s.n_text_chunks, 1);
    assert_true(s.t_first == 0.5);
    assert_true(bench_stream_ok(&s)); /* finish_reason without [DONE] is enough */
    assert_int_equal(s.prompt_tokens, -1);
    bench_stream_free(&s);
}

static void test_chunks_errors(void **state) {
    (void)state;
    bench_stream s;
    bench_stream_init(&s);
    apply(&s, "{\"choices\":[{\"text\":\"a\"}]}", 0.1);
    apply(&s, "{\"error\":{\"message\":\"engine failed\",\"code\":500}}", 0.2);
    apply(&s, "[DONE]", 0.3);
    assert_false(bench_stream_ok(&s));
    assert_non_null(strstr(s.error, "engine failed"));
    bench_stream_free(&s);

    bench_stream_init(&s);
    apply(&s, "{\"choices\":[{\"text\":\"a\"}]", 0.1); /* truncated JSON */
    assert_non_null(s.error);
    assert_non_null(strstr(s.error, "unreadable"));
    bench_stream_free(&s);

    bench_stream_init(&s);
    apply(&s, "{\"error\":\"plain string\"}", 0.1);
    assert_non_null(strstr(s.error, "plain string"));
    bench_stream_fail(&s, "second %d", 2); /* the first error stays */
    assert_null(strstr(s.error, "second"));
    bench_stream_free(&s);

    bench_stream_init(&s);
    apply(&s, "[DONE]", 0.1); /* finished but no text */
    assert_false(bench_stream_ok(&s));
    bench_stream_free(&s);
}

/* ---- statistics ---- */

static void test_percentile_matches_numpy(void **state) {
    (void)state;
    const double v[] = {4, 1, 3, 2};
    assert_true(fabs(bench_percentile(v, 4, 50) - 2.5) < 1e-12);
    assert_true(fabs(bench_percentile(v, 4, 90) - 3.7) < 1e-12);
    assert_true(fabs(bench_percentile(v, 4, 99) - 3.97) < 1e-12);
    assert_true(bench_percentile(v, 4, 0) == 1 && bench_percentile(v, 4, 100) == 4);
    assert_true(v[0] == 4); /* input untouched */
    const double one[] = {7};
    assert_true(bench_percentile(one, 1, 99) == 7);
    assert_true(bench_percentile(one, 0, 50) == 0);
    const double w[] = {2, 4, 4, 4, 5, 5, 7, 9};
    bench_dist d = bench_distribution(w, 8);
    assert_true(fabs(d.mean - 5) < 1e-12 && fabs(d.std - 2) < 1e-12 && fabs(d.median - 4.5) < 1e-12);
    assert_true(fabs(d.p90 - 7.6) < 1e-12 && fabs(d.p99 - 8.86) < 1e-12);
}

static void test_summary(void **state) {
    (void)state;
    const double itl0[] = {0.1, 0.1, 0.1}, itl1[] = {0.2};
    const bench_req reqs[] = {
        {.ok = true, .start = 0, .ttft = 0.5, .e2el = 0.8, .itl = itl0, .n_itl = 3, .input_tokens = 10,
         .output_tokens = 4},
        {.ok = true, .start = 0.2, .ttft = 0.3, .e2el = 0.5, .itl = itl1, .n_itl = 1, .input_tokens = 20,
         .output_tokens = 2},
        {.ok = false, .error = "HTTP 500", .start = 0.3, .e2el = 0.01, .input_tokens = 99, .output_tokens = 0},
        {.ok = true, .start = 1.5, .ttft = 0.1, .e2el = 0.1, .itl = NULL, .n_itl = 0, .input_tokens = 5,
         .output_tokens = 1},
    };
    bench_summary s;
    assert_int_equal(bench_summarize(reqs, 4, 2.0, &s), 0);
    assert_int_equal(s.completed, 3);
    assert_int_equal(s.failed, 1);
    assert_int_equal(s.total_input, 35);
    assert_int_equal(s.total_output, 7);
    assert_true(fabs(s.request_throughput - 1.5) < 1e-12);
    assert_true(fabs(s.output_throughput - 3.5) < 1e-12);
    assert_true(fabs(s.total_throughput - 21) < 1e-12);
    /* TPOT: (0.8-0.5)/3 = 100 ms and (0.5-0.3)/1 = 200 ms; the 1-token request has none */
    assert_true(fabs(s.tpot.mean - 150) < 1e-9);
    assert_true(fabs(s.ttft.mean - 300) < 1e-9);
    assert_true(fabs(s.itl.mean - 125) < 1e-9); /* (100*3 + 200) / 4 */
    assert_true(fabs(s.e2el.median - 500) < 1e-9);
    assert_int_equal(s.max_concurrent, 3); /* 0..0.8, 0.2..0.7, 0.3..0.31 overlap */
    /* tokens by second: [0,1): 4 + 2, [1,2): 1 */
    assert_true(fabs(s.max_output_tokens_per_s - 6) < 1e-9);
    json_t *j = bench_result_json(&s, reqs, 4);
    assert_int_equal(json_integer_value(json_object_get(j, "completed")), 3);
    assert_int_equal(json_array_size(json_object_get(j, "itls")), 4);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "errors"), 2)), "HTTP 500");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "output_lens"), 2)), 0);
    assert_non_null(json_object_get(j, "p90_itl_ms"));
    json_decref(j);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bench_print_report(f, &s, "t");
    fclose(f);
    assert_non_null(strstr(buf, "Successful requests:                     3\n"));
    assert_non_null(strstr(buf, "Mean TPOT (ms):                          150.00\n"));
    free(buf);
}

static void test_summary_all_failed(void **state) {
    (void)state;
    const bench_req reqs[] = {{.ok = false, .error = "x"}, {.ok = false, .error = "y"}};
    bench_summary s;
    assert_int_equal(bench_summarize(reqs, 2, 0.5, &s), 0);
    assert_int_equal(s.completed, 0);
    assert_int_equal(s.failed, 2);
    assert_true(s.ttft.mean == 0 && s.output_throughput == 0);
}

/* ---- arrivals and lengths ---- */

static void test_poisson_arrivals(void **state) {
    (void)state;
    enum { N = 20000 };
    static double a[N], b[N];
    bench_rng r;
    rng_seed(&r, 42);
    bench_arrivals(&r, 8.0, N, a);
    rng_seed(&r, 42);
    bench_arrivals(&r, 8.0, N, b);
    assert_memory_equal(a, b, sizeof a);
    assert_true(a[0] == 0);
    int above_mean = 0;
    for (int i = 1; i < N; i++) {
        assert_true(a[i] >= a[i - 1]);
        above_mean += a[i] - a[i - 1] > 1.0 / 8;
    }
    const double mean_gap = a[N - 1] / (N - 1);
    assert_true(fabs(mean_gap - 0.125) < 0.125 * 0.03);
    /* exponential gaps: P(gap > mean) = 1/e */
    assert_true(fabs((double)above_mean / (N - 1) - exp(-1)) < 0.02);
    rng_seed(&r, 43);
    bench_arrivals(&r, 8.0, N, b);
    assert_true(memcmp(a, b, sizeof a) != 0);
    bench_arrivals(&r, INFINITY, 100, b);
    for (int i = 0; i < 100; i++) assert_true(b[i] == 0);
}

static void test_jitter_and_range(void **state) {
    (void)state;
    bench_rng r;
    rng_seed(&r, 1);
    bool seen_lo = false, seen_hi = false;
    for (int i = 0; i < 5000; i++) {
        const long v = bench_jitter_len(&r, 100, 0.25);
        assert_true(v >= 75 && v <= 125);
        seen_lo |= v == 75, seen_hi |= v == 125;
        const double u = rng_uniform(&r);
        assert_true(u >= 0 && u < 1);
    }
    assert_true(seen_lo && seen_hi);
    assert_int_equal(bench_jitter_len(&r, 100, 0), 100);
    const long one = bench_jitter_len(&r, 1, 0.9); /* [max(1, 0.1), 1.9] rounded out: 1..2 */
    assert_true(one == 1 || one == 2);
}

/* ---- datasets ---- */

static void test_random_prompts_fit_the_length(void **state) {
    (void)state;
    bench_tok t = {.style = TOK_VLLM, .n_vocab = 5000, .n_special = 1};
    bench_rng r;
    rng_seed(&r, 3);
    bench_dataset_opts o = {.name = "random", .num_prompts = 20, .input_len = 50, .output_len = 9};
    bench_item *items;
    toy_calls = 0;
    assert_int_equal(bench_dataset_build(&o, &t, &r, &items), 20);
    for (int i = 0; i < 20; i++) {
        int32_t *ids;
        const int n = bench_tok_encode(&t, items[i].prompt, false, &ids);
        free(ids);
        /* 'x' words are two tokens: the fit can stop one short */
        assert_true(n == 49 || n == 48);
        assert_int_equal(items[i].input_len, n + 1);
        assert_int_equal(items[i].output_len, 9);
    }
    assert_true(toy_calls < 20 * 14); /* bisection: a handful of calls per prompt */
    bench_items_free(items, 20);

    /* the vocabulary unknown: words cut to length */
    t.n_vocab = 0;
    o.input_len = 30;
    o.chat = true; /* no BOS to subtract */
    assert_int_equal(bench_dataset_build(&o, &t, &r, &items), 20);
    for (int i = 0; i < 20; i++) assert_true(items[i].input_len == 30 || items[i].input_len == 29);
    bench_items_free(items, 20);

    /* no tokenizer: one word per token, lengths unknown */
    t.style = TOK_NONE;
    assert_int_equal(bench_dataset_build(&o, &t, &r, &items), 20);
    for (int i = 0; i < 20; i++) assert_int_equal(items[i].input_len, -1);
    bench_items_free(items, 20);
}

static void test_prefix_repetition_shares_prefixes(void **state) {
    (void)state;
    bench_tok t = {.style = TOK_VLLM, .n_vocab = 5000, .n_special = 1};
    bench_rng r;
    rng_seed(&r, 9);
    bench_dataset_opts o = {.name = "prefix-repetition", .num_prompts = 12, .prefix_len = 20, .suffix_len = 6,
                            .num_prefixes = 3, .output_len = 4};
    bench_item *items;
    assert_int_equal(bench_dataset_build(&o, &t, &r, &items), 12);
    int distinct = 0;
    char seen[12][256];
    for (int i = 0; i < 12; i++) {
        /* the prefix holds at least 10 words (19 tokens, some words two) */
        const char *p = items[i].prompt;
        int words = 0;
        size_t k = 0;
        while (p[k] && words < 10) words += p[k++] == ' ';
        bool found = false;
        for (int d = 0; d < distinct && !found; d++) found = strlen(seen[d]) == k && !strncmp(seen[d], p, k);
        if (!found) {
            assert_true(k < sizeof seen[0]);
            memcpy(seen[distinct], p, k);
            seen[distinct++][k] = 0;
        }
    }
    assert_int_equal(distinct, 3);
    bench_items_free(items, 12);
}

static void test_jsonl(void **state) {
    (void)state;
    char path[] = "/tmp/cllm_bench_jsonl_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"prompt\": \"one two\", \"max_tokens\": 5}\n\n{\"prompt\": \"three\", \"input_len\": 4}\r\n", f);
    fclose(f);
    bench_dataset_opts o = {.name = "jsonl", .path = path, .output_len = 7};
    bench_item *items;
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), 2);
    assert_string_equal(items[0].prompt, "one two");
    assert_int_equal(items[0].output_len, 5);
    assert_int_equal(items[1].output_len, 7);
    assert_int_equal(items[1].input_len, 4);
    bench_items_free(items, 2);
    o.num_prompts = 5; /* goes round */
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), 5);
    assert_string_equal(items[4].prompt, "one two");
    /* save and read back */
    assert_int_equal(bench_dataset_save(path, items, 5), 0);
    bench_items_free(items, 5);
    o.num_prompts = 0;
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), 5);
    assert_string_equal(items[3].prompt, "three");
    assert_int_equal(items[3].input_len, 4);
    bench_items_free(items, 5);
    /* a bad line is an error with its line number */
    f = fopen(path, "w");
    fputs("{\"prompt\": \"ok\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n", f);
    fclose(f);
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), -1); /* messages need the chat endpoint */
    o.chat = true;
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), 2);
    assert_non_null(items[1].messages);
    bench_items_free(items, 2);
    f = fopen(path, "w");
    fputs("{\"prompt\": 3}\n", f);
    fclose(f);
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), -1);
    remove(path);
    o.path = "/nonexistent/x.jsonl";
    assert_int_equal(bench_dataset_build(&o, NULL, NULL, &items), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_whole_stream),
        cmocka_unit_test(test_sse_split_at_every_byte),
        cmocka_unit_test(test_sse_event_without_blank_line_is_delivered_at_end),
        cmocka_unit_test(test_sse_long_event),
        cmocka_unit_test(test_chunks_completions),
        cmocka_unit_test(test_chunks_chat_role_chunk_is_not_a_token),
        cmocka_unit_test(test_chunks_errors),
        cmocka_unit_test(test_percentile_matches_numpy),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_summary_all_failed),
        cmocka_unit_test(test_poisson_arrivals),
        cmocka_unit_test(test_jitter_and_range),
        cmocka_unit_test(test_random_prompts_fit_the_length),
        cmocka_unit_test(test_prefix_repetition_shares_prefixes),
        cmocka_unit_test(test_jsonl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
