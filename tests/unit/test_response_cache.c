/* The response cache without HTTP: the canonical key (key order, nulls,
 * ignored and delivery fields left out, everything else in), which requests
 * are cacheable, recording a gen's outputs and replaying them into another
 * (text, logprobs, counts, finish reasons), nothing kept from a failed
 * generation, LRU eviction, and an entry that outlives its eviction while a
 * replay holds it. Under ASan in `make test-sanitize`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/response_cache.h"

#include <stdlib.h>
#include <string.h>

static char *key_of(const char *body_text, api_kind kind) {
    json_error_t jerr;
    json_t *body = json_loads(body_text, 0, &jerr);
    assert_non_null(body);
    char *k = response_cache_key(body, kind, "tiny");
    json_decref(body);
    assert_non_null(k);
    return k;
}

static void assert_same_key(const char *a, const char *b, api_kind kind, bool same) {
    char *ka = key_of(a, kind), *kb = key_of(b, kind);
    if (same) assert_string_equal(ka, kb);
    else assert_string_not_equal(ka, kb);
    free(ka);
    free(kb);
}

static void test_key(void **state) {
    (void)state;
    const char *base = "{\"prompt\":\"hi\",\"max_tokens\":5,\"temperature\":0,\"logit_bias\":{\"3\":1,\"2\":-1}}";
    /* the order of keys, at any depth, and nulls do not matter */
    assert_same_key(base, "{\"logit_bias\":{\"2\":-1,\"3\":1},\"temperature\":0,\"max_tokens\":5,\"prompt\":\"hi\"}",
                    API_COMPLETIONS, true);
    assert_same_key(base,
                    "{\"prompt\":\"hi\",\"max_tokens\":5,\"temperature\":0,\"logit_bias\":{\"3\":1,\"2\":-1},"
                    "\"stop\":null,\"seed\":null}",
                    API_COMPLETIONS, true);
    /* ignored and delivery fields do not matter */
    assert_same_key(base,
                    "{\"prompt\":\"hi\",\"max_tokens\":5,\"temperature\":0,\"logit_bias\":{\"3\":1,\"2\":-1},"
                    "\"user\":\"u\",\"metadata\":{\"a\":\"b\"},\"model\":\"other-alias\",\"stream\":true,"
                    "\"stream_options\":{\"include_usage\":true}}",
                    API_COMPLETIONS, true);
    /* any other field does, and so does the endpoint */
    assert_same_key(base, "{\"prompt\":\"hi\",\"max_tokens\":5,\"temperature\":0,\"logit_bias\":{\"3\":1,\"2\":-2}}",
                    API_COMPLETIONS, false);
    assert_same_key(base,
                    "{\"prompt\":\"hi\",\"max_tokens\":5,\"temperature\":0,\"logit_bias\":{\"3\":1,\"2\":-1},"
                    "\"seed\":1}",
                    API_COMPLETIONS, false);
    char *c = key_of(base, API_COMPLETIONS), *h = key_of(base, API_CHAT);
    assert_string_not_equal(c, h);
    /* the served model's name is in the key */
    assert_non_null(strstr(c, "\"model\":\"tiny\""));
    free(c);
    free(h);
}

static void test_cacheable(void **state) {
    (void)state;
    api_request r = {.rp = request_params_defaults()};
    r.rp.sampling.temperature = 0.8f;
    assert_false(response_cache_cacheable(&r));
    r.seed_given = true;
    assert_true(response_cache_cacheable(&r));
    r.seed_given = false;
    r.rp.beam_width = 3;
    assert_true(response_cache_cacheable(&r));
    r.rp.beam_width = 0;
    r.rp.sampling.temperature = 0;
    assert_true(response_cache_cacheable(&r));
}

/* Feeds a generation of 2 samples: "ab" + "c" (logprobs on the first) and "xyz", as the engine would. */
static void run_generation(gen *g, finish_reason last_reason) {
    const int32_t top_tok[2] = {5, 6};
    const float top_lp[2] = {-0.5f, -1.5f};
    const token_logprobs lp = {.token = 5, .logprob = -0.5f, .n_top = 2, .top_tokens = top_tok, .top_logprobs = top_lp};
    const engine_output outs[] = {
        {.index = 0, .n_new_tokens = 1, .logprobs = &lp, .text = "ab", .text_len = 2, .n_prompt_tokens = 4,
         .n_cached_tokens = 0, .n_output_tokens = 1},
        {.index = 1, .n_new_tokens = 1, .text = "xyz", .text_len = 3, .finished = true, .reason = FINISH_STOP,
         .n_prompt_tokens = 4, .n_output_tokens = 1},
        {.index = 0, .n_new_tokens = 1, .logprobs = &lp, .text = "c", .text_len = 1, .finished = true,
         .reason = last_reason, .n_prompt_tokens = 4, .n_output_tokens = 2},
    };
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) gen_feed(g, 0, &outs[i]);
}

