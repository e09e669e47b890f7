/* The models one server serves (`cllm serve --model a.gguf --model b.gguf`),
 * as llama-server's router mode does: each has its own engine (scheduler
 * thread, KV pool), chat template and counters, and every request goes to
 * the one its "model" field names. A request without "model" goes to the
 * first, the default; an unknown name is a 404 (code "model_not_found")
 * whose message lists the names served.
 *
 * A model answers to its served name, and also to its path, its file name
 * and the name in its GGUF metadata; served names are looked up first, so an
 * alias never hides another model's served name.
 *
 * With a loader and max_loaded > 0 (`--max-loaded-models N`), at most N models
 * are in memory: a request for one that is not loads it (through the loader,
 * a callback from the command that knows how), first unloading the least
 * recently used model that no request holds and whose engine is idle; other
 * requests for a model being loaded wait for it, and a load that fails is a
 * 503 for the request that tried (the next one tries again). A request
 * holds its model from served_models_acquire to served_models_release, so a
 * model is never unloaded under one.
 *
 * An embedding model (a BERT encoder) sits in the same table: it has an
 * encoder and an embedder instead of a model and an engine, serves
 * /v1/embeddings only (a generation request naming it is a 400, as is an
 * embeddings request naming a generative model), is set before serving and
 * is never unloaded, nor counted in max_loaded. */
#ifndef CLLM_SERVER_SERVED_MODELS_H
#define CLLM_SERVER_SERVED_MODELS_H

#include "chat/template.h"
#include "engine/embedder.h"
#include "engine/engine.h"
#include "model/encoder.h"
#include "model/model.h"
#include "server/embed_cache.h"
#include "server/errors.h"
#include "server/generation.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *name; /* the id clients use */
    const char *path; /* also accepted as an id, as is its file name; may be NULL */
} served_model_config;

/* How models are loaded and unloaded on demand (--max-loaded-models). */
typedef struct {
    void *user;
    /* Loads model i and starts its engine. Returns -1 with err_get(). */
    int (*load)(void *user, int i, model **m, engine **e, const chat_template **tmpl);
    /* Frees model i's engine (idle), template and model. */
    void (*unload)(void *user, int i);
} served_model_loader;

typedef enum { MODEL_UNLOADED, MODEL_LOADING, MODEL_LOADED, MODEL_UNLOADING } served_model_state;

typedef struct {
    const char *name;
    const char *path;
    /* Set while loaded; read by the requests that hold the model. */
    model *m;
    engine *e;
    const chat_template *tmpl;
    /* An embedding model has these instead (set once, before serving): */
    const encoder *enc;
    embedder *embedder;
    embed_cache *embed_cache; /* NULL: no cache (--embedding-cache-size 0) */
    _Atomic int max_model_len;                /* 0 until first loaded; kept after an unload, for /v1/models */
    gen_counters counters;                    /* finished sequences, by reason */
    _Atomic uint64_t cache_hits, cache_misses; /* its cacheable requests in the response cache */
    /* Under the table's lock: */
    served_model_state state;
    int holders;       /* requests between acquire and release */
    uint64_t last_use; /* the table's clock at the last acquire */
} served_model;

typedef struct {
    served_model *v;
    int n;
    served_model_loader loader; /* load NULL: every model is set before serving, never unloaded */
    int max_loaded;             /* with a loader: models in memory at most */
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a load or unload finished, or a holder let go */
    uint64_t clock;
    bool closing;               /* served_models_abort_all was called: no more loads */
} served_models;

/* Copies the names and paths (not the strings: the caller keeps them alive)
 * and the loader (NULL: none). Returns -1 with err_get() when n < 1, a name
 * is missing or two are equal. */
int served_models_init(served_models *ms, const served_model_config *cfg, int n, const served_model_loader *loader,
                       int max_loaded);
void served_models_free(served_models *ms);
/* Hands over a loaded model, its started engine and its chat template. */
void served_models_set(served_models *ms, int i, model *m, engine *e, const chat_template *tmpl);

/* Hands over an embedding model: its encoder, embedder and cache (NULL:
 * none; the table then owns it: served_models_free frees it). */
void served_models_set_encoder(served_models *ms, int i, const encoder *enc, embedder *eb, embed_cache *cache);
/* 0 when sm serves what the request asks (embeddings: an embedding model;
 * otherwise a generative one), else -1 with a 400 in *e naming `api` (as
 * vLLM words it: "Completions", "Chat Completions", "Embeddings", ...). */
int served_models_check_task(const served_model *sm, bool embeddings, const char *api, api_error *e);

/* Holds sm for a request, loading it first when it is not in memory. Returns
 * 0, or -1 with a 503 in *e when it could not be loaded. */
int served_models_acquire(served_models *ms, served_model *sm, api_error *e);
void served_models_release(served_models *ms, served_model *sm);
/* Whether sm is in memory now (its engine running). */
bool served_models_loaded(served_models *ms, const served_model *sm);
/* Model i's engine stats when its engine runs (else false, *out untouched:
 * not loaded, or an embedding model). */
bool served_models_stats(served_models *ms, int i, engine_stats *out);
/* Aborts every loaded engine's requests, and from then on refuses (503) the
 * requests still waiting for a model; whether any engine still has work. */
void served_models_abort_all(served_models *ms);
bool served_models_busy(served_models *ms);

/* The model `name` names (served names first, then aliases); NULL: none. */
served_model *served_models_find(const served_models *ms, const char *name);
/* The model a request body's "model" field names: the first when the field
 * is missing or null, and also when it is not a string (the endpoint's own
 * parsing then answers 400 for the type). NULL with a 404 in *e for an
 * unknown name. */
served_model *served_models_route(const served_models *ms, const json_t *body, api_error *e);
/* 404 model_not_found for `name`, naming the models served. Returns -1. */
int served_models_not_found(const served_models *ms, const char *name, api_error *e);

#endif
