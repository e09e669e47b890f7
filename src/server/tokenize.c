/* See tokenize.h. */
#include "server/tokenize.h"

#include "chat/prompt.h"
#include "server/api_json.h"
#include "server/chat_request.h"
#include "server/params.h"
#include "server/prompt_limit.h"
#include "server/completion_json.h"
#include "util/utf8.h"

#include <stdlib.h>
#include <string.h>

static int opt_bool(const json_t *body, const char *key, bool def, bool *out, api_error *e) {
    const json_t *v = json_object_get(body, key);
    *out = def;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v))
        return api_fail(e, 400, "invalid_type", key, "'%s' must be a boolean, got %s", key, api_json_type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* llama-server's /tokenize: {"content", "add_special" (default false),
 * "with_pieces"}. Its "parse_special" (default true) is what a text prompt
 * does here anyway, so only true is taken. */
static int tokenize_llama_body(const served_model *sm, const json_t *body, int32_t **ids, bool *with_pieces,
                               api_error *e) {
    static const char *const allowed[] = {"model", "content", "add_special", "with_pieces", "parse_special", NULL};
    if (server_check_fields(body, allowed, e)) return -1;
    const json_t *content = json_object_get(body, "content");
    if (!json_is_string(content))
        return api_fail(e, 400, "invalid_type", "content", "'content' must be a string, got %s",
                        api_json_type_name(content));
    bool add_special, parse_special;
    if (opt_bool(body, "add_special", false, &add_special, e)) return -1;
    if (opt_bool(body, "with_pieces", false, with_pieces, e)) return -1;
    if (opt_bool(body, "parse_special", true, &parse_special, e)) return -1;
    if (!parse_special)
        return api_fail(e, 400, "unsupported_field", "parse_special",
                        "'parse_special': false is not supported (a text prompt always parses control tokens)");
    const prompt_budget budget = {.max_len = sm->max_model_len, .room = 0};
    return prompt_limit_text(sm->m->tok, json_string_value(content), json_string_length(content), add_special,
                             &budget, "content", ids, e);
}

/* llama-server's piece: the token's text, or its bytes as numbers when they
 * are not valid UTF-8 on their own (part of a multi-byte character). */
static json_t *token_piece(const tokenizer *tok, int32_t id) {
    buf b = {0};
    token_bytes(tok, id, &b);
    json_t *piece;
    if (utf8_valid(b.data ? b.data : "", b.len)) {
        piece = json_stringn(b.data ? b.data : "", b.len);
    } else {
        piece = json_array();
        for (size_t i = 0; i < b.len; i++) json_array_append_new(piece, json_integer((unsigned char)b.data[i]));
    }
    buf_free(&b);
    return json_pack("{s:i,s:o}", "id", id, "piece", piece);
}

static json_t *llama_tokens(const tokenizer *tok, const int32_t *ids, int n, bool with_pieces) {
    json_t *tokens = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(tokens, with_pieces ? token_piece(tok, ids[i]) : json_integer(ids[i]));
    return json_pack("{s:o}", "tokens", tokens);
}

/* messages as generation renders them, with vLLM's chat fields. */
static int tokenize_messages(const served_model *sm, const json_t *body, const json_t *messages,
                             const prompt_budget *budget, int32_t **ids, api_error *e) {
    api_request req = {.kind = API_CHAT, .add_generation_prompt = true};
    chat_setup chat = {0};
    int n = -1;
    /* vLLM's tokenize request takes the tools the template renders. */
    api_tools_init(&req.tools);
    const json_t *tools = json_object_get(body, "tools");
    if (!api_parse_messages(messages, &req.messages, e) &&
        !(tools && !json_is_null(tools) && api_parse_tools(tools, &req.tools, e)) &&
        !api_vllm_parse_all(body, tokenizer_n_vocab(sm->m->tok), &req, e) && !api_vllm_check(&req, e) &&
        !chat_setup_init(&chat, &req, sm->tmpl, e))
        n = prompt_limit_chat(sm->m->tok, chat.tmpl, chat.messages, &chat.opts, budget, "messages", ids, e);
    chat_setup_free(&chat);
    api_request_free(&req);
    return n;
}

