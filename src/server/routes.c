/* The router: path and method to handler, with the checks every request
 * passes first (API key on protected paths, the models being loaded, the body
 * size), plus the small endpoints: /health, /metrics, /v1/models (every model
 * served), and the chat page's files (webui.h) unless it is turned off. The
 * endpoints that take a body pick their model from it (served_models_route). */
#include "server/routes.h"

#include "grammar/constraint.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/embeddings.h"
#include "server/completions.h"
#include "server/metrics.h"
#include "server/responses_api.h"
#include "server/server.h"
#include "server/tokenize.h"
#include "server/webui.h"

#include <stdlib.h>
#include <string.h>

typedef enum {
    R_HEALTH, R_METRICS, R_MODELS, R_MODEL, R_COMPLETIONS, R_CHAT, R_RESPONSES, R_TOKENIZE, R_DETOKENIZE,
    R_EMBEDDINGS
} route_id;

static const struct {
    const char *path;
    const char *method;
    route_id id;
} ROUTES[] = {
    {"/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},
    {"/v1/models", "GET", R_MODELS},
    {"/v1/completions", "POST", R_COMPLETIONS},
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/responses", "POST", R_RESPONSES},
    {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},
    {"/v1/embeddings", "POST", R_EMBEDDINGS},
};

static json_t *model_card(const server *s, const served_model *sm) {
    /* "task" is cllm's (vLLM's --task names): which endpoints the model serves. */
    json_t *card = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s}", "id", sm->name, "object", "model", "created",
                             (json_int_t)s->created, "owned_by", "cllm", "root", sm->path ? sm->path : "", "task",
                             sm->enc ? "embed" : "generate");
    /* unknown until a model loaded on demand (--max-loaded-models) first loads */
    if (card && sm->max_model_len > 0) json_object_set_new(card, "max_model_len", json_integer(sm->max_model_len));
    return card;
}

static json_t *model_list(const server *s) {
    json_t *data = json_array();
    for (int i = 0; i < s->models.n; i++) json_array_append_new(data, model_card(s, &s->models.v[i]));
    return json_pack("{s:s,s:o}", "object", "list", "data", data);
}

static enum MHD_Result metrics(server *s, http_req *r) {
    const int state = atomic_load(&s->state);
    metrics_model *models = calloc((size_t)s->models.n, sizeof *models);
    metrics_input in = {.models = models, .n_models = s->models.n};
    buf b = {0};
    if (models) {
        for (int i = 0; i < s->models.n; i++) {
            served_model *sm = &s->models.v[i];
            metrics_model *mm = &models[i];
            mm->name = sm->name;
            /* an unloaded model (--max-loaded-models) shows zeros, and its
             * engine's counters start again when it is loaded again */
            const bool running = served_models_stats(&s->models, i, &mm->stats);
            mm->ready = state == SERVER_READY && served_models_loaded(&s->models, sm);
            if (!running) { /* not loaded, or an embedding model: no engine */
                hist_init_seconds(&mm->stats.ttft);
                hist_init_seconds(&mm->stats.tpot);
                hist_init_seconds(&mm->stats.e2e);
                hist_init_seconds(&mm->stats.queue);
            }
            for (int k = 0; k <= FINISH_ERROR; k++) mm->finished[k] = atomic_load(&sm->counters.finished[k]);
            mm->cache_hits = atomic_load(&sm->cache_hits);
            mm->cache_misses = atomic_load(&sm->cache_misses);
        }
        for (int i = 0; i < 6; i++) in.http[i] = atomic_load(&s->http.responses[i]);
        constraint_cache_stats(&in.constraint_cache_hits, &in.constraint_cache_misses);
        in.has_response_cache = s->response_cache != NULL;
        if (in.has_response_cache) {
            response_cache_stats rc;
            response_cache_get_stats(s->response_cache, &rc);
            in.response_cache_entries = rc.entries;
        }
        for (int i = 0; i < s->models.n; i++) {
            const served_model *sm = &s->models.v[i];
            if (!served_models_loaded(&s->models, sm) || !sm->embedder) continue; /* set once, before ready */
            models[i].has_embedder = true;
            embedder_get_stats(sm->embedder, &models[i].embedder);
            models[i].has_embed_cache = sm->embed_cache != NULL;
            if (sm->embed_cache) embed_cache_get_stats(sm->embed_cache, &models[i].embed_cache);
        }
        metrics_render(&b, &in);
    }
    enum MHD_Result rc;
    if (!models || b.oom) {
        api_error e;
        api_fail(&e, 500, "out_of_memory", NULL, "out of memory");
        rc = http_reply_error(r, &e);
    } else {
        rc = http_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "", b.len);
    }
    buf_free(&b);
    free(models);
    return rc;
}

