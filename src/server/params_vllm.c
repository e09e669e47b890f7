/* vLLM's extra request fields, beside OpenAI's (params.c), each doing what
 * vLLM does with it:
 *   sampling (both endpoints): skip_special_tokens, spaces_between_special_tokens,
 *     include_stop_str_in_output, truncate_prompt_tokens, allowed_token_ids,
 *     bad_words (tokenized with the prompt, completions.c), prompt_logprobs (at
 *     most API_MAX_LOGPROBS alternatives, and none with stream, as vLLM);
 *   chat: add_generation_prompt, continue_final_message, chat_template (this
 *     request's own), chat_template_kwargs and documents (template variables).
 * ignore_eos and min_tokens are in params.c's table. */
#include "server/params.h"

#include "server/api_json.h"

#include <limits.h>
#include <string.h>

#define MAX_ALLOWED_IDS 65536 /* more than any vocabulary this server loads needs to list */
#define MAX_BAD_WORDS 128

enum { V_BOTH, V_CHAT };

static const struct {
    const char *name;
    int where;
} VLLM_FIELDS[] = {
    {"skip_special_tokens", V_BOTH}, {"spaces_between_special_tokens", V_BOTH},
    {"include_stop_str_in_output", V_BOTH}, {"truncate_prompt_tokens", V_BOTH}, {"prompt_logprobs", V_BOTH},
    {"allowed_token_ids", V_BOTH}, {"bad_words", V_BOTH},
    {"add_generation_prompt", V_CHAT}, {"continue_final_message", V_CHAT}, {"chat_template", V_CHAT},
    {"documents", V_CHAT}, {"chat_template_kwargs", V_CHAT}, /* after the two booleans: it may set them */
};

bool api_vllm_field(const char *name, api_kind kind) {
    for (size_t i = 0; i < sizeof VLLM_FIELDS / sizeof *VLLM_FIELDS; i++)
        if (!strcmp(VLLM_FIELDS[i].name, name)) return VLLM_FIELDS[i].where == V_BOTH || kind == API_CHAT;
    return false;
}

static int parse_bad_words(const json_t *v, api_request *r, api_error *e) {
    if (!json_is_array(v)) return api_type_error(e, "bad_words", "a list of strings", v);
    if (json_array_size(v) > MAX_BAD_WORDS)
        return api_fail(e, 400, "invalid_value", "bad_words", "'bad_words' holds %zu words; at most %d are allowed",
                        json_array_size(v), MAX_BAD_WORDS);
    size_t i;
    const json_t *w;
    json_array_foreach(v, i, w) {
        if (!json_is_string(w))
            return api_fail(e, 400, "invalid_type", "bad_words", "'bad_words' must hold strings; item %zu is %s", i,
                            api_json_type_name(w));
    }
    r->bad_words = v;
    return 0;
}

/* A JSON object whose keys become template variables; "messages" is the
 * request's own. */
static int add_template_vars(const json_t *v, const char *field, api_request *r, api_error *e) {
    if (!json_is_object(v)) return api_type_error(e, field, "an object", v);
    if (json_object_get(v, "messages"))
        return api_fail(e, 400, "invalid_value", field, "'%s' may not set 'messages'", field);
    if (!r->template_vars && !(r->template_vars = json_object()))
        return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    /* As vLLM merges them over its own keyword arguments. */
    const json_t *b;
    if ((b = json_object_get(v, "add_generation_prompt")) && api_get_bool(b, field, &r->add_generation_prompt, e))
        return -1;
    if ((b = json_object_get(v, "continue_final_message")) && api_get_bool(b, field, &r->continue_final_message, e))
        return -1;
    if (json_object_update(r->template_vars, (json_t *)v))
        return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    return 0;
}