static void store_one(response_cache *c, const char *key, finish_reason reason) {
    gen *g = gen_create(NULL, NULL, 1, 2);
    assert_non_null(g);
    response_cache_record(g);
    run_generation(g, reason);
    response_cache_store(c, key, g);
    gen_release(g);
}

static void test_record_and_replay(void **state) {
    (void)state;
    response_cache *c = response_cache_create(4);
    assert_non_null(c);
    assert_null(response_cache_lookup(c, "k"));
    store_one(c, "k", FINISH_LENGTH);
    response_replay *rp = response_cache_lookup(c, "k");
    assert_non_null(rp);
    gen *g = gen_create(NULL, NULL, 1, 2);
    assert_true(response_replay_step(rp, g)); /* one output at a time */
    assert_int_equal(g->choices[0].text.len, 2);
    assert_int_equal(g->n_unfinished, 2);
    response_replay_all(rp, g);
    assert_false(response_replay_step(rp, g));
    assert_int_equal(g->n_unfinished, 0);
    assert_memory_equal(g->choices[0].text.data, "abc", 3);
    assert_memory_equal(g->choices[1].text.data, "xyz", 3);
    assert_int_equal(g->choices[0].reason, FINISH_LENGTH);
    assert_int_equal(g->choices[1].reason, FINISH_STOP);
    assert_int_equal(g->choices[0].n_tokens, 2);
    assert_int_equal(g->prompt_tokens[0], 4);
    assert_int_equal(g->choices[0].n_lps, 2);
    assert_int_equal(g->choices[1].n_lps, 0);
    assert_int_equal(g->choices[0].lps[1].n_top, 2);
    assert_int_equal(g->choices[0].lps[1].top_tok[1], 6);
    assert_true(g->choices[0].lps[1].top_lp[1] == -1.5f);
    gen_release(g);
    response_replay_free(rp);
    response_cache_stats st;
    response_cache_get_stats(c, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.entries, 1);
    response_cache_free(c);
}

static void test_failures_are_not_kept(void **state) {
    (void)state;
    response_cache *c = response_cache_create(4);
    store_one(c, "aborted", FINISH_ABORT);
    store_one(c, "failed", FINISH_ERROR);
    assert_null(response_cache_lookup(c, "aborted"));
    assert_null(response_cache_lookup(c, "failed"));
    /* an unfinished generation is not kept either */
    gen *g = gen_create(NULL, NULL, 1, 1);
    response_cache_record(g);
    const engine_output o = {.index = 0, .n_new_tokens = 1, .text = "a", .text_len = 1, .n_output_tokens = 1};
    gen_feed(g, 0, &o);
    response_cache_store(c, "unfinished", g);
    gen_release(g); /* frees the recording with the gen */
    assert_null(response_cache_lookup(c, "unfinished"));
    /* a gen that recorded nothing stores nothing */
    g = gen_create(NULL, NULL, 1, 2);
    run_generation(g, FINISH_STOP);
    response_cache_store(c, "unrecorded", g);
    gen_release(g);
    assert_null(response_cache_lookup(c, "unrecorded"));
    response_cache_free(c);
}

static void test_lru_and_eviction_during_replay(void **state) {
    (void)state;
    response_cache *c = response_cache_create(2);
    store_one(c, "a", FINISH_STOP);
    store_one(c, "b", FINISH_STOP);
    response_replay *held = response_cache_lookup(c, "a"); /* a is now the most recent */
    assert_non_null(held);
    store_one(c, "c", FINISH_STOP);                        /* evicts b */
    response_replay *rp = response_cache_lookup(c, "b");
    assert_null(rp);
    store_one(c, "d", FINISH_STOP); /* evicts a, still held by the replay */
    assert_null(response_cache_lookup(c, "a"));
    gen *g = gen_create(NULL, NULL, 1, 2);
    response_replay_all(held, g);
    assert_int_equal(g->n_unfinished, 0);
    assert_memory_equal(g->choices[1].text.data, "xyz", 3);
    gen_release(g);
    response_replay_free(held); /* the last reference frees it */
    assert_non_null(rp = response_cache_lookup(c, "c"));
    response_replay_free(rp);
    response_cache_stats st;
    response_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.capacity, 2);
    /* a twin stored later leaves the first in place */
    store_one(c, "c", FINISH_STOP);
    response_cache_get_stats(c, &st);
    assert_int_equal(st.entries, 2);
    response_cache_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_cacheable),
        cmocka_unit_test(test_record_and_replay),
        cmocka_unit_test(test_failures_are_not_kept),
        cmocka_unit_test(test_lru_and_eviction_during_replay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
