/* The OpenAI-compatible HTTP server: a libmicrohttpd daemon (http.h: a few
 * I/O threads for every socket, a thread per request being answered, so a
 * handler may block waiting for tokens without holding up anyone else), in
 * front of one engine per model served (served_models.h: requests go to the
 * model their "model" field names). It listens before the models are
 * loaded (then /health answers 503) and becomes ready when the caller has
 * handed it every model with its running engine.
 *
 * Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models
 * (and /v1/models/{id}), GET /health, GET /metrics, POST /tokenize,
 * POST /detokenize; for an embedding model POST /v1/embeddings instead of
 * the generation routes (embeddings.h). With an API key, /v1/..., /tokenize and /detokenize need
 * "Authorization: Bearer KEY"; /metrics too when metrics_require_key;
 * /health always stays open. With webui, GET / is the chat page (webui.h),
 * its files under /webui/, open without a key. */
#ifndef CLLM_SERVER_SERVER_H
#define CLLM_SERVER_SERVER_H

#include "chat/template.h"
#include "engine/embedder.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/cors.h"
#include "server/embed_cache.h"
#include "server/generation.h"
#include "server/http.h"
#include "server/response_cache.h"
#include "server/served_models.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* Bodies past this get 413 and are never held in memory. 1 MiB is more than
 * twice the longest prompt that 8192 tokens of Gemma 3's vocabulary can spell
 * (no token covers more than 48 bytes), and 64 requests at the limit at once
 * grow the server by about 100 MiB (bodies, parsed JSON), where 4 MiB ones
 * took 450 MiB. `cllm serve` raises it for a longer --max-model-len. */
#define SERVER_DEFAULT_MAX_BODY ((size_t)1 << 20)
/* ... to this many bytes per token of the context, when that is more. */
#define SERVER_BODY_BYTES_PER_TOKEN 128

typedef struct {
    const char *host;         /* address to bind, e.g. "127.0.0.1", "0.0.0.0", "::" */
    int port;                 /* 0: any free port (see server_port) */
    const char *api_key;      /* NULL or "": no key needed */
    bool metrics_require_key; /* /metrics needs the key too */
    bool webui;               /* serve the chat page at / (webui.h) */
    const served_model_config *models; /* what is served, the default first (copied) */
    int n_models;
    const served_model_loader *loader; /* NULL: every model is handed over before ready and stays */
    int max_loaded_models;             /* with a loader: in memory at most (served_models.h) */
    size_t max_body_bytes;    /* larger bodies get 413 */
    int max_connections;      /* 0: what the open-file limit allows */
    int max_per_client;       /* connections per client address; 0: no limit */
    int keep_alive_s;         /* see http_limits; 0: the defaults below */
    int header_timeout_s;
    int body_timeout_s;
    size_t response_cache_size; /* entries; 0: no response cache */
    const cors_config *cors;  /* cross-origin access; NULL: none (the caller keeps it alive) */
    int max_embed_inputs;     /* inputs per /v1/embeddings request; 0: SERVER_DEFAULT_MAX_EMBED_INPUTS */
    size_t embed_cache_size;  /* entries; 0: no embedding cache */
} server_config;

#define SERVER_DEFAULT_KEEP_ALIVE_S 5
#define SERVER_DEFAULT_HEADER_TIMEOUT_S 10
#define SERVER_DEFAULT_BODY_TIMEOUT_S 60

typedef enum { SERVER_LOADING, SERVER_READY, SERVER_DRAINING } server_state;

typedef struct server {
    server_config cfg;
    http_server http;
    _Atomic int state;
    served_models models; /* each filled once before state becomes READY */
    time_t created;
    /* Generation requests the HTTP side is still serving. */
    _Atomic int n_active;
    _Atomic uint64_t next_id;
    response_cache *response_cache; /* NULL: off */
} server;

/* Starts listening (state LOADING). Returns -1 with err_get() when the models'
 * names clash, the address cannot be bound or the response cache cannot be
 * made. */
int server_start(server *s, const server_config *cfg);
/* The port actually bound. */
int server_port(const server *s);
/* Hands over model i (in cfg.models' order), its started engine and its chat
 * template. */
void server_set_model(server *s, int i, model *m, engine *e, const chat_template *tmpl);
/* Every model is set: requests are served (/health answers 200). */
void server_set_ready(server *s);
/* Hands over model i when it is an embedding model, and its embedder: it
 * serves /v1/embeddings (and generation requests naming it get a 400). Makes
 * its embedding cache; -1 with err_get() when it cannot. */
int server_set_encoder(server *s, int i, const encoder *enc, embedder *eb);
/* Stops accepting connections; requests on open connections get 503. */
void server_drain(server *s);
/* Requests still being prepared or answered by a handler thread. */
int server_handling(server *s);
/* Closes every connection and joins the HTTP threads, then frees the response
 * cache; server_handling must be 0 and no stream still waiting for the engine. */
void server_stop(server *s);
/* After server_stop, once the engines are freed (their requests' callbacks
 * count into the models' counters): frees the table of models. */
void server_free(server *s);

/* For the small endpoints: every key of the JSON body is one of `allowed`
 * (NULL-terminated; else a 400 naming it), and "model", when given, is a
 * string or null (its name is routed by served_models_route). 0, or -1 with
 * *e filled. */
int server_check_fields(const json_t *body, const char *const *allowed, api_error *e);
/* A fresh id such as "chatcmpl-5f0c...". */
void server_new_id(server *s, const char *prefix, char *out, size_t cap);

#endif