static int tokenize_body(const served_model *sm, const json_t *body, int32_t **ids, bool *token_strs,
                         api_error *e) {
    static const char *const allowed[] = {"model", "prompt", "messages", "tools", "add_special_tokens",
                                          "add_generation_prompt", "return_token_strs", "continue_final_message",
                                          "chat_template", "chat_template_kwargs", "documents", NULL};
    if (server_check_fields(body, allowed, e)) return -1;
    if (opt_bool(body, "return_token_strs", false, token_strs, e)) return -1;
    const json_t *prompt = json_object_get(body, "prompt"), *messages = json_object_get(body, "messages");
    const bool has_prompt = prompt && !json_is_null(prompt), has_messages = messages && !json_is_null(messages);
    if (has_prompt == has_messages)
        return api_fail(e, 400, "invalid_value", "prompt", "give exactly one of 'prompt' and 'messages'");
    const tokenizer *tok = sm->m->tok;
    bool add_special;
    if (opt_bool(body, "add_special_tokens", has_prompt, &add_special, e)) return -1;
    /* A text longer than the context is refused, as generation would. */
    const prompt_budget budget = {.max_len = sm->max_model_len, .room = 0};
    if (has_prompt) {
        static const char *const chat_only[] = {"continue_final_message", "chat_template", "chat_template_kwargs",
                                                "documents", NULL};
        for (int i = 0; chat_only[i]; i++) {
            const json_t *v = json_object_get(body, chat_only[i]);
            if (v && !json_is_null(v))
                return api_fail(e, 400, "invalid_value", chat_only[i], "'%s' applies to 'messages' only",
                                chat_only[i]);
        }
        bool add_gen; /* meaningless for a prompt, but still a boolean */
        if (opt_bool(body, "add_generation_prompt", true, &add_gen, e)) return -1;
        if (!json_is_string(prompt))
            return api_fail(e, 400, "invalid_type", "prompt", "'prompt' must be a string, got %s",
                            api_json_type_name(prompt));
        return prompt_limit_text(tok, json_string_value(prompt), json_string_length(prompt), add_special, &budget,
                                 "prompt", ids, e);
    }
    return tokenize_messages(sm, body, messages, &budget, ids, e);
}

/* Answers /tokenize with sm, taking body. */
static enum MHD_Result answer_tokenize(const served_model *sm, http_req *r, json_t *body) {
    api_error e;
    int32_t *ids = NULL;
    /* "content" is llama-server's request; everything else is vLLM's. */
    const bool llama = json_is_object(body) && json_object_get(body, "content");
    bool with_pieces = false, token_strs = false;
    const int n = llama ? tokenize_llama_body(sm, body, &ids, &with_pieces, &e)
                        : tokenize_body(sm, body, &ids, &token_strs, &e);
    json_decref(body);
    if (n < 0) {
        free(ids);
        return http_reply_error(r, &e);
    }
    json_t *out;
    if (llama) {
        out = llama_tokens(sm->m->tok, ids, n, with_pieces);
    } else {
        json_t *tokens = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(tokens, json_integer(ids[i]));
        out = json_pack("{s:o,s:i,s:i}", "tokens", tokens, "count", n, "max_model_len", sm->max_model_len);
        if (token_strs) { /* vLLM: the vocabulary's strings, as the tokenizer spells them */
            json_t *strs = json_array();
            for (int i = 0; i < n; i++) {
                const char *t = tokenizer_token_text(sm->m->tok, ids[i]);
                json_array_append_new(strs, resp_string(t, strlen(t)));
            }
            json_object_set_new(out, "token_strs", strs);
        }
    }
    free(ids);
    return http_reply_json(r, 200, out);
}

/* Answers /detokenize with sm, taking body. */
static enum MHD_Result answer_detokenize(const served_model *sm, http_req *r, json_t *body) {
    api_error e;
    static const char *const allowed[] = {"model", "tokens", NULL};
    int32_t *ids = NULL;
    int n = 0;
    int rc = server_check_fields(body, allowed, &e);
    if (!rc) {
        const json_t *t = json_object_get(body, "tokens");
        rc = t ? api_parse_token_ids(t, "tokens", tokenizer_n_vocab(sm->m->tok), &ids, &n, &e)
               : api_fail(&e, 400, "missing_field", "tokens", "'tokens' is required");
    }
    json_decref(body);
    if (rc) {
        free(ids);
        return http_reply_error(r, &e);
    }
    buf text = {0};
    prompt_decode(sm->m->tok, ids, n, true, &text);
    free(ids);
    /* vLLM's clients read "prompt", llama-server's read "content": both. */
    json_t *out = json_pack("{s:o,s:o}", "prompt", resp_string(text.data ? text.data : "", text.len), "content",
                            resp_string(text.data ? text.data : "", text.len));
    buf_free(&text);
    return http_reply_json(r, 200, out);
}

/* The body's model, held until served_models_release; NULL after freeing
 * the body, with a 404 (unknown) or 503 (not loadable) in *e. */
static served_model *route(server *s, json_t *body, const char *api, api_error *e) {
    served_model *sm = served_models_route(&s->models, body, e);
    if (sm && (served_models_check_task(sm, false, api, e) || served_models_acquire(&s->models, sm, e)))
        sm = NULL;
    if (!sm) json_decref(body);
    return sm;
}

typedef enum MHD_Result (*answer_fn)(const served_model *sm, http_req *r, json_t *body);

/* Parses the body, holds the model it names while `answer` runs. */
static enum MHD_Result with_model(server *s, http_req *r, const char *api, answer_fn answer) {
    api_error e;
    json_t *body = http_body_json(r, &e);
    served_model *sm = body ? route(s, body, api, &e) : NULL;
    if (!sm) return http_reply_error(r, &e);
    const enum MHD_Result rc = answer(sm, r, body);
    served_models_release(&s->models, sm);
    return rc;
}

enum MHD_Result handle_tokenize(server *s, http_req *r) { return with_model(s, r, "Tokenize", answer_tokenize); }

enum MHD_Result handle_detokenize(server *s, http_req *r) { return with_model(s, r, "Detokenize", answer_detokenize); }
