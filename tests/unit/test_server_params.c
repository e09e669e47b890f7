/* Request validation: a table of malformed bodies, each refused with status
 * 400 naming the right field; well-formed bodies become the engine's
 * request_params exactly (ranges, vLLM conventions such as top_k -1 = off,
 * max_completion_tokens over max_tokens, chat logprobs, developer -> system,
 * text parts joined). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_refused.h"
#include "server/params.h"

#include <stdio.h>
#include <string.h>

#define NV 1000

static json_t *load(const char *text) {
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) fail_msg("test JSON does not parse: %s: %s", text, je.text);
    return j;
}

typedef struct {
    api_kind kind;
    const char *body;
    const char *param; /* expected param ("" for none) */
    const char *code;
} bad_case;

static const bad_case BAD[] = {
    {API_COMPLETIONS, "[1]", "body", "invalid_type"},
    {API_COMPLETIONS, "{}", "prompt", "missing_field"},
    {API_CHAT, "{}", "messages", "missing_field"},
    {API_COMPLETIONS, "{\"prompt\": 5}", "prompt", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": []}", "prompt", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": [[]]}", "prompt", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": [\"a\", [1]]}", "prompt", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": [1, 1000]}", "prompt", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": [1, -1]}", "prompt", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": [1, 2.5]}", "prompt", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": \"5\"}", "max_tokens", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": -1}", "max_tokens", "invalid_value"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 0}", "max_tokens",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"temperature\": -1}", "temperature", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"temperature\": 2.01}", "temperature", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"temperature\": true}", "temperature", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"top_p\": 0}", "top_p", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"top_k\": -5}", "top_k", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"top_k\": 1.5}", "top_k", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"min_p\": 1.5}", "min_p", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"n\": 65}", "n", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"frequency_penalty\": -2.5}", "frequency_penalty", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"repetition_penalty\": 0}", "repetition_penalty", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"seed\": 1.5}", "seed", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": \"\"}", "stop", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": [\"a\", 1]}", "stop", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": {}}", "stop", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stop_token_ids\": [1000]}", "stop_token_ids", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logit_bias\": {\"x\": 1}}", "logit_bias", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logit_bias\": {\"1\": 101}}", "logit_bias", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logit_bias\": {\"1\": \"1\"}}", "logit_bias", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logit_bias\": {\"+1\": 1}}", "logit_bias", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logit_bias\": [1]}", "logit_bias", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logprobs\": 21}", "logprobs", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"logprobs\": true}", "logprobs", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"echo\": true, \"logprobs\": 0, \"stream\": true}", "echo",
     "unsupported_field"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"min_tokens\": 5, \"max_tokens\": 4}", "min_tokens", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", "stream_options",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_usage\": 1}}",
     "stream_options.include_usage", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"suffix\": \"y\"}", "suffix", "unsupported_field"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"messages\": []}", "messages", "unknown_field"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"whatever\": null}", "whatever", "unknown_field"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"user\": 5}", "user", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"model\": 5}", "model", "invalid_type"},
    {API_CHAT, "{\"messages\": []}", "messages", "invalid_value"},
    {API_CHAT, "{\"messages\": [5]}", "messages[0]", "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role", "missing_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}", "messages[0].role", "invalid_value"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content", "missing_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": null}]}", "messages[0].content", "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
     "messages[0].content[0]", "unsupported_content"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}",
     "messages[0].content[0]", "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": [{}]}]}",
     "messages[0].tool_calls", "unsupported_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 2}", "logprobs",
     "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", "top_logprobs",
     "invalid_value"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": false, \"top_logprobs\": 2}",
     "top_logprobs", "invalid_value"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"echo\": true}", "echo", "unknown_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": []}", "tools",
     "invalid_value"},
    /* accepted-and-ignored fields still get their types checked */
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"store\": \"yes\"}", "store",
     "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"metadata\": {\"a\": 1}}", "metadata",
     "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"modalities\": [\"text\", \"audio\"]}",
     "modalities", "unsupported_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"prediction\": {\"type\": \"x\"}}",
     "prediction", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_obfuscation\": 1}}",
     "stream_options.include_obfuscation", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"use_beam_search\": true, \"stream\": true}", "use_beam_search",
     "unsupported_field"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"use_beam_search\": true, \"n\": 3, \"best_of\": 2}", "best_of",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"n\": 2, \"best_of\": 3}", "best_of", "unsupported_field"},
    /* fields that would change the output if ignored stay refused */
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"high\"}",
     "reasoning_effort", "unsupported_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"audio\": {\"voice\": \"alloy\"}}",
     "audio", "unsupported_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"xml\"}}",
     "response_format", "invalid_value"},
    /* vLLM's extra fields */
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"skip_special_tokens\": 0}", "skip_special_tokens", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"truncate_prompt_tokens\": 0}", "truncate_prompt_tokens",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"truncate_prompt_tokens\": -2}", "truncate_prompt_tokens",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"allowed_token_ids\": [1, 1000]}", "allowed_token_ids",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"allowed_token_ids\": []}", "allowed_token_ids", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"bad_words\": [\"a\", 1]}", "bad_words", "invalid_type"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"prompt_logprobs\": 21}", "prompt_logprobs", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"prompt_logprobs\": -1}", "prompt_logprobs", "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"prompt_logprobs\": 1, \"stream\": true}", "prompt_logprobs",
     "invalid_value"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"add_generation_prompt\": false}", "add_generation_prompt",
     "unknown_field"},
    {API_COMPLETIONS, "{\"prompt\": \"x\", \"use_beam_search\": true, \"n\": 2, \"allowed_token_ids\": [1]}",
     "allowed_token_ids", "unsupported_field"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"continue_final_message\": true}",
     "continue_final_message", "invalid_value"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template\": 5}", "chat_template",
     "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"documents\": [1]}", "documents",
     "invalid_type"},
    {API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": []}",
     "chat_template_kwargs", "invalid_type"},
    {API_CHAT,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": {\"messages\": []}}",
     "chat_template_kwargs", "invalid_value"},
};

