/* See embeddings.h. */
#include "server/embeddings.h"

#include "server/api_json.h"
#include "server/params.h"
#include "util/base64.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text; /* a text input, or NULL for token ids */
    size_t len;
    int32_t *ids;     /* the tokens the model sees (owned) */
    int n_ids;
    bool cached;      /* the vector came from the cache */
} embed_input;

typedef struct {
    embed_input *in;
    int n;
    bool base64;
    int dims;     /* 0: the model's */
    int truncate; /* 0: none; else the most tokens an input keeps */
} embed_request;

static void request_free(embed_request *q) {
    for (int i = 0; i < q->n; i++) free(q->in[i].ids);
    free(q->in);
}

static const char *const k_fields[] = {"model", "input", "encoding_format", "dimensions", "user",
                                      "truncate_prompt_tokens", NULL};

/* "input" into q->in: texts, or token-id lists (checked against the vocabulary). */
static int parse_input(const server *s, const served_model *sm, const json_t *input, embed_request *q, api_error *e) {
    if (!input || json_is_null(input)) return api_fail(e, 400, "missing_field", "input", "'input' is required");
    const bool one_text = json_is_string(input);
    if (!one_text && !json_is_array(input))
        return api_fail(e, 400, "invalid_type", "input",
                        "'input' must be a string, a list of strings, or a list (or list of lists) of token ids; got %s",
                        api_json_type_name(input));
    const size_t n_items = one_text ? 1 : json_array_size(input);
    if (n_items == 0) return api_fail(e, 400, "invalid_value", "input", "'input' must not be an empty list");
    /* A flat list of integers is one input of token ids. */
    const bool one_ids = !one_text && json_is_integer(json_array_get(input, 0));
    const size_t n = one_ids ? 1 : n_items;
    if (n > (size_t)s->cfg.max_embed_inputs)
        return api_fail(e, 400, "too_many_inputs", "input",
                        "'input' has %zu items; at most %d are allowed per request (the server's "
                        "--max-embedding-inputs)",
                        n, s->cfg.max_embed_inputs);
    q->in = calloc(n, sizeof *q->in);
    if (!q->in) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    q->n = (int)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *item = one_text ? input : one_ids ? input : json_array_get(input, i);
        embed_input *in = &q->in[i];
        if (json_is_string(item)) {
            if (one_ids) return api_fail(e, 400, "invalid_type", "input", "'input' mixes token ids and strings");
            in->text = json_string_value(item), in->len = json_string_length(item);
            if (in->len == 0)
                return api_fail(e, 400, "invalid_value", "input", "'input[%zu]' is an empty string; every input needs text", i);
        } else if (json_is_array(item)) {
            if (json_array_size(item) == 0)
                return api_fail(e, 400, "invalid_value", "input", "'input[%zu]' is an empty list of token ids", i);
            char param[32];
            snprintf(param, sizeof param, one_ids ? "input" : "input[%zu]", i);
            if (api_parse_token_ids(item, param, sm->enc->hp.n_vocab, &in->ids, &in->n_ids, e)) return -1;
        } else {
            return api_fail(e, 400, "invalid_type", "input",
                            "'input[%zu]' must be a string or a list of token ids, got %s", i, api_json_type_name(item));
        }
        if (!one_text && !one_ids && i > 0 && !q->in[0].text != !in->text)
            return api_fail(e, 400, "invalid_type", "input", "'input' mixes strings and lists of token ids");
    }
    return 0;
}

