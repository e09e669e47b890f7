/* See params.h. Each field has a small parser that checks the JSON type and
 * the range and writes into the request; a table says which fields each
 * endpoint takes. JSON null means "not given" for every optional field, as in
 * OpenAI's and vLLM's schemas. */
#include "server/params.h"

#include "server/structured.h"

#include "util/buf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *api_json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int type_error(api_error *e, const char *field, const char *want, const json_t *v) {
    return api_fail(e, 400, "invalid_type", field, "'%s' must be %s, got %s", field, want, api_json_type_name(v));
}

static int get_number(const json_t *v, const char *field, double lo, double hi, bool lo_open, bool hi_open,
                      double *out, api_error *e) {
    if (!json_is_number(v)) return type_error(e, field, "a number", v);
    const double d = json_number_value(v);
    if (!isfinite(d) || (lo_open ? d <= lo : d < lo) || (hi_open ? d >= hi : d > hi))
        return api_fail(e, 400, "invalid_value", field, "'%s' must be in %s%g, %g%s, got %g", field,
                        lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]", d);
    *out = d;
    return 0;
}

static int get_int(const json_t *v, const char *field, long long lo, long long hi, long long *out, api_error *e) {
    if (!json_is_integer(v)) return type_error(e, field, "an integer", v);
    const long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        if (hi == LLONG_MAX)
            return api_fail(e, 400, "invalid_value", field, "'%s' must be at least %lld, got %lld", field, lo, x);
        return api_fail(e, 400, "invalid_value", field, "'%s' must be in [%lld, %lld], got %lld", field, lo, hi, x);
    }
    *out = x;
    return 0;
}

static int get_bool(const json_t *v, const char *field, bool *out, api_error *e) {
    if (!json_is_boolean(v)) return type_error(e, field, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

/* ---- token ids ---- */

int api_parse_token_ids(const json_t *v, const char *param, int n_vocab, int32_t **out, int *n, api_error *e) {
    *out = NULL;
    *n = 0;
    if (!json_is_array(v)) return type_error(e, param, "a list of token ids", v);
    const size_t len = json_array_size(v);
    if (len > (size_t)INT_MAX / 8) return api_fail(e, 400, "invalid_value", param, "'%s' is too long", param);
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    if (!ids) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    for (size_t i = 0; i < len; i++) {
        const json_t *t = json_array_get(v, i);
        if (!json_is_integer(t)) {
            free(ids);
            return api_fail(e, 400, "invalid_type", param, "'%s' must hold integer token ids; item %zu is %s", param,
                            i, api_json_type_name(t));
        }
        const long long id = json_integer_value(t);
        if (id < 0 || id >= n_vocab) {
            free(ids);
            return api_fail(e, 400, "invalid_value", param, "token id %lld in '%s' is out of range [0, %d)", id,
                            param, n_vocab);
        }
        ids[i] = (int32_t)id;
    }
    *out = ids;
    *n = (int)len;
    return 0;
}

/* ---- prompt (completions) ---- */

static int parse_prompt(const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (json_is_string(v)) {
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        r->n_prompts = 1;
        r->prompts[0].text = json_string_value(v);
        r->prompts[0].len = json_string_length(v);
        return 0;
    }
    if (!json_is_array(v))
        return type_error(e, "prompt", "a string, a list of strings or a list of token ids", v);
    const size_t len = json_array_size(v);
    if (len == 0) return api_fail(e, 400, "invalid_value", "prompt", "'prompt' must not be an empty list");
    const json_t *first = json_array_get(v, 0);
    if (json_is_integer(first)) { /* one prompt of token ids */
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        r->n_prompts = 1;
        return api_parse_token_ids(v, "prompt", n_vocab, &r->prompts[0].ids, &r->prompts[0].n_ids, e);
    }
    if (len > API_MAX_PROMPTS)
        return api_fail(e, 400, "invalid_value", "prompt", "'prompt' holds %zu prompts; at most %d are allowed", len,
                        API_MAX_PROMPTS);
    r->prompts = calloc(len, sizeof *r->prompts);
    if (!r->prompts) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    r->n_prompts = (int)len;
    for (size_t i = 0; i < len; i++) {
        const json_t *p = json_array_get(v, i);
        if (json_is_string(p) && json_is_string(first)) {
            r->prompts[i].text = json_string_value(p);
            r->prompts[i].len = json_string_length(p);
        } else if (json_is_array(p) && json_is_array(first)) {
            if (api_parse_token_ids(p, "prompt", n_vocab, &r->prompts[i].ids, &r->prompts[i].n_ids, e)) return -1;
            if (r->prompts[i].n_ids == 0)
                return api_fail(e, 400, "invalid_value", "prompt", "prompt %zu is an empty list of token ids", i);
        } else {
            return api_fail(e, 400, "invalid_type", "prompt",
                            "'prompt' must be a string, a list of strings, a list of token ids or a list of lists "
                            "of token ids; item %zu is %s",
                            i, api_json_type_name(p));
        }
    }
    return 0;
}

/* ---- messages (chat) ---- */

static int parse_content(const json_t *c, size_t i, const char *role, buf *text, api_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (json_is_string(c)) {
        buf_append(text, json_string_value(c), json_string_length(c));
        return 0;
    }
    if (json_is_null(c) && !strcmp(role, "assistant")) return 0;
    if (!json_is_array(c)) return type_error(e, param, "a string or a list of content parts", c);
    size_t k;
    const json_t *part;
    json_array_foreach(c, k, part) {
        snprintf(param, sizeof param, "messages[%zu].content[%zu]", i, k);
        if (!json_is_object(part)) return type_error(e, param, "an object", part);
        const json_t *type = json_object_get(part, "type");
        if (!json_is_string(type))
            return api_fail(e, 400, "invalid_value", param, "content part %s needs a string 'type'", param);
        if (strcmp(json_string_value(type), "text"))
            return api_fail(e, 400, "unsupported_content", param,
                            "content parts of type '%s' are not supported (only 'text')", json_string_value(type));
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)part, key, val) {
            if (strcmp(key, "type") && strcmp(key, "text"))
                return api_fail(e, 400, "unknown_field", param, "Unrecognized field '%s' in %s", key, param);
        }
        const json_t *t = json_object_get(part, "text");
        if (!json_is_string(t)) return type_error(e, param, "a text part with a string 'text'", t ? t : json_null());
        if (k > 0) buf_puts(text, "\n"); /* vLLM joins text parts with newlines */
        buf_append(text, json_string_value(t), json_string_length(t));
    }
    return 0;
}

