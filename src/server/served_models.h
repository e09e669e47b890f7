/* The models one server serves (`cllm serve --model a.gguf --model b.gguf`),
 * as llama-server's router mode does: each has its own engine (scheduler
 * thread, KV pool), chat template and counters, and every request goes to
 * the one its "model" field names. A request without "model" goes to the
 * first, the default; an unknown name is a 404 (code "model_not_found")
 * whose message lists the names served.
 *
 * A model answers to its served name, and also to its path, its file name
 * and the name in its GGUF metadata; served names are looked up first, so an
 * alias never hides another model's served name. */
#ifndef CLLM_SERVER_SERVED_MODELS_H
#define CLLM_SERVER_SERVED_MODELS_H

#include "chat/template.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/errors.h"
#include "server/gen.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    const char *name; /* the id clients use */
    const char *path; /* also accepted as an id, as is its file name; may be NULL */
} served_model_config;

typedef struct {
    const char *name;
    const char *path;
    /* Set once before the server is ready, read-only after. */
    model *m;
    engine *e;
    const chat_template *tmpl;
    int max_model_len;
    gen_counters counters;                    /* finished sequences, by reason */
    _Atomic uint64_t cache_hits, cache_misses; /* its cacheable requests in the response cache */
} served_model;

typedef struct {
    served_model *v;
    int n;
} served_models;

/* Copies the names and paths (not the strings: the caller keeps them alive).
 * Returns -1 with err_get() when n < 1, a name is missing or two are equal. */
int served_models_init(served_models *ms, const served_model_config *cfg, int n);
void served_models_free(served_models *ms);
/* Hands over a loaded model, its started engine and its chat template. */
void served_models_set(served_models *ms, int i, model *m, engine *e, const chat_template *tmpl);

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
