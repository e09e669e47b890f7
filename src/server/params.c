/* See params.h. A table, FIELDS, has a row per request field: the endpoints
 * that take it and its parser. Most fields are one typed value stored at an
 * offset in api_request (a boolean, an integer or a number in a range, a
 * string); the rest have a small parser of their own. A request is checked
 * in passes: each key of the body against what this endpoint takes (FIELDS,
 * vLLM's fields in params_vllm.c, structured output's in structured.c, the
 * accepted and ignored ones in IGNORED); then each field parsed in the
 * table's order; then the checks across fields. JSON null means "not given"
 * for every optional field, as in OpenAI's and vLLM's schemas, and never
 * reaches a parser. Chat messages are params_messages.c's. */
#include "server/params.h"

#include "server/api_json.h"
#include "server/structured.h"
#include "server/tools.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Which endpoints take a field. F_COMPL_NULL: a chat field that completions
 * accept only as null; F_UNSUPPORTED: an OpenAI field this server does not
 * implement, a 400 naming it unless null. */
enum { F_COMMON = 1, F_COMPL = 2, F_CHAT = 4, F_UNSUPPORTED = 8, F_COMPL_NULL = 16 };

/* ---- token ids ---- */

int api_parse_token_ids(const json_t *v, const char *param, int n_vocab, int32_t **out, int *n, api_error *e) {
    *out = NULL;
    *n = 0;
    if (!json_is_array(v)) return api_type_error(e, param, "a list of token ids", v);
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

/* ---- a row of the field table ---- */

typedef struct request_field request_field;

/* Parses v (not null) into r: 0, or -1 with *e naming f->field.name. */
typedef int (*field_parser)(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e);

struct request_field {
    /* A pair written {"name", F_...} in every row: test_response_cache.py
     * reads the fields each endpoint takes from them. */
    struct {
        const char *name;
        int where; /* F_COMMON, ... */
    } field;
    field_parser parse; /* NULL for F_UNSUPPORTED */
    size_t offset;      /* the typed parsers: where in api_request the value goes */
    long long min, max; /* parse_int, parse_long: the range */
    double lo, hi;      /* parse_float: the range, lo excluded when lo_open */
    bool lo_open;
};

static void *field_at(api_request *r, const request_field *f) { return (char *)r + f->offset; }

/* ---- typed values at an offset ---- */

static int parse_bool(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    return api_get_bool(v, f->field.name, (bool *)field_at(r, f), e);
}

/* An int in [min, max]. */
static int parse_int(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    long long x;
    if (api_get_int(v, f->field.name, f->min, f->max, &x, e)) return -1;
    *(int *)field_at(r, f) = (int)x;
    return 0;
}

/* A long long in [min, max]. */
static int parse_long(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    return api_get_int(v, f->field.name, f->min, f->max, (long long *)field_at(r, f), e);
}

/* A float in [lo, hi] ((lo, hi] when lo_open). */
static int parse_float(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    double d;
    if (api_get_number(v, f->field.name, f->lo, f->hi, f->lo_open, false, &d, e)) return -1;
    *(float *)field_at(r, f) = (float)d;
    return 0;
}

/* A string borrowed from the body. */
static int parse_string(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (!json_is_string(v)) return api_type_error(e, f->field.name, "a string", v);
    *(const char **)field_at(r, f) = json_string_value(v);
    return 0;
}

/* ---- prompt (completions) ---- */

static int parse_prompt(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (json_is_string(v)) {
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        r->n_prompts = 1;
        r->prompts[0].text = json_string_value(v);
        r->prompts[0].len = json_string_length(v);
        return 0;
    }
    if (!json_is_array(v))
        return api_type_error(e, "prompt", "a string, a list of strings or a list of token ids", v);
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

/* ---- fields with parsers of their own ---- */

static int parse_messages(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    return api_parse_messages(v, &r->messages, e);
}

/* Chat's must be at least 1; completions' may be 0. */
static int parse_max_tokens(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    return api_get_int(v, f->field.name, r->kind == API_CHAT ? 1 : 0, LLONG_MAX, &r->max_tokens, e);
}

/* ---- sampling ---- */

/* -1 and 0 both mean off, as in vLLM. */
static int parse_top_k(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    long long x;
    if (api_get_int(v, f->field.name, -1, INT_MAX, &x, e)) return -1;
    r->rp.sampling.top_k = x <= 0 ? 0 : (int)x;
    return 0;
}

/* Any integer; a negative one wraps, as the engine's seed is 64 bits. */
static int parse_seed(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (!json_is_integer(v)) return api_type_error(e, f->field.name, "an integer", v);
    r->rp.sampling.seed = (uint64_t)json_integer_value(v);
    r->seed_given = true;
    return 0;
}

static int parse_logit_bias(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (!json_is_object(v)) return api_type_error(e, "logit_bias", "an object mapping token ids to biases", v);
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
        if (api_get_number(val, "logit_bias", -100, 100, false, false, &b, e)) return -1;
        r->bias[k++] = (logit_bias_entry){.token = (int32_t)id, .bias = (float)b};
    }
    r->rp.sampling.logit_bias = r->bias;
    r->rp.sampling.n_logit_bias = k;
    return 0;
}

/* ---- stopping ---- */

static int parse_stop(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    const char *single = NULL;
    size_t n = 0;
    if (json_is_string(v)) {
        single = json_string_value(v);
        n = 1;
    } else if (json_is_array(v)) {
        n = json_array_size(v);
    } else {
        return api_type_error(e, "stop", "a string or a list of strings", v);
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
        if (!(r->stops[i] = strdup(json_string_value(s))))
            return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        r->rp.n_stop = (int)i + 1;
    }
    r->rp.stop = (const char *const *)r->stops;
    return 0;
}

static int parse_stop_token_ids(const request_field *f, const json_t *v, int n_vocab, api_request *r,
                                api_error *e) {
    int n;
    if (api_parse_token_ids(v, f->field.name, n_vocab, &r->stop_ids, &n, e)) return -1;
    if (n > API_MAX_STOP_IDS)
        return api_fail(e, 400, "invalid_value", f->field.name, "'%s' holds %d ids; at most %d are allowed",
                        f->field.name, n, API_MAX_STOP_IDS);
    r->rp.stop_token_ids = r->stop_ids;
    r->rp.n_stop_token_ids = n;
    return 0;
}

/* ---- output ---- */

/* Completions: how many alternatives, in [min, max]. Chat: a boolean, with
 * top_logprobs (a row of its own) saying how many; the two are reconciled
 * after all fields. */
static int parse_logprobs(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    if (r->kind != API_CHAT) return parse_int(f, v, n_vocab, r, e);
    bool b = false;
    if (api_get_bool(v, f->field.name, &b, e)) return -1;
    if (b && r->logprobs < 0) r->logprobs = 0;
    if (!b) r->logprobs = -2; /* remembered as "explicitly off" for top_logprobs */
    return 0;
}

static int parse_stream_options(const request_field *f, const json_t *v, int n_vocab, api_request *r,
                                api_error *e) {
    if (!json_is_object(v)) return api_type_error(e, "stream_options", "an object", v);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!strcmp(key, "include_usage")) {
            if (!json_is_null(val) && api_get_bool(val, "stream_options.include_usage", &r->include_usage, e))
                return -1;
        } else if (!strcmp(key, "include_obfuscation")) {
            /* OpenAI pads stream events against side channels; on a local
             * server there is none to guard, and leaving the padding out
             * changes no generated text. */
            bool ignored;
            if (!json_is_null(val) && api_get_bool(val, "stream_options.include_obfuscation", &ignored, e))
                return -1;
        } else {
            char param[80];
            snprintf(param, sizeof param, "stream_options.%.48s", key);
            return api_fail(e, 400, "unknown_field", param, "Unrecognized request argument supplied: %s", param);
        }
    }
    return 0;
}