static int parse_field(const char *k, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    request_params *rp = &r->rp;
    bool b;
    long long x;
    if (!strcmp(k, "skip_special_tokens")) {
        if (api_get_bool(v, k, &b, e)) return -1;
        rp->include_special_text = !b;
    } else if (!strcmp(k, "spaces_between_special_tokens")) {
        /* vLLM uses it only in its slow detokenizer, for tokenizers without a
         * fast version; with a fast one, as here, special tokens are joined
         * without spaces either way. Checked and then ignored. */
        return api_get_bool(v, k, &b, e);
    } else if (!strcmp(k, "include_stop_str_in_output")) {
        return api_get_bool(v, k, &rp->include_stop_str_in_output, e);
    } else if (!strcmp(k, "truncate_prompt_tokens")) {
        if (api_get_int(v, k, -1, INT_MAX, &x, e)) return -1;
        if (x == 0)
            return api_fail(e, 400, "invalid_value", k, "'%s' must be at least 1, or -1 for the model's context", k);
        r->truncate_prompt_tokens = x;
    } else if (!strcmp(k, "prompt_logprobs")) {
        if (api_get_int(v, k, -1, LLONG_MAX, &x, e)) return -1;
        if (x == -1) /* vLLM's whole vocabulary */
            return api_fail(e, 400, "invalid_value", k,
                            "Requested prompt logprobs of the whole vocabulary (-1), which is greater than max "
                            "allowed: %d",
                            API_MAX_LOGPROBS);
        if (x > API_MAX_LOGPROBS)
            return api_fail(e, 400, "invalid_value", k,
                            "Requested prompt logprobs of %lld, which is greater than max allowed: %d", x,
                            API_MAX_LOGPROBS);
        rp->prompt_logprobs = (int)x;
    } else if (!strcmp(k, "allowed_token_ids")) {
        int n;
        if (api_parse_token_ids(v, k, n_vocab, &r->allowed_ids, &n, e)) return -1;
        if (n == 0) return api_fail(e, 400, "invalid_value", k, "'%s' must not be empty", k);
        if (n > MAX_ALLOWED_IDS)
            return api_fail(e, 400, "invalid_value", k, "'%s' holds %d ids; at most %d are allowed", k, n,
                            MAX_ALLOWED_IDS);
        rp->allowed_token_ids = r->allowed_ids;
        rp->n_allowed_token_ids = n;
    } else if (!strcmp(k, "bad_words")) {
        return parse_bad_words(v, r, e);
    } else if (!strcmp(k, "add_generation_prompt")) {
        return api_get_bool(v, k, &r->add_generation_prompt, e);
    } else if (!strcmp(k, "continue_final_message")) {
        return api_get_bool(v, k, &r->continue_final_message, e);
    } else if (!strcmp(k, "chat_template")) {
        if (!json_is_string(v)) return api_type_error(e, k, "a string", v);
        r->chat_template = json_string_value(v);
    } else if (!strcmp(k, "documents")) {
        if (!json_is_array(v)) return api_type_error(e, k, "a list of objects", v);
        size_t i;
        const json_t *d;
        json_array_foreach(v, i, d) {
            if (!json_is_object(d))
                return api_fail(e, 400, "invalid_type", k, "'documents' must hold objects; item %zu is %s", i,
                                api_json_type_name(d));
        }
        json_t *wrap = json_pack("{s:O}", "documents", v);
        const int rc =
            wrap ? add_template_vars(wrap, k, r, e) : api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        json_decref(wrap);
        return rc;
    } else if (!strcmp(k, "chat_template_kwargs")) {
        return add_template_vars(v, k, r, e);
    }
    return 0;
}

int api_vllm_parse_all(const json_t *body, int n_vocab, api_request *r, api_error *e) {
    for (size_t i = 0; i < sizeof VLLM_FIELDS / sizeof *VLLM_FIELDS; i++) {
        if (!api_vllm_field(VLLM_FIELDS[i].name, r->kind)) continue;
        const json_t *v = json_object_get(body, VLLM_FIELDS[i].name);
        if (v && !json_is_null(v) && parse_field(VLLM_FIELDS[i].name, v, n_vocab, r, e)) return -1;
    }
    return 0;
}

int api_vllm_check(api_request *r, api_error *e) {
    if (r->add_generation_prompt && r->continue_final_message && r->kind == API_CHAT)
        return api_fail(e, 400, "invalid_value", "continue_final_message",
                        "Cannot set both 'continue_final_message' and 'add_generation_prompt' to true (the latter "
                        "defaults to true)");
    if (r->stream && r->rp.prompt_logprobs > 0)
        return api_fail(e, 400, "invalid_value", "prompt_logprobs",
                        "'prompt_logprobs' are not available when 'stream' is true");
    if (r->rp.beam_width > 1 && (r->rp.n_allowed_token_ids || r->bad_words))
        return api_fail(e, 400, "unsupported_field", r->bad_words ? "bad_words" : "allowed_token_ids",
                        "'%s' together with 'use_beam_search' is not supported by this server",
                        r->bad_words ? "bad_words" : "allowed_token_ids");
    return 0;
}