enum MHD_Result route_request(void *user, http_req *r) {
    server *s = user;
    api_error e;
    const bool is_head = !strcmp(r->method, "HEAD");
    const char *method = is_head ? "GET" : r->method;

    /* CORS first: a preflight carries no API key, and every answer to an
     * allowed origin (errors included) carries its header. */
    static const cors_config no_cors;
    const cors_config *cors = s->cfg.cors ? s->cfg.cors : &no_cors;
    cors_annotate(cors, r);
    if (cors_is_preflight(r)) return cors_answer_preflight(cors, r);

    if (s->cfg.api_key && *s->cfg.api_key && auth_path_protected(r->path, s->cfg.metrics_require_key) &&
        !auth_check(http_header(r, MHD_HTTP_HEADER_AUTHORIZATION), s->cfg.api_key)) {
        api_fail(&e, 401, "invalid_api_key", NULL, "Incorrect or missing API key; send 'Authorization: Bearer KEY'");
        http_add_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        return http_reply_error(r, &e);
    }
    int found = -1;
    const char *allowed = NULL; /* the path's method, when the path is known */
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++) {
        if (strcmp(ROUTES[i].path, r->path)) continue;
        allowed = ROUTES[i].method;
        if (!strcmp(ROUTES[i].method, method)) found = (int)ROUTES[i].id;
    }
    if (found < 0 && !strncmp(r->path, "/v1/models/", 11) && r->path[11]) {
        allowed = "GET";
        if (!strcmp(method, "GET")) found = R_MODEL;
    }
    const webui_asset *page = s->cfg.webui ? webui_find(r->path) : NULL; /* the chat page: no key, any state */
    if (page) {
        if (!strcmp(method, "GET")) return webui_reply(r, page);
        allowed = "GET";
    }
    if (found < 0) {
        if (allowed) {
            api_fail(&e, 405, "method_not_allowed", NULL, "Method %.16s is not allowed on %.200s", r->method, r->path);
            http_add_header(r, MHD_HTTP_HEADER_ALLOW, strcmp(allowed, "GET") ? allowed : "GET, HEAD");
        } else {
            api_fail(&e, 404, "not_found", NULL, "No route for %.16s %.200s", r->method, r->path);
        }
        return http_reply_error(r, &e);
    }
    if (r->too_large) {
        api_fail(&e, 413, "request_too_large", NULL,
                 "The request body is larger than the limit of %zu bytes (the server's --max-body-size)",
                 s->cfg.max_body_bytes);
        return http_reply_error(r, &e);
    }
    const int state = atomic_load(&s->state);
    if (found == R_HEALTH) {
        if (state == SERVER_READY) return http_reply(r, 200, "text/plain", "", 0);
        api_fail(&e, 503, state == SERVER_LOADING ? "loading" : "shutting_down", NULL,
                 state == SERVER_LOADING ? "The model is loading" : "The server is shutting down");
        return http_reply_error(r, &e);
    }
    if (found == R_METRICS) return metrics(s, r);
    if (state == SERVER_LOADING) {
        api_fail(&e, 503, "loading", NULL, "The model is still loading; retry when /health answers 200");
        return http_reply_error(r, &e);
    }
    switch ((route_id)found) {
    case R_MODELS: return http_reply_json(r, 200, model_list(s));
    case R_MODEL: {
        const served_model *sm = served_models_find(&s->models, r->path + 11);
        if (sm) return http_reply_json(r, 200, model_card(s, sm));
        served_models_not_found(&s->models, r->path + 11, &e);
        return http_reply_error(r, &e);
    }
    default: break;
    }
    if (state == SERVER_DRAINING) {
        api_fail(&e, 503, "shutting_down", NULL, "The server is shutting down");
        return http_reply_error(r, &e);
    }
    switch ((route_id)found) {
    case R_EMBEDDINGS: return handle_embeddings(s, r);
    case R_COMPLETIONS: return handle_generation(s, r, API_COMPLETIONS);
    case R_CHAT: return handle_generation(s, r, API_CHAT);
    case R_RESPONSES: return handle_responses(s, r);
    case R_TOKENIZE: return handle_tokenize(s, r);
    case R_DETOKENIZE: return handle_detokenize(s, r);
    default: break;
    }
    api_fail(&e, 404, "not_found", NULL, "No route for %.200s", r->path);
    return http_reply_error(r, &e);
}