int api_parse_messages(const json_t *v, json_t **out, api_error *e) {
    *out = NULL;
    if (!json_is_array(v)) return type_error(e, "messages", "a list of messages", v);
    if (json_array_size(v) == 0)
        return api_fail(e, 400, "invalid_value", "messages", "'messages' must contain at least one message");
    json_t *msgs = json_array();
    size_t i;
    const json_t *m;
    char param[64];
    json_array_foreach(v, i, m) {
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) {
            json_decref(msgs);
            return type_error(e, param, "an object", m);
        }
        const json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!json_is_string(role)) {
            json_decref(msgs);
            return role ? type_error(e, param, "a string", role)
                        : api_fail(e, 400, "missing_field", param, "'%s' is required", param);
        }
        const char *rs = json_string_value(role);
        const char *mapped = NULL;
        if (!strcmp(rs, "system") || !strcmp(rs, "developer")) mapped = "system";
        else if (!strcmp(rs, "user")) mapped = "user";
        else if (!strcmp(rs, "assistant")) mapped = "assistant";
        else if (!strcmp(rs, "tool")) mapped = "tool";
        if (!mapped) {
            json_decref(msgs);
            if (!strcmp(rs, "function"))
                return api_fail(e, 400, "unsupported_role", param,
                                "messages with role 'function' are not supported (use 'tool')");
            return api_fail(e, 400, "invalid_value", param,
                            "'%s' must be one of 'system', 'developer', 'user', 'assistant', 'tool'; got '%.64s'",
                            param, rs);
        }
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)m, key, val) {
            if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "name")) continue;
            if (api_message_tool_key(mapped, key)) continue;
            if (json_is_null(val) || (!strcmp(key, "tool_calls") && json_array_size(val) == 0)) continue;
            snprintf(param, sizeof param, "messages[%zu].%.32s", i, key);
            json_decref(msgs);
            if (!strcmp(key, "tool_calls") || !strcmp(key, "function_call") || !strcmp(key, "audio"))
                return api_fail(e, 400, "unsupported_field", param, "'%s' is not supported by this server", param);
            return api_fail(e, 400, "unknown_field", param, "Unrecognized field '%s'", param);
        }
        const json_t *name = json_object_get(m, "name");
        if (name && !json_is_null(name) && !json_is_string(name)) {
            snprintf(param, sizeof param, "messages[%zu].name", i);
            json_decref(msgs);
            return type_error(e, param, "a string", name);
        }
        const json_t *content = json_object_get(m, "content");
        if (!content) {
            if (strcmp(mapped, "assistant")) {
                snprintf(param, sizeof param, "messages[%zu].content", i);
                json_decref(msgs);
                return api_fail(e, 400, "missing_field", param, "'%s' is required", param);
            }
            content = json_null();
        }
        buf text = {0};
        if (parse_content(content, i, mapped, &text, e)) {
            buf_free(&text);
            json_decref(msgs);
            return -1;
        }
        json_t *c = text.oom ? NULL : json_stringn(text.data ? text.data : "", text.len);
        buf_free(&text);
        if (!c) {
            json_decref(c);
            json_decref(msgs);
            return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        }
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string(mapped));
        json_object_set_new(o, "content", c);
        if (json_is_string(name)) json_object_set(o, "name", (json_t *)name);
        json_array_append_new(msgs, o);
        if (api_message_tool_fields(m, i, mapped, o, e)) {
            json_decref(msgs);
            return -1;
        }
        /* A call without text has content None, as the client sent it. */
        if (json_is_null(content) && json_object_get(o, "tool_calls")) json_object_set_new(o, "content", json_null());
    }
    *out = msgs;
    return 0;
}

