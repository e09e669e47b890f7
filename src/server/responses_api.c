/* See responses_api.h. The request is checked field by field here (its own
 * names: input, instructions, max_output_tokens), then handed to the chat
 * path as a chat body, so sampling, limits and errors are the chat
 * endpoint's; this file only shapes the answer (a gen_shape). */
#include "server/responses_api.h"

#include "server/api_json.h"
#include "server/completions.h"
#include "server/params.h"
#include "server/completion_json.h"
#include "server/sse.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- the request ---- */

/* Fields passed to the chat request as they are. */
static const char *const PASSED[] = {"model", "temperature", "top_p", "stream", NULL};

/* Fields that only matter with state, tools or reasoning: a 400 unless null
 * (or, where noted, their "nothing" value). */
static const char *const REFUSED[] = {"previous_response_id", "conversation", "prompt", "reasoning", "background",
                                      "max_tool_calls", "top_logprobs", "include", "tools", "tool_choice", NULL};

static bool in(const char *const *list, const char *name) {
    for (; *list; list++)
        if (!strcmp(*list, name)) return true;
    return false;
}

/* The "nothing" values of refused fields that clients send by default. */
static bool refused_but_empty(const char *k, const json_t *v) {
    if (json_is_null(v)) return true;
    if ((!strcmp(k, "tools") || !strcmp(k, "include")) && json_is_array(v) && json_array_size(v) == 0) return true;
    if (!strcmp(k, "tool_choice") && json_is_string(v) &&
        (!strcmp(json_string_value(v), "none") || !strcmp(json_string_value(v), "auto")))
        return true;
    if (!strcmp(k, "background") && json_is_false(v)) return true;
    if (!strcmp(k, "top_logprobs") && json_is_integer(v) && json_integer_value(v) == 0) return true;
    return false;
}

/* One content part of input[i] as a chat text part. */
static int content_part(const json_t *part, const char *param, json_t *parts, api_error *e) {
    if (!json_is_object(part)) return api_type_error(e, param, "an object", part);
    const json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
    const char *t = json_is_string(type) ? json_string_value(type) : "";
    if (strcmp(t, "input_text") && strcmp(t, "output_text"))
        return api_fail(e, 400, "unsupported_content", param,
                        "content parts of type '%.32s' are not supported (only 'input_text' and 'output_text')", t);
    if (!json_is_string(text))
        return api_type_error(e, param, "a text part with a string 'text'", text ? text : json_null());
    json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", text));
    return 0;
}

/* input[i], a message item, as a chat message appended to msgs. */
static int message_item(const json_t *item, size_t i, json_t *msgs, api_error *e) {
    char param[64];
    snprintf(param, sizeof param, "input[%zu]", i);
    if (!json_is_object(item)) return api_type_error(e, param, "a message item", item);
    const json_t *type = json_object_get(item, "type");
    if (type && !json_is_null(type) && (!json_is_string(type) || strcmp(json_string_value(type), "message")))
        return api_fail(e, 400, "unsupported_item", param,
                        "input items of type '%.32s' are not supported (only messages)",
                        json_is_string(type) ? json_string_value(type) : api_json_type_name(type));
    const json_t *role = json_object_get(item, "role"), *content = json_object_get(item, "content");
    if (!json_is_string(role)) return api_fail(e, 400, "missing_field", param, "'%s.role' must be a string", param);
    if (json_is_string(content)) {
        json_array_append_new(msgs, json_pack("{s:O,s:O}", "role", role, "content", content));
        return 0;
    }
    if (!json_is_array(content))
        return api_type_error(e, param, "a message whose 'content' is a string or a list of parts",
                              content ? content : json_null());
    json_t *parts = json_array();
    size_t k;
    const json_t *part;
    json_array_foreach(content, k, part) {
        snprintf(param, sizeof param, "input[%zu].content[%zu]", i, k);
        if (content_part(part, param, parts, e)) {
            json_decref(parts);
            return -1;
        }
    }
    json_array_append_new(msgs, json_pack("{s:O,s:o}", "role", role, "content", parts));
    return 0;
}