static void test_bad_requests_name_the_field(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++)
        expect_refused(i, BAD[i].body, load(BAD[i].body), BAD[i].kind, BAD[i].param, BAD[i].code);
}

static void test_sampling_fields_reach_the_engine(void **state) {
    (void)state;
    json_t *j = load("{\"model\": \"m\", \"prompt\": \"hi\", \"max_tokens\": 7, \"temperature\": 0.5, \"top_p\": 0.9, "
                     "\"top_k\": -1, \"min_p\": 0.1, \"n\": 3, \"stop\": [\"a\", \"bc\"], \"stop_token_ids\": [5, 6], "
                     "\"seed\": 42, \"presence_penalty\": 0.5, \"frequency_penalty\": -0.5, "
                     "\"repetition_penalty\": 1.1, \"logit_bias\": {\"17\": -100, \"3\": 2.5}, \"logprobs\": 4, "
                     "\"ignore_eos\": true, \"min_tokens\": 2, \"stream\": true, "
                     "\"stream_options\": {\"include_usage\": true}, \"user\": \"u\", \"echo\": false}");
    api_request r;
    api_error e;
    assert_int_equal(api_request_parse(j, API_COMPLETIONS, NV, &r, &e), 0);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.n_prompts, 1);
    assert_memory_equal(r.prompts[0].text, "hi", 2);
    assert_int_equal(r.max_tokens, 7);
    assert_true(r.rp.sampling.temperature == 0.5f && r.rp.sampling.top_p == 0.9f);
    assert_int_equal(r.rp.sampling.top_k, 0);
    assert_true(r.rp.sampling.min_p == 0.1f && r.rp.sampling.repetition_penalty == 1.1f);
    assert_true(r.rp.sampling.presence_penalty == 0.5f && r.rp.sampling.frequency_penalty == -0.5f);
    assert_int_equal(r.rp.n, 3);
    assert_int_equal(r.rp.n_stop, 2);
    assert_string_equal(r.rp.stop[1], "bc");
    assert_int_equal(r.rp.n_stop_token_ids, 2);
    assert_int_equal(r.rp.stop_token_ids[1], 6);
    assert_true(r.seed_given && r.rp.sampling.seed == 42);
    assert_int_equal(r.rp.sampling.n_logit_bias, 2);
    assert_int_equal(r.rp.sampling.logit_bias[0].token, 17);
    assert_true(r.rp.sampling.logit_bias[0].bias == -100.0f);
    assert_int_equal(r.rp.logprobs, 4);
    assert_true(r.rp.ignore_eos && r.stream && r.include_usage && !r.echo);
    assert_int_equal(r.rp.min_tokens, 2);
    api_request_free(&r);
    json_decref(j);
}

/* OpenAI fields that do not change the text are accepted and leave the
 * request exactly as it is without them. */