/* ---- stop, stop_token_ids, logit_bias ---- */

static int parse_stop(const json_t *v, api_request *r, api_error *e) {
    const char *single = NULL;
    size_t n = 0;
    if (json_is_string(v)) {
        single = json_string_value(v);
        n = 1;
    } else if (json_is_array(v)) {
        n = json_array_size(v);
    } else {
        return type_error(e, "stop", "a string or a list of strings", v);
    }
    if (n > API_MAX_STOP)
        return api_fail(e, 400, "invalid_value", "stop", "'stop' holds %zu strings; at most %d are allowed", n,
                        API_MAX_STOP);
    r->stops = calloc(n ? n : 1, sizeof *r->stops);
    if (!r->stops) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *s = single ? v : json_array_get(v, i);
        if (!json_is_string(s))
            return api_fail(e, 400, "invalid_type", "stop", "'stop' must hold strings; item %zu is %s", i,
                            api_json_type_name(s));
        if (json_string_length(s) == 0)
            return api_fail(e, 400, "invalid_value", "stop", "stop strings must not be empty");
        if (!(r->stops[i] = strdup(json_string_value(s)))) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        r->rp.n_stop = (int)i + 1;
    }
    r->rp.stop = (const char *const *)r->stops;
    return 0;
}

static int parse_logit_bias(const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (!json_is_object(v)) return type_error(e, "logit_bias", "an object mapping token ids to biases", v);
    const size_t n = json_object_size(v);
    if (n > API_MAX_LOGIT_BIAS)
        return api_fail(e, 400, "invalid_value", "logit_bias", "'logit_bias' holds %zu entries; at most %d are allowed",
                        n, API_MAX_LOGIT_BIAS);
    r->bias = calloc(n ? n : 1, sizeof *r->bias);
    if (!r->bias) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    const char *key;
    const json_t *val;
    int k = 0;
    json_object_foreach((json_t *)v, key, val) {
        char *end;
        errno = 0;
        const long id = strtol(key, &end, 10);
        if (errno || end == key || *end || key[0] == ' ' || key[0] == '+')
            return api_fail(e, 400, "invalid_value", "logit_bias", "logit_bias key '%.64s' is not a token id", key);
        if (id < 0 || id >= n_vocab)
            return api_fail(e, 400, "invalid_value", "logit_bias",
                            "logit_bias token id %ld is out of range [0, %d)", id, n_vocab);
        double b;
        if (get_number(val, "logit_bias", -100, 100, false, false, &b, e)) return -1;
        r->bias[k++] = (logit_bias_entry){.token = (int32_t)id, .bias = (float)b};
    }
    r->rp.sampling.logit_bias = r->bias;
    r->rp.sampling.n_logit_bias = k;
    return 0;
}

