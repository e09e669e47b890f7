/* The models a server loads (`cllm serve` gives them): one per MODEL / --model, each named by the
 * --served-model-name in the same position (or its file name), each with its
 * own chat template and engine. The KV budget (--kv-cache-memory, else 1 GiB
 * or a quarter of the free memory) is one for the whole server, split over
 * the models in proportion to their KV bytes per token (kv/kv_share.h), so
 * every model holds about the same number of tokens; the split is logged.
 *
 * With --max-loaded-models N below the number of models, the first N are
 * loaded at start and the others when a request first names them, through
 * the loader given to the server (server/served_models.h), which unloads the
 * least recently used idle model to make room. The budget is then split
 * evenly into N shares, one per model in memory: a model's KV bytes per token
 * are only known once it is loaded.
 *
 * An embedding model (a BERT encoder: encoder_is_encoder_model) among them
 * gets an encoder and an embedder instead of an engine: it is always loaded
 * at start, takes no KV budget and does not count in --max-loaded-models.
 * --max-model-len lowers its input length when smaller than the model's;
 * served alone, a larger one is an error, as for a generative model. */
#ifndef CLLM_SERVER_MODEL_SET_H
#define CLLM_SERVER_MODEL_SET_H

#include "chat/template.h"
#include "engine/embedder.h"
#include "engine/engine.h"
#include "model/encoder.h"
#include "model/model.h"
#include "server/served_models.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *path;
    char *name;          /* the served name (owned) */
    model *m;
    chat_template *tmpl;
    engine *e;
    encoder *enc;        /* an embedding model: these instead of m, tmpl and e */
    embedder *eb;
} model_set_entry;

/* What every model's engine shares, and how a model is read. */
typedef struct {
    /* Every engine's configuration (speculative decoding and the queue limit
     * included). max_model_len 0: each model's trained context, at most 8192;
     * kv_cache_bytes 0: 1 GiB or a quarter of the free memory, for all models
     * together. An embedding model takes its thread count, max_model_len and
     * max_num_batched_tokens from it. */
    engine_config engine;
    int max_loaded;              /* --max-loaded-models; 0: all */
    const char *chat_template;   /* a template file for every model, or NULL: each model's own */
    bool trust_template_content; /* control tokens in message content are parsed */
    const char *reasoning_parser; /* --reasoning-parser: "none", "deepseek_r1", ...; NULL: as each template shows */
    /* Reads a model (a tensor-parallel job reads its shard), or NULL: model_load. */
    model *(*load_model)(void *user, const char *path);
    void *load_user;
} model_set_settings;

typedef struct {
    model_set_entry *v;
    int n;
    served_model_config *names; /* [n], for server_config: views of path and name */
    model_set_settings st;   /* from model_set_load, for later loads */
    size_t lazy_share;          /* KV bytes of each model loaded on demand; 0: none is */
} model_set;

/* The n models to serve, in the order given (MODEL and --model alike); the
 * n_names names pair with them in order. Returns -1 with err_get() for no model, more names
 * than models, or two models under one name. */
int model_set_plan(model_set *ms, const char *const *paths, int n, const char *const *names, int n_names);

/* Loads each embedding model and its embedder, and each generative model
 * (the first st->max_loaded of them, when that is fewer) and its chat
 * template, splits the KV budget, creates and starts each engine, logging
 * what each got. Returns -1 after printing why (what was
 * loaded stays for model_set_free). */
int model_set_load(model_set *ms, const model_set_settings *st);
/* Whether models not loaded yet are loaded on demand. */
bool model_set_lazy(const model_set *ms);
/* The loader the server uses for them (user: ms). */
served_model_loader model_set_loader(model_set *ms);

/* Stops and frees the engines and embedders, templates and models. */
void model_set_free(model_set *ms);

#endif