static void test_ignored_fields_are_accepted(void **state) {
    (void)state;
    json_t *plain = load("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": true}");
    json_t *j = load("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": true, "
                     "\"store\": false, \"metadata\": {\"k\": \"v\"}, \"user\": \"u\", \"service_tier\": \"auto\", "
                     "\"parallel_tool_calls\": true, \"modalities\": [\"text\"], \"audio\": null, "
                     "\"reasoning_effort\": null, \"safety_identifier\": \"s\", \"prompt_cache_key\": \"p\", "
                     "\"prediction\": {\"type\": \"content\", \"content\": \"hi\"}, "
                     "\"stream_options\": {\"include_obfuscation\": false}}");
    api_request a, b;
    api_error e;
    if (api_request_parse(j, API_CHAT, NV, &a, &e)) fail_msg("refused: %s", e.message);
    assert_int_equal(api_request_parse(plain, API_CHAT, NV, &b, &e), 0);
    assert_int_equal(a.max_tokens, b.max_tokens);
    assert_memory_equal(&a.rp.sampling, &b.rp.sampling, sizeof a.rp.sampling);
    assert_int_equal(a.rp.n, b.rp.n);
    assert_true(a.stream && !a.include_usage);
    api_request_free(&a);
    api_request_free(&b);
    json_decref(j);
    json_decref(plain);
}

/* vLLM's use_beam_search reaches the engine as beam_width: best_of, else n. */
static void test_beam_search_fields(void **state) {
    (void)state;
    static const struct {
        const char *body;
        int width, n;
        float length_penalty, temperature;
    } CASES[] = {
        {"{\"prompt\": \"x\", \"use_beam_search\": true, \"n\": 2, \"best_of\": 5, \"length_penalty\": 0.5}", 5, 2,
         0.5f, 1.0f},
        {"{\"prompt\": \"x\", \"use_beam_search\": true, \"n\": 3}", 3, 3, 1.0f, 1.0f},
        {"{\"prompt\": \"x\", \"use_beam_search\": true}", 0, 1, 1.0f, 0.0f}, /* one beam: greedy */
        {"{\"prompt\": \"x\", \"n\": 2, \"best_of\": 2}", 0, 2, 1.0f, 1.0f},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        json_t *j = load(CASES[i].body);
        api_request r;
        api_error e;
        if (api_request_parse(j, API_COMPLETIONS, NV, &r, &e)) fail_msg("case %zu refused: %s", i, e.message);
        if (r.rp.beam_width > 1 ? r.rp.beam_width != CASES[i].width : CASES[i].width != 0)
            fail_msg("case %zu: beam_width %d", i, r.rp.beam_width);
        assert_int_equal(r.rp.n, CASES[i].n);
        assert_true(r.rp.length_penalty == CASES[i].length_penalty);
        assert_true(r.rp.sampling.temperature == CASES[i].temperature);
        api_request_free(&r);
        json_decref(j);
    }
}

static void test_vllm_fields_reach_the_request(void **state) {
    (void)state;
    json_t *j = load("{\"prompt\": \"x\", \"skip_special_tokens\": false, \"include_stop_str_in_output\": true, "
                     "\"spaces_between_special_tokens\": false, \"truncate_prompt_tokens\": 5, "
                     "\"allowed_token_ids\": [9, 3, 7], \"bad_words\": [\"no\"]}");
    api_request r;
    api_error e;
    if (api_request_parse(j, API_COMPLETIONS, NV, &r, &e)) fail_msg("refused: %s", e.message);
    assert_true(r.rp.include_special_text && r.rp.include_stop_str_in_output);
    assert_int_equal(r.truncate_prompt_tokens, 5);
    assert_int_equal(r.rp.n_allowed_token_ids, 3);
    assert_int_equal(r.rp.allowed_token_ids[0], 9);
    assert_int_equal(json_array_size(r.bad_words), 1);
    api_request_free(&r);
    json_decref(j);

    /* chat: kwargs merge over the fields, as vLLM's; documents become a variable */
    j = load("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"add_generation_prompt\": true, "
             "\"chat_template_kwargs\": {\"add_generation_prompt\": false, \"continue_final_message\": true, "
             "\"style\": \"short\"}, \"documents\": [{\"title\": \"t\"}], \"chat_template\": \"{{ x }}\"}");
    if (api_request_parse(j, API_CHAT, NV, &r, &e)) fail_msg("refused: %s", e.message);
    assert_false(r.add_generation_prompt);
    assert_true(r.continue_final_message);
    assert_string_equal(r.chat_template, "{{ x }}");
    assert_string_equal(json_string_value(json_object_get(r.template_vars, "style")), "short");
    assert_int_equal(json_array_size(json_object_get(r.template_vars, "documents")), 1);
    assert_int_equal(r.truncate_prompt_tokens, 0);
    api_request_free(&r);
    json_decref(j);

    j = load("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}");
    if (api_request_parse(j, API_CHAT, NV, &r, &e)) fail_msg("refused: %s", e.message);
    assert_true(r.add_generation_prompt && !r.continue_final_message && !r.template_vars && !r.chat_template);
    assert_false(r.rp.include_special_text);
    api_request_free(&r);
    json_decref(j);
}