static int parse_stream_options(const json_t *v, api_request *r, api_error *e) {
    if (!json_is_object(v)) return type_error(e, "stream_options", "an object", v);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!strcmp(key, "include_usage")) {
            if (!json_is_null(val) && get_bool(val, "stream_options.include_usage", &r->include_usage, e)) return -1;
        } else if (!strcmp(key, "include_obfuscation")) {
            /* OpenAI pads stream events against side channels; on a local
             * server there is none to guard, and leaving the padding out
             * changes no generated text. */
            bool ignored;
            if (!json_is_null(val) && get_bool(val, "stream_options.include_obfuscation", &ignored, e)) return -1;
        } else {
            char param[80];
            snprintf(param, sizeof param, "stream_options.%.48s", key);
            return api_fail(e, 400, "unknown_field", param, "Unrecognized request argument supplied: %s", param);
        }
    }
    return 0;
}

/* ---- accepted and ignored ---- */

/* OpenAI fields that change nothing in the generated text: they are checked
 * for their documented type and then ignored, so clients that always send
 * them work. The one list of them (README.md, "Accepted and ignored fields",
 * mirrors it). Fields that would change the output if ignored
 * (reasoning_effort, audio, functions, ...) stay in the refused list below. */
typedef int (*ignored_check)(const json_t *v, const char *field, api_error *e);

static int check_bool(const json_t *v, const char *field, api_error *e) {
    bool b;
    return get_bool(v, field, &b, e);
}

static int check_string(const json_t *v, const char *field, api_error *e) {
    return json_is_string(v) ? 0 : type_error(e, field, "a string", v);
}

static int check_metadata(const json_t *v, const char *field, api_error *e) {
    if (!json_is_object(v)) return type_error(e, field, "an object of strings", v);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val))
            return api_fail(e, 400, "invalid_type", field, "'%s' must map keys to strings; '%.64s' is %s", field, key,
                            api_json_type_name(val));
    }
    return 0;
}

/* Only text can come out of this server: ["text"] asks for nothing else. */
static int check_modalities(const json_t *v, const char *field, api_error *e) {
    if (!json_is_array(v)) return type_error(e, field, "a list of strings", v);
    size_t i;
    const json_t *m;
    json_array_foreach(v, i, m) {
        if (!json_is_string(m) || strcmp(json_string_value(m), "text"))
            return api_fail(e, 400, "unsupported_field", field,
                            "'%s' may only ask for [\"text\"]; item %zu is not \"text\"", field, i);
    }
    return 0;
}

/* A predicted output only makes OpenAI faster; the text is the same. */
static int check_prediction(const json_t *v, const char *field, api_error *e) {
    if (!json_is_object(v)) return type_error(e, field, "an object", v);
    const json_t *t = json_object_get(v, "type");
    if (!json_is_string(t) || strcmp(json_string_value(t), "content"))
        return api_fail(e, 400, "invalid_value", field, "'%s' needs \"type\": \"content\"", field);
    const json_t *c = json_object_get(v, "content");
    if (!json_is_string(c) && !json_is_array(c))
        return type_error(e, "prediction.content", "a string or a list of content parts", c ? c : json_null());
    return 0;
}

static const struct {
    const char *name;
    ignored_check check;
} IGNORED[] = {
    {"user", check_string},              /* an end-user id for abuse reports */
    {"safety_identifier", check_string}, /* user's successor */
    {"prompt_cache_key", check_string},  /* a routing hint; the prefix cache works without it */
    {"store", check_bool},               /* keep the output for OpenAI's evals; nothing is stored here */
    {"metadata", check_metadata},        /* tags for stored completions */
    {"service_tier", check_string},      /* OpenAI's capacity tiers */
    {"modalities", check_modalities},
    {"prediction", check_prediction},
};