/* ---- KV eviction and tools ---- */

static int parse_kv_eviction(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    kv_evict_policy pol;
    if (!json_is_string(v)) return api_type_error(e, f->field.name, "a string", v);
    if (kv_evict_parse(json_string_value(v), &pol))
        return api_fail(e, 400, "invalid_value", f->field.name, "'%s' must be one of " KV_EVICT_NAMES ", got '%.64s'",
                        f->field.name, json_string_value(v));
    r->kv_eviction = (int)pol;
    return 0;
}

static int parse_tools(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    return api_parse_tools(v, &r->tools, e);
}

static int parse_tool_choice(const request_field *f, const json_t *v, int n_vocab, api_request *r, api_error *e) {
    return api_parse_tool_choice(v, &r->tools, e);
}

/* ---- accepted and ignored ---- */

/* OpenAI fields that change nothing in the generated text: they are checked
 * for their documented type and then ignored, so clients that always send
 * them work. The one list of them (docs/serving.md, "Request fields",
 * mirrors it). Fields that would change the output if ignored
 * (reasoning_effort, audio, functions, ...) stay in the refused list below. */
typedef int (*ignored_check)(const json_t *v, const char *field, api_error *e);

static int check_bool(const json_t *v, const char *field, api_error *e) {
    bool b;
    return api_get_bool(v, field, &b, e);
}

