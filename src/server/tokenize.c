/* See tokenize.h. */
#include "server/tokenize.h"

#include "chat/prompt.h"
#include "server/params.h"
#include "server/prompt_limit.h"
#include "server/responses.h"

#include <stdlib.h>
#include <string.h>

/* Checks that every key is one of `allowed` (NULL-terminated) and the model,
 * when given, is ours. */
static int check_fields(server *s, const json_t *body, const char *const *allowed, api_error *e) {
    if (!json_is_object(body))
        return api_fail(e, 400, "invalid_type", NULL, "the body must be a JSON object, got %s", api_json_type_name(body));
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)body, key, val) {
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(key, allowed[i]);
        if (!ok) return api_fail(e, 400, "unknown_field", key, "Unrecognized request argument supplied: %.64s", key);
    }
    const json_t *m = json_object_get(body, "model");
    if (m && !json_is_null(m)) {
        if (!json_is_string(m))
            return api_fail(e, 400, "invalid_type", "model", "'model' must be a string, got %s", api_json_type_name(m));
        if (!server_model_matches(s, json_string_value(m)))
            return api_fail(e, 404, "model_not_found", "model", "The model '%.200s' does not exist.",
                            json_string_value(m));
    }
    return 0;
}

static int opt_bool(const json_t *body, const char *key, bool def, bool *out, api_error *e) {
    const json_t *v = json_object_get(body, key);
    *out = def;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v))
        return api_fail(e, 400, "invalid_type", key, "'%s' must be a boolean, got %s", key, api_json_type_name(v));
    *out = json_is_true(v);
    return 0;
}

static int tokenize_body(server *s, const json_t *body, int32_t **ids, api_error *e) {
    static const char *const allowed[] = {"model", "prompt", "messages", "add_special_tokens",
                                          "add_generation_prompt", NULL};
    if (check_fields(s, body, allowed, e)) return -1;
    const json_t *prompt = json_object_get(body, "prompt"), *messages = json_object_get(body, "messages");
    const bool has_prompt = prompt && !json_is_null(prompt), has_messages = messages && !json_is_null(messages);
    if (has_prompt == has_messages)
        return api_fail(e, 400, "invalid_value", "prompt", "give exactly one of 'prompt' and 'messages'");
    const tokenizer *tok = s->m->tok;
    bool add_special, add_gen;
    if (opt_bool(body, "add_special_tokens", has_prompt, &add_special, e)) return -1;
    if (opt_bool(body, "add_generation_prompt", true, &add_gen, e)) return -1;
    /* A text longer than the context is refused, as generation would. */
    const prompt_budget budget = {.max_len = s->max_model_len, .room = 0};
    if (has_prompt) {
        if (!json_is_string(prompt))
            return api_fail(e, 400, "invalid_type", "prompt", "'prompt' must be a string, got %s",
                            api_json_type_name(prompt));
        return prompt_limit_text(tok, json_string_value(prompt), json_string_length(prompt), add_special, &budget,
                                 "prompt", ids, e);
    }
    json_t *msgs;
    if (api_parse_messages(messages, &msgs, e)) return -1;
    const int n = prompt_limit_chat(tok, s->tmpl, msgs, add_gen, &budget, "messages", ids, e);
    json_decref(msgs);
    return n;
}

enum MHD_Result handle_tokenize(server *s, http_req *r) {
    api_error e;
    json_t *body = http_body_json(r, &e);
    if (!body) return http_reply_error(r, &e);
    int32_t *ids = NULL;
    const int n = tokenize_body(s, body, &ids, &e);
    json_decref(body);
    if (n < 0) {
        free(ids);
        return http_reply_error(r, &e);
    }
    json_t *tokens = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(tokens, json_integer(ids[i]));
    free(ids);
    return http_reply_json(r, 200,
                           json_pack("{s:o,s:i,s:i}", "tokens", tokens, "count", n, "max_model_len",
                                     s->max_model_len));
}

enum MHD_Result handle_detokenize(server *s, http_req *r) {
    api_error e;
    json_t *body = http_body_json(r, &e);
    if (!body) return http_reply_error(r, &e);
    static const char *const allowed[] = {"model", "tokens", NULL};
    int32_t *ids = NULL;
    int n = 0;
    int rc = check_fields(s, body, allowed, &e);
    if (!rc) {
        const json_t *t = json_object_get(body, "tokens");
        rc = t ? api_parse_token_ids(t, "tokens", tokenizer_n_vocab(s->m->tok), &ids, &n, &e)
               : api_fail(&e, 400, "missing_field", "tokens", "'tokens' is required");
    }
    json_decref(body);
    if (rc) {
        free(ids);
        return http_reply_error(r, &e);
    }
    buf text = {0};
    prompt_decode(s->m->tok, ids, n, true, &text);
    free(ids);
    json_t *out = json_pack("{s:o}", "prompt", resp_string(text.data ? text.data : "", text.len));
    buf_free(&text);
    return http_reply_json(r, 200, out);
}