static ignored_check ignored_field_check(const char *name) {
    for (size_t i = 0; i < sizeof IGNORED / sizeof *IGNORED; i++)
        if (!strcmp(IGNORED[i].name, name)) return IGNORED[i].check;
    return NULL;
}

bool api_field_ignored(const char *name) { return ignored_field_check(name) != NULL; }
int api_get_bool(const json_t *v, const char *field, bool *out, api_error *e) { return get_bool(v, field, out, e); }

int api_get_int(const json_t *v, const char *field, long long lo, long long hi, long long *out, api_error *e) {
    return get_int(v, field, lo, hi, out, e);
}

int api_type_error(api_error *e, const char *field, const char *want, const json_t *v) {
    return type_error(e, field, want, v);
}

int api_ignored_field(const char *name, const json_t *v, api_error *e) {
    const ignored_check check = ignored_field_check(name);
    if (!check) return 0;
    return json_is_null(v) || !check(v, name, e) ? 1 : -1;
}

/* ---- the field table ---- */

/* F_COMPL_NULL: a chat field that completions accept only as null. */
enum { F_COMMON = 1, F_COMPL = 2, F_CHAT = 4, F_UNSUPPORTED = 8, F_COMPL_NULL = 16 };

static const struct {
    const char *name;
    int where;
} FIELDS[] = {
    {"model", F_COMMON}, {"max_tokens", F_COMMON}, {"temperature", F_COMMON}, {"top_p", F_COMMON},
    {"top_k", F_COMMON}, {"min_p", F_COMMON}, {"n", F_COMMON}, {"stop", F_COMMON}, {"stop_token_ids", F_COMMON},
    {"seed", F_COMMON}, {"presence_penalty", F_COMMON}, {"frequency_penalty", F_COMMON},
    {"repetition_penalty", F_COMMON}, {"logit_bias", F_COMMON}, {"logprobs", F_COMMON}, {"ignore_eos", F_COMMON},
    {"min_tokens", F_COMMON}, {"use_beam_search", F_COMMON}, {"best_of", F_COMMON}, {"length_penalty", F_COMMON},
    {"kv_eviction", F_COMMON}, {"kv_budget", F_COMMON}, {"kv_sink_tokens", F_COMMON},
    {"stream", F_COMMON}, {"stream_options", F_COMMON},
    {"prompt", F_COMPL}, {"echo", F_COMPL},
    {"messages", F_CHAT}, {"max_completion_tokens", F_CHAT}, {"top_logprobs", F_CHAT},
    {"tools", F_CHAT | F_COMPL_NULL}, {"tool_choice", F_CHAT | F_COMPL_NULL},
    {"parallel_tool_calls", F_CHAT | F_COMPL_NULL},
    /* OpenAI fields this server does not implement: a 400 naming them unless null. */
    {"suffix", F_UNSUPPORTED},
    {"functions", F_UNSUPPORTED}, {"function_call", F_UNSUPPORTED}, {"audio", F_UNSUPPORTED},
    {"reasoning_effort", F_UNSUPPORTED}, {"verbosity", F_UNSUPPORTED}, {"web_search_options", F_UNSUPPORTED},
};

static int field_kind(const char *name) {
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++)
        if (!strcmp(FIELDS[i].name, name)) return FIELDS[i].where;
    return 0;
}

