/* The generation endpoints: POST /v1/completions and /v1/chat/completions,
 * each answered by the model its body names (served_models_route). */
#ifndef CLLM_SERVER_COMPLETIONS_H
#define CLLM_SERVER_COMPLETIONS_H

#include "server/http.h"
#include "server/params.h"
#include "server/server.h"

enum MHD_Result handle_generation(server *s, http_req *r, api_kind kind);

/* Another shape of answer over the same generation of one chat choice (the
 * Responses API). Each hook runs with the generation's lock held; ctx is
 * the shape's own, freed with free_ctx when the answer is done. */
typedef struct {
    void *ctx;
    void (*free_ctx)(void *ctx);
    /* The whole answer once the choice finished. */
    json_t *(*body)(void *ctx, const gen *g);
    /* A stream: its first events, each piece of new text, the last events
     * once the choice finished, and an error ending it (no [DONE] follows). */
    void (*stream_start)(void *ctx, buf *out);
    void (*stream_delta)(void *ctx, buf *out, const char *text, size_t len);
    void (*stream_end)(void *ctx, buf *out, const gen *g);
    void (*stream_error)(void *ctx, buf *out, const api_error *e);
} gen_shape;

/* As handle_generation for a chat body built by the caller (stolen), by
 * model sm (routed by the caller), answered in `shape` (its ctx is freed in
 * every case). */
enum MHD_Result handle_generation_shaped(server *s, served_model *sm, http_req *r, json_t *body,
                                         const gen_shape *shape);

#endif