static int parse_options(const served_model *sm, const json_t *body, embed_request *q, api_error *e) {
    const encoder *enc = sm->enc;
    const json_t *fmt = json_object_get(body, "encoding_format");
    if (fmt && !json_is_null(fmt)) {
        const char *f = json_string_value(fmt);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
            return api_fail(e, 400, "invalid_value", "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        q->base64 = !strcmp(f, "base64");
    }
    const json_t *dims = json_object_get(body, "dimensions");
    if (dims && !json_is_null(dims)) {
        if (!json_is_integer(dims))
            return api_fail(e, 400, "invalid_type", "dimensions", "'dimensions' must be an integer, got %s",
                            api_json_type_name(dims));
        const json_int_t d = json_integer_value(dims);
        /* vLLM's answers, word for word where it has them. */
        if (!enc->matryoshka)
            return api_fail(e, 400, "invalid_value", "dimensions",
                            "Model \"%s\" does not support matryoshka representation, changing output dimensions "
                            "will lead to poor results.",
                            sm->name);
        bool listed = enc->n_matryoshka_dims == 0;
        for (int i = 0; i < enc->n_matryoshka_dims; i++) listed |= enc->matryoshka_dims[i] == d;
        if (!listed)
            return api_fail(e, 400, "invalid_value", "dimensions",
                            "Model \"%s\" only supports the matryoshka dimensions the config lists; %lld is not one",
                            sm->name, (long long)d);
        if (d < 1 || d > enc->hp.n_embd)
            return api_fail(e, 400, "invalid_value", "dimensions", "'dimensions' must be from 1 to %d, got %lld",
                            enc->hp.n_embd, (long long)d);
        q->dims = (int)d;
    }
    const json_t *tr = json_object_get(body, "truncate_prompt_tokens");
    if (tr && !json_is_null(tr)) {
        const json_int_t k = json_is_integer(tr) ? json_integer_value(tr) : 0;
        if (!json_is_integer(tr) || (k < 1 && k != -1))
            return api_fail(e, 400, "invalid_value", "truncate_prompt_tokens",
                            "'truncate_prompt_tokens' must be -1 (the model's length) or a positive integer");
        if (k > enc->max_len)
            return api_fail(e, 400, "invalid_value", "truncate_prompt_tokens",
                            "truncate_prompt_tokens value (%lld) is greater than max_model_len (%d). Please, select "
                            "a smaller truncation size.",
                            (long long)k, enc->max_len);
        q->truncate = k == -1 ? enc->max_len : (int)k;
    }
    return 0;
}

/* Each input's tokens (texts from the cache when they are there; their
 * vectors go straight to out), checked against the model's length. */
static int prepare_inputs(const served_model *sm, embed_request *q, float *out, api_error *e) {
    const encoder *enc = sm->enc;
    const int d = enc->hp.n_embd;
    for (int i = 0; i < q->n; i++) {
        embed_input *in = &q->in[i];
        if (in->text) {
            if (sm->embed_cache &&
                embed_cache_get(sm->embed_cache, in->text, in->len, q->truncate, out + (size_t)i * d, &in->n_ids)) {
                in->cached = true;
                continue;
            }
            in->n_ids = encoder_tokenize(enc, in->text, in->len, q->truncate, &in->ids);
            if (in->n_ids < 0) return api_fail(e, err_is_oom() ? 500 : 400, "invalid_value", "input", "%s", err_get());
        } else if (q->truncate && in->n_ids > q->truncate) { /* token ids keep their last k */
            memmove(in->ids, in->ids + (in->n_ids - q->truncate), (size_t)q->truncate * sizeof *in->ids);
            in->n_ids = q->truncate;
        }
        if (in->n_ids > enc->max_len)
            return api_fail(e, 400, "context_length_exceeded", "input",
                            "This model's maximum context length is %d tokens. However, you requested %d tokens in "
                            "the input for embedding generation (input %d). Please reduce the length of the input, "
                            "or set truncate_prompt_tokens.",
                            enc->max_len, in->n_ids, i);
    }
    return 0;
}

static int embed_misses(const served_model *sm, embed_request *q, float *out, api_error *e) {
    const int d = sm->enc->hp.n_embd;
    const int32_t **ids = malloc((size_t)q->n * sizeof *ids);
    int *lens = malloc((size_t)q->n * sizeof *lens), *where = malloc((size_t)q->n * sizeof *where);
    float *vecs = malloc((size_t)q->n * (size_t)d * sizeof *vecs);
    int rc = !ids || !lens || !where || !vecs ? api_fail(e, 500, "out_of_memory", NULL, "out of memory") : 0;
    int n = 0;
    for (int i = 0; i < q->n && !rc; i++)
        if (!q->in[i].cached) ids[n] = q->in[i].ids, lens[n] = q->in[i].n_ids, where[n++] = i;
    if (!rc && n > 0 && embedder_embed(sm->embedder, (const int32_t *const *)ids, lens, n, vecs))
        rc = api_fail(e, 500, err_is_oom() ? "out_of_memory" : "internal_error", NULL, "%s", err_get());
    for (int k = 0; k < n && !rc; k++) {
        const embed_input *in = &q->in[where[k]];
        memcpy(out + (size_t)where[k] * d, vecs + (size_t)k * d, (size_t)d * sizeof *vecs);
        if (sm->embed_cache && in->text)
            embed_cache_put(sm->embed_cache, in->text, in->len, q->truncate, vecs + (size_t)k * d, in->n_ids);
    }
    free(vecs);
    free(where);
    free(lens);
    free(ids);
    return rc;
}

/* The first dims values, renormalized when the model's vectors are unit length. */
static void cut_dims(const encoder *enc, float *v, int dims) {
    if (!enc->normalize) return;
    double ss = 0;
    for (int j = 0; j < dims; j++) ss += (double)v[j] * v[j];
    const double norm = sqrt(ss) > 1e-12 ? sqrt(ss) : 1e-12;
    for (int j = 0; j < dims; j++) v[j] = (float)(v[j] / norm);
}

static json_t *embedding_value(float *v, int dims, bool base64) {
    if (!base64) {
        json_t *a = json_array();
        for (int j = 0; a && j < dims; j++) json_array_append_new(a, json_real((double)v[j]));
        return a;
    }
    /* Little-endian float32 bytes, as OpenAI sends them (x86 is little-endian). */
    char *text = malloc(base64_encoded_len((size_t)dims * sizeof *v) + 1);
    if (!text) return NULL;
    base64_encode(v, (size_t)dims * sizeof *v, text);
    json_t *s = json_string(text);
    free(text);
    return s;
}

static json_t *response_body(const served_model *sm, embed_request *q, float *out) {
    const int d = sm->enc->hp.n_embd, dims = q->dims ? q->dims : d;
    json_t *data = json_array();
    long tokens = 0;
    for (int i = 0; i < q->n && data; i++) {
        float *v = out + (size_t)i * d;
        if (dims < d) cut_dims(sm->enc, v, dims);
        tokens += q->in[i].n_ids;
        json_t *item = json_pack("{s:s,s:i,s:o*}", "object", "embedding", "index", i, "embedding",
                                 embedding_value(v, dims, q->base64));
        if (!item || json_array_append_new(data, item)) {
            json_decref(data);
            data = NULL;
        }
    }
    if (!data) return NULL;
    return json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", sm->name,
                     "usage", "prompt_tokens", (json_int_t)tokens, "total_tokens", (json_int_t)tokens);
}