/* One field, already known to be allowed and not null. */
static int parse_field(const char *k, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    double d;
    long long x;
    sampling_params *sp = &r->rp.sampling;
    const bool chat = r->kind == API_CHAT;
    if (!strcmp(k, "model")) {
        if (!json_is_string(v)) return type_error(e, k, "a string", v);
        r->model = json_string_value(v);
    } else if (!strcmp(k, "prompt")) {
        return parse_prompt(v, n_vocab, r, e);
    } else if (!strcmp(k, "messages")) {
        return api_parse_messages(v, &r->messages, e);
    } else if (!strcmp(k, "max_tokens") || !strcmp(k, "max_completion_tokens")) {
        if (get_int(v, k, chat ? 1 : 0, LLONG_MAX, &x, e)) return -1;
        r->max_tokens = x;
    } else if (!strcmp(k, "temperature")) {
        if (get_number(v, k, 0, 2, false, false, &d, e)) return -1;
        sp->temperature = (float)d;
    } else if (!strcmp(k, "top_p")) {
        if (get_number(v, k, 0, 1, true, false, &d, e)) return -1;
        sp->top_p = (float)d;
    } else if (!strcmp(k, "top_k")) {
        if (get_int(v, k, -1, INT_MAX, &x, e)) return -1;
        sp->top_k = x <= 0 ? 0 : (int)x; /* -1 and 0 both mean off, as in vLLM */
    } else if (!strcmp(k, "min_p")) {
        if (get_number(v, k, 0, 1, false, false, &d, e)) return -1;
        sp->min_p = (float)d;
    } else if (!strcmp(k, "n")) {
        if (get_int(v, k, 1, API_MAX_N, &x, e)) return -1;
        r->rp.n = (int)x;
    } else if (!strcmp(k, "stop")) {
        return parse_stop(v, r, e);
    } else if (!strcmp(k, "stop_token_ids")) {
        int n;
        if (api_parse_token_ids(v, k, n_vocab, &r->stop_ids, &n, e)) return -1;
        if (n > API_MAX_STOP_IDS)
            return api_fail(e, 400, "invalid_value", k, "'%s' holds %d ids; at most %d are allowed", k, n,
                            API_MAX_STOP_IDS);
        r->rp.stop_token_ids = r->stop_ids;
        r->rp.n_stop_token_ids = n;
    } else if (!strcmp(k, "seed")) {
        if (!json_is_integer(v)) return type_error(e, k, "an integer", v);
        sp->seed = (uint64_t)json_integer_value(v);
        r->seed_given = true;
    } else if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
        if (get_number(v, k, -2, 2, false, false, &d, e)) return -1;
        *(k[0] == 'p' ? &sp->presence_penalty : &sp->frequency_penalty) = (float)d;
    } else if (!strcmp(k, "repetition_penalty")) {
        if (get_number(v, k, 0, 2, true, false, &d, e)) return -1;
        sp->repetition_penalty = (float)d;
    } else if (!strcmp(k, "logit_bias")) {
        return parse_logit_bias(v, n_vocab, r, e);
    } else if (!strcmp(k, "logprobs")) {
        if (chat) {
            bool b = false;
            if (get_bool(v, k, &b, e)) return -1;
            if (b && r->logprobs < 0) r->logprobs = 0;
            if (!b) r->logprobs = -2; /* remembered as "explicitly off" for top_logprobs */
        } else {
            if (get_int(v, k, 0, API_MAX_LOGPROBS, &x, e)) return -1;
            r->logprobs = (int)x;
        }
    } else if (!strcmp(k, "top_logprobs")) {
        if (get_int(v, k, 0, API_MAX_LOGPROBS, &x, e)) return -1;
        r->rp.logprobs = (int)x; /* reconciled with "logprobs" after all fields */
    } else if (!strcmp(k, "echo")) {
        return get_bool(v, k, &r->echo, e);
    } else if (!strcmp(k, "ignore_eos")) {
        return get_bool(v, k, &r->rp.ignore_eos, e);
    } else if (!strcmp(k, "min_tokens")) {
        if (get_int(v, k, 0, INT_MAX, &x, e)) return -1;
        r->rp.min_tokens = (int)x;
    } else if (!strcmp(k, "kv_eviction")) {
        kv_evict_policy pol;
        if (!json_is_string(v)) return type_error(e, k, "a string", v);
        if (kv_evict_parse(json_string_value(v), &pol))
            return api_fail(e, 400, "invalid_value", k, "'%s' must be one of " KV_EVICT_NAMES ", got '%.64s'", k,
                            json_string_value(v));
        r->kv_eviction = (int)pol;
    } else if (!strcmp(k, "kv_budget")) {
        return get_int(v, k, 1, INT_MAX, &r->kv_budget, e);
    } else if (!strcmp(k, "kv_sink_tokens")) {
        return get_int(v, k, 0, INT_MAX, &r->kv_sink_tokens, e);
    } else if (!strcmp(k, "use_beam_search")) {
        return get_bool(v, k, &r->use_beam_search, e);
    } else if (!strcmp(k, "best_of")) {
        if (get_int(v, k, 1, API_MAX_N, &x, e)) return -1;
        r->best_of = (int)x;
    } else if (!strcmp(k, "length_penalty")) {
        if (get_number(v, k, -10, 10, false, false, &d, e)) return -1;
        r->rp.length_penalty = (float)d;
    } else if (!strcmp(k, "stream")) {
        return get_bool(v, k, &r->stream, e);
    } else if (!strcmp(k, "stream_options")) {
        return parse_stream_options(v, r, e);
    } else if (!strcmp(k, "tools")) {
        return api_parse_tools(v, &r->tools, e);
    } else if (!strcmp(k, "tool_choice")) {
        return api_parse_tool_choice(v, &r->tools, e);
    } else if (!strcmp(k, "parallel_tool_calls")) {
        return get_bool(v, k, &r->tools.parallel, e);
    }
    return 0;
}

