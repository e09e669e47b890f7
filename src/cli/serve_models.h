/* The models `cllm serve` loads: one per MODEL / --model, each named by the
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
#ifndef CLLM_CLI_SERVE_MODELS_H
#define CLLM_CLI_SERVE_MODELS_H

#include "chat/template.h"
#include "cli/cli_groups.h"
#include "cli/cli_parallel.h"
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
} serve_model;

/* What every model's engine shares: the settings, the speculative decoding
 * and the server's queue limit. */
typedef struct {
    const cli_model_settings *model;
    const cli_engine_settings *engine;
    spec_config spec;
    int max_waiting;
    int max_loaded; /* --max-loaded-models; 0: all */
    cli_tp *tp;     /* the tensor-parallel job (one model only), or NULL: each model whole */
} serve_engine_settings;

typedef struct {
    serve_model *v;
    int n;
    served_model_config *names; /* [n], for server_config: views of path and name */
    serve_engine_settings st;   /* from serve_models_load, for later loads */
    size_t lazy_share;          /* KV bytes of each model loaded on demand; 0: none is */
} serve_models;

/* The models to serve, in the order given (MODEL and --model alike); names
 * pair with them in order. Returns -1 with err_get() for no model, more names
 * than models, or two models under one name. */
int serve_models_plan(serve_models *ms, const cli_list *paths, const cli_list *names);

/* Loads each embedding model and its embedder, and each generative model
 * (the first st->max_loaded of them, when that is fewer) and its chat
 * template, splits the KV budget, creates and starts each engine, logging
 * what each got. Returns -1 after printing why (what was
 * loaded stays for serve_models_free). */
int serve_models_load(serve_models *ms, const serve_engine_settings *st);
/* Whether models not loaded yet are loaded on demand. */
bool serve_models_lazy(const serve_models *ms);
/* The loader the server uses for them (user: ms). */
served_model_loader serve_models_loader(serve_models *ms);

/* Stops and frees the engines and embedders, templates and models. */
void serve_models_free(serve_models *ms);

#endif
