/* Which served models are in memory (served_models.h): the state of each
 * (unloaded, loading, loaded, unloading), the requests holding it, and, with
 * --max-loaded-models, loading on first use and unloading the least recently
 * used idle model to make room. Loads and unloads run outside the table's
 * lock (they take seconds); the states keep everyone else off a model in
 * between, and the condition variable wakes whoever waits for one. */
#include "server/served_models.h"

#include "util/error.h"

#include <time.h>

static void fill(served_model *sm, model *m, engine *e, const chat_template *tmpl) {
    sm->m = m;
    sm->e = e;
    sm->tmpl = tmpl;
    if (e) sm->max_model_len = engine_get_config(e)->max_model_len;
}

void served_models_set(served_models *ms, int i, model *m, engine *e, const chat_template *tmpl) {
    pthread_mutex_lock(&ms->mu);
    fill(&ms->v[i], m, e, tmpl);
    ms->v[i].state = MODEL_LOADED;
    ms->v[i].last_use = ++ms->clock;
    pthread_cond_broadcast(&ms->cv);
    pthread_mutex_unlock(&ms->mu);
}

void served_models_set_encoder(served_models *ms, int i, const encoder *enc, embedder *eb, embed_cache *cache) {
    pthread_mutex_lock(&ms->mu);
    served_model *sm = &ms->v[i];
    sm->enc = enc;
    sm->embedder = eb;
    sm->embed_cache = cache;
    sm->max_model_len = enc->max_len;
    sm->state = MODEL_LOADED;
    pthread_cond_broadcast(&ms->cv);
    pthread_mutex_unlock(&ms->mu);
}

/* Generative models in memory (embedding models stay, and do not count). */
static int resident(const served_models *ms) {
    int n = 0;
    for (int i = 0; i < ms->n; i++) n += ms->v[i].state != MODEL_UNLOADED && !ms->v[i].enc;
    return n;
}

/* The loaded model used least recently that no request holds and whose
 * engine has nothing left to do (aborted requests still finishing); NULL:
 * none yet. Caller holds the lock. */
static served_model *idle_victim(served_models *ms) {
    served_model *best = NULL;
    for (int i = 0; i < ms->n; i++) {
        served_model *sm = &ms->v[i];
        if (sm->state != MODEL_LOADED || !sm->e || sm->holders > 0 || engine_has_work(sm->e)) continue;
        if (!best || sm->last_use < best->last_use) best = sm;
    }
    return best;
}

/* Waits for a change, or a short while: an engine going idle signals nothing. */
static void wait_a_little(served_models *ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&ms->cv, &ms->mu, &ts);
}

/* Caller holds the lock and has marked sm LOADING (and victim, when not NULL,
 * UNLOADING); both are done when this returns, the lock held again. */
static int swap_in(served_models *ms, served_model *sm, served_model *victim, api_error *e) {
    pthread_mutex_unlock(&ms->mu);
    if (victim) {
        ms->loader.unload(ms->loader.user, (int)(victim - ms->v));
        fill(victim, NULL, NULL, NULL);
    }
    model *m = NULL;
    engine *en = NULL;
    const chat_template *tmpl = NULL;
    const int rc = ms->loader.load(ms->loader.user, (int)(sm - ms->v), &m, &en, &tmpl);
    if (rc) api_fail(e, 503, "model_load_failed", "model", "The model '%.200s' could not be loaded: %.600s", sm->name,
                     err_get());
    pthread_mutex_lock(&ms->mu);
    if (victim) victim->state = MODEL_UNLOADED;
    if (!rc) fill(sm, m, en, tmpl);
    sm->state = rc ? MODEL_UNLOADED : MODEL_LOADED;
    pthread_cond_broadcast(&ms->cv);
    return rc;
}

int served_models_acquire(served_models *ms, served_model *sm, api_error *e) {
    pthread_mutex_lock(&ms->mu);
    int rc = 0;
    for (;;) {
        if (ms->closing) {
            rc = api_fail(e, 503, "shutting_down", NULL, "The server is shutting down");
            break;
        }
        if (sm->state == MODEL_LOADED) {
            sm->holders++;
            sm->last_use = ++ms->clock;
            break;
        }
        if (!ms->loader.load) { /* not handed over yet: the server is not ready */
            rc = api_fail(e, 503, "loading", NULL, "The model '%.200s' is still loading", sm->name);
            break;
        }
        if (sm->state != MODEL_UNLOADED) { /* someone else is loading it, or unloading it */
            pthread_cond_wait(&ms->cv, &ms->mu);
            continue;
        }
        served_model *victim = NULL;
        if (resident(ms) >= ms->max_loaded && !(victim = idle_victim(ms))) {
            wait_a_little(ms);
            continue;
        }
        sm->state = MODEL_LOADING;
        if (victim) victim->state = MODEL_UNLOADING;
        if ((rc = swap_in(ms, sm, victim, e))) break;
    }
    pthread_mutex_unlock(&ms->mu);
    return rc;
}

void served_models_release(served_models *ms, served_model *sm) {
    pthread_mutex_lock(&ms->mu);
    sm->holders--;
    sm->last_use = ++ms->clock;
    pthread_cond_broadcast(&ms->cv);
    pthread_mutex_unlock(&ms->mu);
}

bool served_models_loaded(served_models *ms, const served_model *sm) {
    pthread_mutex_lock(&ms->mu);
    const bool loaded = sm->state == MODEL_LOADED;
    pthread_mutex_unlock(&ms->mu);
    return loaded;
}

bool served_models_stats(served_models *ms, int i, engine_stats *out) {
    pthread_mutex_lock(&ms->mu);
    const bool running = ms->v[i].state == MODEL_LOADED && ms->v[i].e;
    if (running) engine_get_stats(ms->v[i].e, out);
    pthread_mutex_unlock(&ms->mu);
    return running;
}

void served_models_abort_all(served_models *ms) {
    pthread_mutex_lock(&ms->mu);
    ms->closing = true;
    pthread_cond_broadcast(&ms->cv);
    for (int i = 0; i < ms->n; i++)
        if (ms->v[i].state == MODEL_LOADED && ms->v[i].e) engine_abort_all(ms->v[i].e);
    pthread_mutex_unlock(&ms->mu);
}

bool served_models_busy(served_models *ms) {
    pthread_mutex_lock(&ms->mu);
    bool busy = false;
    for (int i = 0; i < ms->n && !busy; i++) busy = ms->v[i].state == MODEL_LOADED && ms->v[i].e && engine_has_work(ms->v[i].e);
    pthread_mutex_unlock(&ms->mu);
    return busy;
}