/* vLLM's beam search: use_beam_search with best_of beams (default n), the n
 * best hypotheses reported. Without it, best_of may only equal n (sampling
 * best_of and keeping the n likeliest is not implemented). */
static int apply_beam_search(api_request *r, api_error *e) {
    const int width = r->best_of ? r->best_of : r->rp.n;
    if (width < r->rp.n)
        return api_fail(e, 400, "invalid_value", "best_of", "'best_of' (%d) must not be less than 'n' (%d)", width,
                        r->rp.n);
    if (!r->use_beam_search) {
        if (width != r->rp.n)
            return api_fail(e, 400, "unsupported_field", "best_of",
                            "'best_of' other than 'n' is only supported with 'use_beam_search'");
        return 0;
    }
    /* Beams are reported whole at the end, without per-token logprobs. */
    if (r->stream)
        return api_fail(e, 400, "unsupported_field", "use_beam_search",
                        "'use_beam_search' together with 'stream' is not supported by this server");
    if (r->logprobs >= 0)
        return api_fail(e, 400, "unsupported_field", "use_beam_search",
                        "'use_beam_search' together with 'logprobs' is not supported by this server");
    if (width == 1) { /* one beam is greedy decoding */
        r->rp.sampling.temperature = 0;
        return 0;
    }
    r->rp.beam_width = width;
    return 0;
}