/* instructions and input as chat messages (the chat parser checks roles). */
static json_t *to_messages(const json_t *body, api_error *e) {
    const json_t *input = json_object_get(body, "input"), *instructions = json_object_get(body, "instructions");
    json_t *msgs = json_array();
    if (instructions && !json_is_null(instructions)) {
        if (!json_is_string(instructions)) {
            json_decref(msgs);
            api_type_error(e, "instructions", "a string", instructions);
            return NULL;
        }
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", instructions));
    }
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input));
        return msgs;
    }
    if (!json_is_array(input) || json_array_size(input) == 0) {
        json_decref(msgs);
        if (!input || json_is_null(input)) api_fail(e, 400, "missing_field", "input", "'input' is required");
        else if (json_is_array(input)) api_fail(e, 400, "invalid_value", "input", "'input' must not be empty");
        else api_type_error(e, "input", "a string or a list of message items", input);
        return NULL;
    }
    size_t i;
    const json_t *item;
    json_array_foreach(input, i, item) {
        if (message_item(item, i, msgs, e)) {
            json_decref(msgs);
            return NULL;
        }
    }
    return msgs;
}

/* text: {"format": {"type": "text"}} is the only format served. */
static int check_text(const json_t *v, api_error *e) {
    if (!json_is_object(v)) return api_type_error(e, "text", "an object", v);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (json_is_null(val)) continue;
        const json_t *type = json_object_get(val, "type");
        if (strcmp(key, "format") || !json_is_string(type) || strcmp(json_string_value(type), "text"))
            return api_fail(e, 400, "unsupported_field", "text",
                            "'text.%.32s' is not supported (only {\"format\": {\"type\": \"text\"}})", key);
    }
    return 0;
}

/* The body as a chat request, or NULL with *e. */
static json_t *to_chat_body(const json_t *body, api_error *e) {
    if (!json_is_object(body)) {
        api_type_error(e, "body", "a JSON object", body);
        return NULL;
    }
    json_t *chat = json_object();
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)body, k, v) {
        int rc = 0;
        if (in(PASSED, k)) {
            json_object_set(chat, k, (json_t *)v);
        } else if (!strcmp(k, "input") || !strcmp(k, "instructions")) {
            continue; /* below */
        } else if (!strcmp(k, "max_output_tokens")) {
            long long x;
            if (json_is_null(v)) continue;
            rc = api_get_int(v, k, 1, INT_MAX, &x, e);
            if (!rc) json_object_set_new(chat, "max_completion_tokens", json_integer(x));
        } else if (!strcmp(k, "store") && json_is_true(v)) {
            rc = api_fail(e, 400, "unsupported_field", k,
                          "'store': true is not supported: this server keeps no responses (send \"store\": false)");
        } else if (!strcmp(k, "truncation")) {
            if (!json_is_null(v) && (!json_is_string(v) || strcmp(json_string_value(v), "disabled")))
                rc = api_fail(e, 400, "unsupported_field", k, "'truncation' may only be \"disabled\"");
        } else if (!strcmp(k, "text")) {
            rc = json_is_null(v) ? 0 : check_text(v, e);
        } else if (!strcmp(k, "parallel_tool_calls")) {
            /* Tools are refused here, so it changes nothing; the SDKs send it. */
            if (!json_is_null(v) && !json_is_boolean(v)) rc = api_type_error(e, k, "a boolean", v);
        } else if (!strcmp(k, "stream_options")) {
            if (!json_is_null(v) && !json_is_object(v)) rc = api_type_error(e, k, "an object", v);
        } else if (in(REFUSED, k)) {
            if (!refused_but_empty(k, v))
                rc = api_fail(e, 400, "unsupported_field", k, "'%s' is not supported by this server", k);
        } else {
            const int ignored = api_ignored_field(k, v, e);
            if (ignored < 0) rc = -1;
            else if (!ignored)
                rc = api_fail(e, 400, "unknown_field", k, "Unrecognized request argument supplied: %.64s", k);
        }
        if (rc) {
            json_decref(chat);
            return NULL;
        }
    }
    json_t *msgs = to_messages(body, e);
    if (!msgs) {
        json_decref(chat);
        return NULL;
    }
    json_object_set_new(chat, "messages", msgs);
    return chat;
}

