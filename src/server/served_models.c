/* See served_models.h. */
#include "server/served_models.h"

#include "util/buf.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

int served_models_init(served_models *ms, const served_model_config *cfg, int n, const served_model_loader *loader,
                       int max_loaded) {
    *ms = (served_models){0};
    if (n < 1) return err_set("no model to serve");
    for (int i = 0; i < n; i++) {
        if (!cfg[i].name || !*cfg[i].name) return err_set("model %d has no served name", i + 1);
        for (int j = 0; j < i; j++)
            if (!strcmp(cfg[i].name, cfg[j].name))
                return err_set("two models are served as '%s'; give each its own --served-model-name", cfg[i].name);
    }
    if (!(ms->v = calloc((size_t)n, sizeof *ms->v))) return err_oom("out of memory for %d models", n);
    ms->n = n;
    for (int i = 0; i < n; i++) ms->v[i] = (served_model){.name = cfg[i].name, .path = cfg[i].path};
    if (loader && loader->load) ms->loader = *loader;
    ms->max_loaded = max_loaded > 0 && max_loaded < n ? max_loaded : n;
    pthread_mutex_init(&ms->mu, NULL);
    pthread_cond_init(&ms->cv, NULL);
    return 0;
}

void served_models_free(served_models *ms) {
    for (int i = 0; i < ms->n; i++) embed_cache_free(ms->v[i].embed_cache);
    if (ms->v) {
        pthread_mutex_destroy(&ms->mu);
        pthread_cond_destroy(&ms->cv);
    }
    free(ms->v);
    *ms = (served_models){0};
}

static const char *base_name(const char *p) {
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static bool is_alias(const served_model *sm, const char *name) {
    if (sm->path && (!strcmp(name, sm->path) || !strcmp(name, base_name(sm->path)))) return true;
    return sm->m && sm->m->name && !strcmp(name, sm->m->name);
}

served_model *served_models_find(const served_models *ms, const char *name) {
    for (int i = 0; i < ms->n; i++)
        if (!strcmp(name, ms->v[i].name)) return &ms->v[i];
    for (int i = 0; i < ms->n; i++)
        if (is_alias(&ms->v[i], name)) return &ms->v[i];
    return NULL;
}

int served_models_not_found(const served_models *ms, const char *name, api_error *e) {
    buf names = {0};
    for (int i = 0; i < ms->n; i++) buf_printf(&names, "%s'%.100s'", i ? ", " : "", ms->v[i].name);
    api_fail(e, 404, "model_not_found", "model", "The model '%.200s' does not exist. Available model%s: %.700s", name,
             ms->n == 1 ? "" : "s", names.data && !names.oom ? names.data : "");
    buf_free(&names);
    return -1;
}

served_model *served_models_route(const served_models *ms, const json_t *body, api_error *e) {
    const json_t *m = json_is_object(body) ? json_object_get(body, "model") : NULL;
    if (!json_is_string(m)) return &ms->v[0];
    served_model *sm = served_models_find(ms, json_string_value(m));
    if (!sm) served_models_not_found(ms, json_string_value(m), e);
    return sm;
}

int served_models_check_task(const served_model *sm, bool embeddings, const char *api, api_error *e) {
    if (embeddings == (sm->enc != NULL)) return 0;
    /* vLLM's answer for an endpoint the model's task lacks, and what to use instead. */
    return api_fail(e, 400, "invalid_request_error", "model", "The model '%.200s' does not support %s API (%s)",
                    sm->name, api,
                    embeddings ? "it generates text: use /v1/completions or /v1/chat/completions"
                               : "it is an embedding model: use /v1/embeddings");
}