static int check_string(const json_t *v, const char *field, api_error *e) {
    return json_is_string(v) ? 0 : api_type_error(e, field, "a string", v);
}

static int check_metadata(const json_t *v, const char *field, api_error *e) {
    if (!json_is_object(v)) return api_type_error(e, field, "an object of strings", v);
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
    if (!json_is_array(v)) return api_type_error(e, field, "a list of strings", v);
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
    if (!json_is_object(v)) return api_type_error(e, field, "an object", v);
    const json_t *t = json_object_get(v, "type");
    if (!json_is_string(t) || strcmp(json_string_value(t), "content"))
        return api_fail(e, 400, "invalid_value", field, "'%s' needs \"type\": \"content\"", field);
    const json_t *c = json_object_get(v, "content");
    if (!json_is_string(c) && !json_is_array(c))
        return api_type_error(e, "prediction.content", "a string or a list of content parts", c ? c : json_null());
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

int api_ignored_field(const char *name, const json_t *v, api_error *e) {
    const ignored_check check = ignored_field_check(name);
    if (!check) return 0;
    return json_is_null(v) || !check(v, name, e) ? 1 : -1;
}

/* ---- the field table ---- */

/* In parsing order. max_completion_tokens (chat's) comes after max_tokens and wins. */
static const request_field FIELDS[] = {
    {.field = {"model", F_COMMON}, .parse = parse_string, .offset = offsetof(api_request, model)},
    {.field = {"max_tokens", F_COMMON}, .parse = parse_max_tokens},
    {.field = {"temperature", F_COMMON}, .parse = parse_float, .offset = offsetof(api_request, rp.sampling.temperature),
     .lo = 0, .hi = 2},
    {.field = {"top_p", F_COMMON}, .parse = parse_float, .offset = offsetof(api_request, rp.sampling.top_p), .lo = 0,
     .hi = 1, .lo_open = true},
    {.field = {"top_k", F_COMMON}, .parse = parse_top_k},
    {.field = {"min_p", F_COMMON}, .parse = parse_float, .offset = offsetof(api_request, rp.sampling.min_p), .lo = 0,
     .hi = 1},
    {.field = {"n", F_COMMON}, .parse = parse_int, .offset = offsetof(api_request, rp.n), .min = 1, .max = API_MAX_N},
    {.field = {"stop", F_COMMON}, .parse = parse_stop},
    {.field = {"stop_token_ids", F_COMMON}, .parse = parse_stop_token_ids},
    {.field = {"seed", F_COMMON}, .parse = parse_seed},
    {.field = {"presence_penalty", F_COMMON}, .parse = parse_float,
     .offset = offsetof(api_request, rp.sampling.presence_penalty), .lo = -2, .hi = 2},
    {.field = {"frequency_penalty", F_COMMON}, .parse = parse_float,
     .offset = offsetof(api_request, rp.sampling.frequency_penalty), .lo = -2, .hi = 2},
    {.field = {"repetition_penalty", F_COMMON}, .parse = parse_float,
     .offset = offsetof(api_request, rp.sampling.repetition_penalty), .lo = 0, .hi = 2, .lo_open = true},
    {.field = {"logit_bias", F_COMMON}, .parse = parse_logit_bias},
    {.field = {"logprobs", F_COMMON}, .parse = parse_logprobs, .offset = offsetof(api_request, logprobs), .min = 0,
     .max = API_MAX_LOGPROBS},
    {.field = {"ignore_eos", F_COMMON}, .parse = parse_bool, .offset = offsetof(api_request, rp.ignore_eos)},
    {.field = {"min_tokens", F_COMMON}, .parse = parse_int, .offset = offsetof(api_request, rp.min_tokens), .min = 0,
     .max = INT_MAX},
    {.field = {"use_beam_search", F_COMMON}, .parse = parse_bool, .offset = offsetof(api_request, use_beam_search)},
    {.field = {"best_of", F_COMMON}, .parse = parse_int, .offset = offsetof(api_request, best_of), .min = 1,
     .max = API_MAX_N},
    {.field = {"length_penalty", F_COMMON}, .parse = parse_float, .offset = offsetof(api_request, rp.length_penalty),
     .lo = -10, .hi = 10},
    {.field = {"kv_eviction", F_COMMON}, .parse = parse_kv_eviction},
    {.field = {"kv_budget", F_COMMON}, .parse = parse_long, .offset = offsetof(api_request, kv_budget), .min = 1,
     .max = INT_MAX},
    {.field = {"kv_sink_tokens", F_COMMON}, .parse = parse_long, .offset = offsetof(api_request, kv_sink_tokens),
     .min = 0, .max = INT_MAX},
    {.field = {"stream", F_COMMON}, .parse = parse_bool, .offset = offsetof(api_request, stream)},
    {.field = {"stream_options", F_COMMON}, .parse = parse_stream_options},
    {.field = {"prompt", F_COMPL}, .parse = parse_prompt},
    {.field = {"echo", F_COMPL}, .parse = parse_bool, .offset = offsetof(api_request, echo)},
    {.field = {"messages", F_CHAT}, .parse = parse_messages},
    {.field = {"max_completion_tokens", F_CHAT}, .parse = parse_long, .offset = offsetof(api_request, max_tokens),
     .min = 1, .max = LLONG_MAX},
    /* Reconciled with "logprobs" after all fields. */
    {.field = {"top_logprobs", F_CHAT}, .parse = parse_int, .offset = offsetof(api_request, rp.logprobs), .min = 0,
     .max = API_MAX_LOGPROBS},
    {.field = {"tools", F_CHAT | F_COMPL_NULL}, .parse = parse_tools},
    {.field = {"tool_choice", F_CHAT | F_COMPL_NULL}, .parse = parse_tool_choice},
    {.field = {"parallel_tool_calls", F_CHAT | F_COMPL_NULL}, .parse = parse_bool,
     .offset = offsetof(api_request, tools.parallel)},
    /* OpenAI fields this server does not implement: a 400 naming them unless null. */
    {.field = {"suffix", F_UNSUPPORTED}},
    {.field = {"functions", F_UNSUPPORTED}},
    {.field = {"function_call", F_UNSUPPORTED}},
    {.field = {"audio", F_UNSUPPORTED}},
    {.field = {"reasoning_effort", F_UNSUPPORTED}},
    {.field = {"verbosity", F_UNSUPPORTED}},
    {.field = {"web_search_options", F_UNSUPPORTED}},
};

static int field_where(const char *name) {
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++)
        if (!strcmp(FIELDS[i].field.name, name)) return FIELDS[i].field.where;
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
    if (!json_is_object(body)) return api_type_error(e, "body", "a JSON object", body);
    const int mine = kind == API_CHAT ? F_CHAT : F_COMPL;
    const int null_only = kind == API_CHAT ? 0 : F_COMPL_NULL;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)body, key, val) {
        if (api_vllm_field(key, kind)) continue; /* parsed after these */
        const int where = field_where(key);
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
    /* A second pass in the table's order, so the error a client sees does not
     * depend on the order of its keys. */
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++) {
        const request_field *f = &FIELDS[i];
        if (!(f->field.where & (F_COMMON | mine))) continue;
        const json_t *v = json_object_get(body, f->field.name);
        if (v && !json_is_null(v) && f->parse(f, v, n_vocab, r, e)) return -1;
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