/* ---- the answer ---- */

typedef struct {
    char id[80], msg_id[80];
    const char *model;
    long long created_at;
    json_t *echo;    /* the request's settings a response repeats */
    long long seq;   /* the next event's sequence_number */
} resp_state;

static void free_state(void *ctx) {
    resp_state *c = ctx;
    json_decref(c->echo);
    free(c);
}

static json_t *output_text_part(const char *text, size_t len) {
    return json_pack("{s:s,s:o,s:[],s:[]}", "type", "output_text", "text", resp_string(text, len), "annotations",
                     "logprobs");
}

static json_t *message_item_json(const resp_state *c, const char *status, json_t *content) {
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "id", c->msg_id, "type", "message", "status", status, "role",
                     "assistant", "content", content);
}

static bool stopped_by_length(const gen *g) { return g->choices[0].reason == FINISH_LENGTH; }

/* The response object; g NULL: still in progress (no output, no usage). */
static json_t *response_json(const resp_state *c, const gen *g) {
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:n,s:n,s:s,s:[],s:b,s:n,s:b,s:o,s:s,s:[],s:s,s:{s:n,s:n},s:{s:{s:s}}}",
                          "id", c->id, "object", "response", "created_at", (json_int_t)c->created_at, "status",
                          "in_progress", "error", "incomplete_details", "model", c->model, "output",
                          "parallel_tool_calls", true, "previous_response_id", "store", false, "usage", json_null(),
                          "tool_choice", "auto", "tools", "truncation", "disabled", "reasoning", "effort", "summary",
                          "text", "format", "type", "text");
    json_object_update(r, c->echo);
    if (!g) return r;
    const gen_choice *ch = &g->choices[0];
    const bool incomplete = stopped_by_length(g);
    json_object_set_new(r, "status", json_string(incomplete ? "incomplete" : "completed"));
    if (incomplete) json_object_set_new(r, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    json_t *content = json_pack("[o]", output_text_part(ch->text.data ? ch->text.data : "", ch->text.len));
    json_object_set_new(r, "output", json_pack("[o]", message_item_json(c, incomplete ? "incomplete" : "completed",
                                                                        content)));
    const int in_tokens = g->prompt_tokens[0], out_tokens = ch->n_tokens;
    json_object_set_new(r, "usage",
                        json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", in_tokens, "input_tokens_details",
                                  "cached_tokens", g->cached_tokens[0], "output_tokens", out_tokens,
                                  "output_tokens_details", "reasoning_tokens", 0, "total_tokens",
                                  in_tokens + out_tokens));
    return r;
}

static json_t *body_hook(void *ctx, const gen *g) { return response_json(ctx, g); }

/* Appends one typed event: its type and sequence_number are added to j (stolen). */
static void event(resp_state *c, buf *out, const char *type, json_t *j) {
    json_object_set_new(j, "type", json_string(type));
    json_object_set_new(j, "sequence_number", json_integer(c->seq++));
    if (sse_append_event(out, type, j)) out->oom = true;
    json_decref(j);
}

/* The fields that place an event in the one message item. */
static json_t *at_part(const resp_state *c) {
    return json_pack("{s:s,s:i,s:i}", "item_id", c->msg_id, "output_index", 0, "content_index", 0);
}