static void test_defaults_and_nulls(void **state) {
    (void)state;
    json_t *j = load("{\"prompt\": [[1, 2], [3]], \"temperature\": null, \"tools\": null, \"stop\": null}");
    api_request r;
    api_error e;
    assert_int_equal(api_request_parse(j, API_COMPLETIONS, NV, &r, &e), 0);
    assert_null(r.model);
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.n_prompts, 2);
    assert_null(r.prompts[0].text);
    assert_int_equal(r.prompts[0].n_ids, 2);
    assert_int_equal(r.prompts[1].ids[0], 3);
    assert_true(r.rp.sampling.temperature == 1.0f); /* OpenAI's default */
    assert_int_equal(r.rp.n, 1);
    assert_int_equal(r.rp.logprobs, -1);
    assert_int_equal(r.rp.n_stop, 0);
    assert_false(r.seed_given || r.stream);
    api_request_free(&r);
    json_decref(j);
}

static void test_chat_messages_and_logprobs(void **state) {
    (void)state;
    json_t *j = load("{\"messages\": [{\"role\": \"developer\", \"content\": \"be brief\"}, {\"role\": \"user\", "
                     "\"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}], "
                     "\"name\": \"bob\"}, {\"role\": \"assistant\", \"content\": null}], "
                     "\"max_tokens\": 3, \"max_completion_tokens\": 9, \"logprobs\": true, \"top_logprobs\": 5, "
                     "\"response_format\": {\"type\": \"text\"}}");
    api_request r;
    api_error e;
    assert_int_equal(api_request_parse(j, API_CHAT, NV, &r, &e), 0);
    assert_int_equal(r.max_tokens, 9); /* max_completion_tokens wins */
    assert_int_equal(r.rp.logprobs, 5);
    assert_int_equal(json_array_size(r.messages), 3);
    json_t *m0 = json_array_get(r.messages, 0), *m1 = json_array_get(r.messages, 1),
           *m2 = json_array_get(r.messages, 2);
    assert_string_equal(json_string_value(json_object_get(m0, "role")), "system");
    assert_string_equal(json_string_value(json_object_get(m1, "content")), "a\nb");
    assert_string_equal(json_string_value(json_object_get(m1, "name")), "bob");
    assert_string_equal(json_string_value(json_object_get(m2, "content")), "");
    api_request_free(&r);
    json_decref(j);

    j = load("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}");
    assert_int_equal(api_request_parse(j, API_CHAT, NV, &r, &e), 0);
    assert_int_equal(r.rp.logprobs, 0); /* the chosen token only */
    api_request_free(&r);
    json_decref(j);
    j = load("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": false}");
    assert_int_equal(api_request_parse(j, API_CHAT, NV, &r, &e), 0);
    assert_int_equal(r.rp.logprobs, -1);
    api_request_free(&r);
    json_decref(j);
}

static void test_error_does_not_depend_on_key_order(void **state) {
    (void)state;
    const char *a = "{\"prompt\": \"x\", \"temperature\": -1, \"top_p\": 5}";
    const char *b = "{\"top_p\": 5, \"temperature\": -1, \"prompt\": \"x\"}";
    api_error ea, eb;
    api_request r;
    json_t *ja = load(a), *jb = load(b);
    assert_int_equal(api_request_parse(ja, API_COMPLETIONS, NV, &r, &ea), -1);
    api_request_free(&r);
    assert_int_equal(api_request_parse(jb, API_COMPLETIONS, NV, &r, &eb), -1);
    api_request_free(&r);
    assert_string_equal(ea.param, eb.param);
    json_decref(ja);
    json_decref(jb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_requests_name_the_field),
        cmocka_unit_test(test_sampling_fields_reach_the_engine),
        cmocka_unit_test(test_defaults_and_nulls),
        cmocka_unit_test(test_ignored_fields_are_accepted),
        cmocka_unit_test(test_beam_search_fields),
        cmocka_unit_test(test_vllm_fields_reach_the_request),
        cmocka_unit_test(test_chat_messages_and_logprobs),
        cmocka_unit_test(test_error_does_not_depend_on_key_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