int api_request_parse(const json_t *body, api_kind kind, int n_vocab, api_request *r, api_error *e) {
    *r = (api_request){.kind = kind, .max_tokens = -1, .logprobs = -1, .rp = request_params_defaults(),
                       .kv_eviction = -1, .kv_budget = -1, .kv_sink_tokens = -1, .add_generation_prompt = true};
    r->rp.logprobs = -1;
    api_tools_init(&r->tools);
    if (!json_is_object(body)) return type_error(e, "body", "a JSON object", body);
    const int mine = kind == API_CHAT ? F_CHAT : F_COMPL;
    const int null_only = kind == API_CHAT ? 0 : F_COMPL_NULL;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)body, key, val) {
        if (api_vllm_field(key, kind)) continue; /* parsed after these */
        const int where = field_kind(key);
        if (structured_is_field(key)) continue; /* structured.c reads them */
        const ignored_check ignored = where ? NULL : ignored_field_check(key);
        if (ignored) {
            if (!json_is_null(val) && ignored(val, key, e)) return -1;
            continue;
        }
        if (!(where & (F_COMMON | mine | F_UNSUPPORTED | null_only)))
            return api_fail(e, 400, "unknown_field", key, "Unrecognized request argument supplied: %.64s", key);
        if (json_is_null(val)) continue;
        if (where & F_UNSUPPORTED)
            return api_fail(e, 400, "unsupported_field", key, "'%s' is not supported by this server", key);
        if (!(where & (F_COMMON | mine)))
            return api_fail(e, 400, "unsupported_field", key, "'%s' is only supported on /v1/chat/completions", key);
    }
    /* A second pass in a fixed order, so the error a client sees does not
     * depend on the order of its keys. */
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++) {
        if (!(FIELDS[i].where & (F_COMMON | mine))) continue;
        const json_t *v = json_object_get(body, FIELDS[i].name);
        if (!v || json_is_null(v)) continue;
        /* max_tokens after max_completion_tokens would overwrite it: skip it then. */
        if (!strcmp(FIELDS[i].name, "max_tokens") && json_object_get(body, "max_completion_tokens") &&
            !json_is_null(json_object_get(body, "max_completion_tokens"))) {
            long long ignored;
            if (get_int(v, "max_tokens", 1, LLONG_MAX, &ignored, e)) return -1;
            continue;
        }
        if (parse_field(FIELDS[i].name, v, n_vocab, r, e)) return -1;
    }
    if (api_vllm_parse_all(body, n_vocab, r, e)) return -1;
    if (kind == API_COMPLETIONS && !r->prompts)
        return api_fail(e, 400, "missing_field", "prompt", "'prompt' is required");
    if (kind == API_CHAT && !r->messages)
        return api_fail(e, 400, "missing_field", "messages", "'messages' is required");
    if (api_tools_check(&r->tools, e)) return -1;
    if (kind == API_CHAT) {
        const int top = r->rp.logprobs;
        if (top >= 0 && r->logprobs != 0)
            return api_fail(e, 400, "invalid_value", "top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
        r->logprobs = r->logprobs == 0 ? (top >= 0 ? top : 0) : -1;
    }
    r->rp.logprobs = r->logprobs;
    if (r->echo && r->logprobs >= 0 && r->stream)
        return api_fail(e, 400, "unsupported_field", "echo",
                        "'echo' together with 'logprobs' and 'stream' is not supported by this server");
    /* As vLLM: the echoed prompt's logprobs are its prompt logprobs. */
    if (r->echo && r->logprobs >= 0 && r->rp.prompt_logprobs < r->logprobs) r->rp.prompt_logprobs = r->logprobs;
    if (r->include_usage && !r->stream)
        return api_fail(e, 400, "invalid_value", "stream_options",
                        "'stream_options' is only allowed when 'stream' is true");
    if (json_object_get(body, "stream_options") && !json_is_null(json_object_get(body, "stream_options")) &&
        !r->stream)
        return api_fail(e, 400, "invalid_value", "stream_options",
                        "'stream_options' is only allowed when 'stream' is true");
    if (apply_beam_search(r, e) || api_vllm_check(r, e)) return -1;
    if (structured_parse(body, &r->rp.constraint, e)) return -1;
    if (r->rp.constraint && r->rp.beam_width > 1)
        return api_fail(e, 400, "unsupported_field", "use_beam_search",
                        "'use_beam_search' together with structured output is not supported by this server");
    if ((long long)r->n_prompts * r->rp.n > API_MAX_CHOICES)
        return api_fail(e, 400, "invalid_value", "n", "%d prompts times n = %d is more than %d choices",
                        r->n_prompts, r->rp.n, API_MAX_CHOICES);
    if (r->max_tokens >= 0 && r->rp.min_tokens > r->max_tokens)
        return api_fail(e, 400, "invalid_value", "min_tokens", "'min_tokens' (%d) must not exceed 'max_tokens' (%lld)",
                        r->rp.min_tokens, r->max_tokens);
    return 0;
}

void api_request_free(api_request *r) {
    for (int i = 0; i < r->n_prompts; i++) free(r->prompts[i].ids);
    free(r->prompts);
    json_decref(r->messages);
    if (r->stops)
        for (int i = 0; i < r->rp.n_stop; i++) free(r->stops[i]);
    free(r->stops);
    free(r->stop_ids);
    free(r->bias);
    api_tools_free(&r->tools);
    constraint_release(r->rp.constraint);
    free(r->allowed_ids);
    json_decref(r->template_vars);
    *r = (api_request){0};
}