static void stream_start(void *ctx, buf *out) {
    resp_state *c = ctx;
    event(c, out, "response.created", json_pack("{s:o}", "response", response_json(c, NULL)));
    event(c, out, "response.in_progress", json_pack("{s:o}", "response", response_json(c, NULL)));
    event(c, out, "response.output_item.added",
          json_pack("{s:i,s:o}", "output_index", 0, "item", message_item_json(c, "in_progress", json_array())));
    json_t *j = at_part(c);
    json_object_set_new(j, "part", output_text_part("", 0));
    event(c, out, "response.content_part.added", j);
}

static void stream_delta(void *ctx, buf *out, const char *text, size_t len) {
    resp_state *c = ctx;
    json_t *j = at_part(c);
    json_object_set_new(j, "delta", resp_string(text, len));
    json_object_set_new(j, "logprobs", json_array());
    event(c, out, "response.output_text.delta", j);
}

static void stream_end(void *ctx, buf *out, const gen *g) {
    resp_state *c = ctx;
    const gen_choice *ch = &g->choices[0];
    const char *text = ch->text.data ? ch->text.data : "";
    json_t *j = at_part(c);
    json_object_set_new(j, "text", resp_string(text, ch->text.len));
    json_object_set_new(j, "logprobs", json_array());
    event(c, out, "response.output_text.done", j);
    j = at_part(c);
    json_object_set_new(j, "part", output_text_part(text, ch->text.len));
    event(c, out, "response.content_part.done", j);
    const bool incomplete = stopped_by_length(g);
    json_t *item = message_item_json(c, incomplete ? "incomplete" : "completed",
                                     json_pack("[o]", output_text_part(text, ch->text.len)));
    event(c, out, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", 0, "item", item));
    /* OpenAI ends a response cut by max_output_tokens with response.incomplete. */
    event(c, out, incomplete ? "response.incomplete" : "response.completed",
          json_pack("{s:o}", "response", response_json(c, g)));
}

static void stream_error(void *ctx, buf *out, const api_error *e) {
    resp_state *c = ctx;
    event(c, out, "error", json_pack("{s:s?,s:s,s:n}", "code", e->code, "message", e->message, "param"));
}

/* What a response repeats of its request. */
static json_t *echo_of(const json_t *body) {
    static const char *const ECHOED[] = {"instructions", "max_output_tokens", "temperature", "top_p", "metadata",
                                         "user", NULL};
    json_t *echo = json_pack("{s:n,s:n,s:n,s:n,s:{},s:n}", "instructions", "max_output_tokens", "temperature",
                             "top_p", "metadata", "user");
    for (const char *const *k = ECHOED; *k; k++) {
        const json_t *v = json_object_get(body, *k);
        if (v && !json_is_null(v)) json_object_set(echo, *k, (json_t *)v);
    }
    return echo;
}

enum MHD_Result handle_responses(server *s, http_req *r) {
    api_error e;
    json_t *body = http_body_json(r, &e);
    if (!body) return http_reply_error(r, &e);
    served_model *sm = served_models_route(&s->models, body, &e);
    if (sm && served_models_check_task(sm, false, "Responses", &e)) sm = NULL;
    json_t *chat = sm ? to_chat_body(body, &e) : NULL;
    resp_state *c = chat ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        if (chat) api_fail(&e, 500, "out_of_memory", NULL, "out of memory");
        json_decref(chat);
        json_decref(body);
        return http_reply_error(r, &e);
    }
    server_new_id(s, "resp_", c->id, sizeof c->id);
    server_new_id(s, "msg_", c->msg_id, sizeof c->msg_id);
    c->model = sm->name;
    c->created_at = (long long)time(NULL);
    c->echo = echo_of(body);
    json_decref(body);
    const gen_shape shape = {.ctx = c, .free_ctx = free_state, .body = body_hook, .stream_start = stream_start,
                             .stream_delta = stream_delta, .stream_end = stream_end, .stream_error = stream_error};
    return handle_generation_shaped(s, sm, r, chat, &shape);
}
