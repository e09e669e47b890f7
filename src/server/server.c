/* See server.h. The server owns the HTTP layer (http.c) and hands it the
 * router (routes.c) as its handler; what a request may see of the server
 * (state, model, engine, counters) lives in the server struct. */
#include "server/server.h"

#include "server/api_json.h"
#include "server/embeddings.h"
#include "server/routes.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int server_start(server *s, const server_config *cfg) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    if (!s->cfg.max_body_bytes) s->cfg.max_body_bytes = SERVER_DEFAULT_MAX_BODY;
    if (s->cfg.keep_alive_s <= 0) s->cfg.keep_alive_s = SERVER_DEFAULT_KEEP_ALIVE_S;
    if (s->cfg.header_timeout_s <= 0) s->cfg.header_timeout_s = SERVER_DEFAULT_HEADER_TIMEOUT_S;
    if (s->cfg.body_timeout_s <= 0) s->cfg.body_timeout_s = SERVER_DEFAULT_BODY_TIMEOUT_S;
    if (s->cfg.max_embed_inputs <= 0) s->cfg.max_embed_inputs = SERVER_DEFAULT_MAX_EMBED_INPUTS;
    if (served_models_init(&s->models, cfg->models, cfg->n_models, cfg->loader, cfg->max_loaded_models)) return -1;
    s->cfg.models = NULL; /* copied into s->models */
    s->cfg.loader = NULL;
    s->created = time(NULL);
    atomic_store(&s->state, SERVER_LOADING);
    const http_limits limits = {
        .max_body_bytes = s->cfg.max_body_bytes,
        .keep_alive_s = (unsigned)s->cfg.keep_alive_s,
        .header_timeout_s = (unsigned)s->cfg.header_timeout_s,
        .body_timeout_s = (unsigned)s->cfg.body_timeout_s,
        .max_per_client = s->cfg.max_per_client > 0 ? (unsigned)s->cfg.max_per_client : 0,
        .max_connections = s->cfg.max_connections > 0 ? (unsigned)s->cfg.max_connections : 0,
    };
    if (s->cfg.response_cache_size && !(s->response_cache = response_cache_create(s->cfg.response_cache_size))) {
        served_models_free(&s->models);
        return err_oom("out of memory for a response cache of %zu entries", s->cfg.response_cache_size);
    }
    if (http_server_start(&s->http, s->cfg.host, s->cfg.port, &limits, route_request, s)) {
        response_cache_free(s->response_cache);
        s->response_cache = NULL;
        served_models_free(&s->models);
        return -1;
    }
    return 0;
}

int server_port(const server *s) { return s->http.port; }

void server_set_model(server *s, int i, model *m, engine *e, const chat_template *tmpl) {
    served_models_set(&s->models, i, m, e, tmpl);
}

int server_set_encoder(server *s, int i, const encoder *enc, embedder *eb) {
    embed_cache *cache = NULL;
    if (s->cfg.embed_cache_size && !(cache = embed_cache_create(s->cfg.embed_cache_size, enc->hp.n_embd))) return -1;
    served_models_set_encoder(&s->models, i, enc, eb, cache);
    return 0;
}

void server_set_ready(server *s) { atomic_store(&s->state, SERVER_READY); }

void server_drain(server *s) {
    atomic_store(&s->state, SERVER_DRAINING);
    http_server_quiesce(&s->http);
}

int server_handling(server *s) { return http_server_handling(&s->http); }

void server_stop(server *s) {
    http_server_stop(&s->http);
    response_cache_free(s->response_cache);
    s->response_cache = NULL;
}

void server_free(server *s) { served_models_free(&s->models); }

void server_new_id(server *s, const char *prefix, char *out, size_t cap) {
    uint64_t r[2] = {0, 0};
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        r[0] = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
        r[1] = atomic_fetch_add(&s->next_id, 1) * 0xbf58476d1ce4e5b9ull;
    }
    snprintf(out, cap, "%s%016llx%016llx", prefix, (unsigned long long)r[0], (unsigned long long)r[1]);
}

int server_check_fields(const json_t *body, const char *const *allowed, api_error *e) {
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
    if (m && !json_is_null(m) && !json_is_string(m))
        return api_fail(e, 400, "invalid_type", "model", "'model' must be a string, got %s", api_json_type_name(m));
    return 0;
}