enum MHD_Result handle_embeddings(server *s, http_req *r) {
    api_error e;
    json_t *body = http_body_json(r, &e);
    const served_model *sm = body ? served_models_route(&s->models, body, &e) : NULL;
    if (sm && served_models_check_task(sm, true, "Embeddings", &e)) sm = NULL;
    if (!sm) {
        json_decref(body);
        return http_reply_error(r, &e);
    }
    embed_request q = {0};
    float *out = NULL;
    int rc = server_check_fields(body, k_fields, &e) || parse_options(sm, body, &q, &e) ||
                     parse_input(s, sm, json_object_get(body, "input"), &q, &e)
                 ? -1
                 : 0;
    if (!rc && !(out = malloc((size_t)q.n * (size_t)sm->enc->hp.n_embd * sizeof *out)))
        rc = api_fail(&e, 500, "out_of_memory", NULL, "out of memory");
    if (!rc) rc = prepare_inputs(sm, &q, out, &e) || embed_misses(sm, &q, out, &e) ? -1 : 0;
    json_t *reply = rc ? NULL : response_body(sm, &q, out);
    if (!rc && !reply) rc = api_fail(&e, 500, "out_of_memory", NULL, "out of memory");
    free(out);
    request_free(&q);
    json_decref(body);
    return rc ? http_reply_error(r, &e) : http_reply_json(r, 200, reply);
}
