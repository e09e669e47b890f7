/* libFuzzer harness: an HTTP request body from fuzz bytes through our own
 * request handling above libmicrohttpd: http_body_json (the body as JSON,
 * as every POST route reads it), then api_request_parse as
 * /v1/completions and as /v1/chat/completions, and the parts /tokenize and
 * /detokenize parse (api_parse_messages, api_parse_token_ids). The first
 * byte picks the vocabulary size. A bad body must give a 400 naming what was
 * wrong, never a crash or a leak.
 *
 * Route dispatch itself (routes.c) is not fuzzed: every route answers
 * through MHD_queue_response on a live libmicrohttpd connection, and the
 * HTTP parsing below it is libmicrohttpd's. */
#include "server/http.h"
#include "server/params.h"

#include <stdint.h>
#include <string.h>

static void parse_as(const json_t *body, api_kind kind, int n_vocab) {
    api_request req;
    api_error err;
    memset(&err, 0, sizeof err);
    if (api_request_parse(body, kind, n_vocab, &req, &err) != 0 && err.status < 400) __builtin_trap();
    api_request_free(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const int k_vocab[] = {1, 2, 256, 32000, 262144};
    const int n_vocab = k_vocab[data[0] % (sizeof k_vocab / sizeof k_vocab[0])];
    http_req r;
    memset(&r, 0, sizeof r);
    buf_append(&r.body, data + 1, size - 1);
    api_error err;
    memset(&err, 0, sizeof err);
    json_t *body = http_body_json(&r, &err);
    buf_free(&r.body);
    if (!body) return 0;
    parse_as(body, API_COMPLETIONS, n_vocab);
    parse_as(body, API_CHAT, n_vocab);
    if (json_is_object(body)) {
        json_t *messages = json_object_get(body, "messages");
        json_t *normalized = NULL;
        if (messages && api_parse_messages(messages, &normalized, &err) == 0) json_decref(normalized);
        json_t *tokens = json_object_get(body, "tokens");
        int32_t *ids = NULL;
        int n = 0;
        if (tokens && api_parse_token_ids(tokens, "tokens", n_vocab, &ids, &n, &err) == 0) free(ids);
    }
    json_decref(body);
    return 0;
}
