/* See model_set.h. */
#include "server/model_set.h"

#include "server/model_template.h"
#include "kv/kv_share.h"
#include "util/error.h"
#include "util/mem_size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "models/gemma-3-270m.gguf" -> "gemma-3-270m" */
static char *default_served_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b && b[1] ? b + 1 : path;
    char *s = strdup(b);
    if (!s) return NULL;
    const size_t n = strlen(s);
    if (n > 5 && !strcmp(s + n - 5, ".gguf")) s[n - 5] = 0;
    return s;
}

int model_set_plan(model_set *ms, const char *const *paths, int n, const char *const *names, int n_names) {
    *ms = (model_set){0};
    if (n == 0) return err_set("missing MODEL");
    if (n_names > n)
        return err_set("%d --served-model-name for %d model%s: give at most one per model, in the models' order",
                       n_names, n, n == 1 ? "" : "s");
    ms->v = calloc((size_t)n, sizeof *ms->v);
    ms->names = calloc((size_t)n, sizeof *ms->names);
    if (!ms->v || !ms->names) {
        model_set_free(ms);
        return err_oom("out of memory");
    }
    ms->n = n;
    for (int i = 0; i < n; i++) {
        model_set_entry *sm = &ms->v[i];
        sm->path = paths[i];
        sm->name = i < n_names ? strdup(names[i]) : default_served_name(sm->path);
        if (!sm->name) {
            model_set_free(ms);
            return err_oom("out of memory");
        }
        ms->names[i] = (served_model_config){.name = sm->name, .path = sm->path};
        for (int j = 0; j < i; j++)
            if (!strcmp(ms->v[j].name, sm->name)) {
                err_set("models %d (%s) and %d (%s) are both served as '%s'; name each with --served-model-name",
                        j + 1, ms->v[j].path, i + 1, sm->path, sm->name);
                model_set_free(ms);
                return -1;
            }
    }
    return 0;
}

/* One model's engine configuration: the settings, with --max-model-len checked
 * against the model and defaulting to its trained context (at most 8192). */
static int engine_config_for(const model_set_settings *st, const model_set_entry *sm, size_t kv_bytes,
                             engine_config *cfg) {
    *cfg = st->engine;
    const long trained = sm->m->hp.n_ctx_train;
    if (cfg->max_model_len > trained) {
        err_set("--max-model-len %d is more than the trained context of %s (%ld tokens)", cfg->max_model_len,
                sm->name, trained);
        fprintf(stderr, "cllm serve: %s\n", err_get());
        return -1;
    }
    if (!cfg->max_model_len) cfg->max_model_len = (int)(trained < 8192 ? trained : 8192);
    cfg->kv_cache_bytes = kv_bytes;
    return 0;
}

/* --kv-cache-memory, else 1 GiB or a quarter of the memory free now. */
static size_t kv_budget(const model_set_settings *st) {
    if (st->engine.kv_cache_bytes) return st->engine.kv_cache_bytes;
    const size_t avail = mem_available_bytes();
    size_t bytes = (size_t)1 << 30;
    if (avail && avail / 4 < bytes) bytes = avail / 4;
    return bytes;
}

static int load_one(model_set_entry *sm, const model_set_settings *st) {
    fprintf(stderr, "cllm serve: loading %s as '%s'\n", sm->path, sm->name);
    sm->m = st->load_model ? st->load_model(st->load_user, sm->path) : model_load(sm->path);
    if (!sm->m || !(sm->tmpl = model_template_load(sm->m, st->chat_template, st->trust_template_content, "serve"))) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        return -1;
    }
    reasoning_format rf;
    if (st->reasoning_parser && reasoning_format_parse(st->reasoning_parser, &rf))
        chat_template_set_reasoning(sm->tmpl, rf);
    if (chat_template_reasoning(sm->tmpl) != REASONING_NONE)
        fprintf(stderr, "cllm serve: %s: replies' reasoning (%s) goes to reasoning_content%s\n", sm->name,
                chat_template_reasoning(sm->tmpl) == REASONING_HARMONY ? "harmony's analysis channel"
                                                                       : "<think> ... </think>",
                st->reasoning_parser ? ""
                                     : " (as the chat template shows; --reasoning-parser none keeps it in content)");
    if (chat_template_tool_format(sm->tmpl) != TOOL_FORMAT_NONE)
        fprintf(stderr, "cllm serve: %s: tool calls are read in the '%s' format the chat template shows\n", sm->name,
                tool_format_name(chat_template_tool_format(sm->tmpl)));
    else
        fprintf(stderr, "cllm serve: %s: the chat template shows no tool-call format: tools are offered in a system "
                        "message and replies held to the generic JSON format\n", sm->name);
    return 0;
}

static void log_engine(const model_set_entry *sm) {
    const engine_config *ec = engine_get_config(sm->e);
    fprintf(stderr,
            "cllm serve: %s: KV cache %.1f MiB (%s, blocks of %d tokens, prefix caching %s): %d tokens; maximum "
            "concurrency at %d tokens per request: %d\n",
            sm->name, (double)ec->kv_cache_bytes / 1048576.0, kv_dtype_name(ec->kv_type), ec->block_size,
            ec->prefix_caching ? "on" : "off", engine_kv_capacity_tokens(sm->e), ec->max_model_len,
            engine_max_concurrency(sm->e));
    if (ec->spec.method == SPEC_NGRAM)
        fprintf(stderr,
                "cllm serve: %s: speculative decoding: ngram, up to %d draft tokens, n-grams of %d to %d tokens, off "
                "above %d running sequences\n",
                sm->name, ec->spec.num_speculative_tokens, ec->spec.prompt_lookup_min, ec->spec.prompt_lookup_max,
                ec->spec.disable_by_batch_size);
    else if (ec->spec.method == SPEC_DRAFT_MODEL)
        fprintf(stderr,
                "cllm serve: %s: speculative decoding: draft model %s, up to %d draft tokens, off above %d running "
                "sequences\n",
                sm->name, ec->spec.model, ec->spec.num_speculative_tokens, ec->spec.disable_by_batch_size);
    if (ec->spec.lookup_first)
        fprintf(stderr,
                "cllm serve: %s: speculative decoding: n-gram lookup first, up to %d draft tokens, n-grams of %d to "
                "%d tokens\n",
                sm->name, spec_lookup_max(&ec->spec), ec->spec.prompt_lookup_min, ec->spec.prompt_lookup_max);
}

/* Creates and starts model i's engine with kv_bytes of KV cache. */
static int start_engine(model_set *ms, int i, size_t kv_bytes) {
    model_set_entry *sm = &ms->v[i];
    engine_config cfg;
    if (engine_config_for(&ms->st, sm, kv_bytes, &cfg)) return -1;
    if (!(sm->e = engine_create(sm->m, &cfg))) {
        fprintf(stderr, "cllm serve: cannot start the engine of %s: %s\n", sm->name, err_get());
        return -1;
    }
    log_engine(sm);
    if (engine_start(sm->e)) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        return -1;
    }
    return 0;
}

/* Every generative model loaded now: the budget split by KV bytes per token
 * (an embedding model's share is 0). */
static int load_all(model_set *ms, size_t total) {
    int n_gen = 0;
    for (int i = 0; i < ms->n; i++) {
        if (ms->v[i].enc) continue;
        if (load_one(&ms->v[i], &ms->st)) return -1;
        n_gen++;
    }
    if (n_gen == 0) return 0;
    size_t *per_token = calloc((size_t)ms->n, sizeof *per_token), *share = calloc((size_t)ms->n, sizeof *share);
    if (!per_token || !share) {
        free(per_token);
        free(share);
        fprintf(stderr, "cllm serve: out of memory\n");
        return -1;
    }
    const kv_dtype dt = ms->st.engine.kv_type;
    for (int i = 0; i < ms->n; i++) per_token[i] = ms->v[i].m ? kv_bytes_per_token(&ms->v[i].m->kv, dt) : 0;
    kv_share_split(total, per_token, ms->n, share);
    if (n_gen > 1) {
        fprintf(stderr, "cllm serve: KV cache budget %.1f MiB over %d models, in proportion to their KV bytes per "
                        "token (%s):\n", (double)total / 1048576.0, n_gen, kv_dtype_name(dt));
        for (int i = 0; i < ms->n; i++)
            if (ms->v[i].m)
                fprintf(stderr, "cllm serve:   %s: %zu bytes per token, %.1f MiB\n", ms->v[i].name, per_token[i],
                        (double)share[i] / 1048576.0);
    }
    int rc = 0;
    for (int i = 0; i < ms->n && !rc; i++)
        if (ms->v[i].m) rc = start_engine(ms, i, share[i]);
    free(per_token);
    free(share);
    return rc;
}

bool model_set_lazy(const model_set *ms) { return ms->lazy_share > 0; }

/* An embedding model, its input length checked against --max-model-len, and
 * its embedder. */
static int load_encoder(model_set *ms, model_set_entry *sm, bool alone) {
    fprintf(stderr, "cllm serve: loading %s as '%s' (an embedding model)\n", sm->path, sm->name);
    if (!(sm->enc = encoder_load(sm->path))) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        return -1;
    }
    const long want = ms->st.engine.max_model_len;
    if (want > sm->enc->hp.n_pos && alone) {
        fprintf(stderr, "cllm serve: --max-model-len %ld is more than the model's %d positions\n", want,
                sm->enc->hp.n_pos);
        return -1;
    }
    if (want > 0 && want < sm->enc->max_len) sm->enc->max_len = (int)want;
    const long asked = ms->st.engine.max_num_batched_tokens;
    const long batch = asked > sm->enc->max_len ? asked : sm->enc->max_len; /* one whole input at least */
    if (!(sm->eb = embedder_create(sm->enc, ms->st.engine.n_threads, (int)batch))) {
        fprintf(stderr, "cllm serve: %s\n", err_get());
        return -1;
    }
    fprintf(stderr,
            "cllm serve: %s: %d dimensions, %s pooling%s, inputs of up to %d tokens, %ld tokens per forward pass\n",
            sm->name, sm->enc->hp.n_embd, sm->enc->pooling == POOL_CLS ? "CLS" : "mean",
            sm->enc->normalize ? ", normalized" : "", sm->enc->max_len, batch);
    return 0;
}

int model_set_load(model_set *ms, const model_set_settings *st) {
    ms->st = *st;
    int n_gen = 0;
    for (int i = 0; i < ms->n; i++) {
        if (!encoder_is_encoder_model(ms->v[i].path)) n_gen++;
        else if (load_encoder(ms, &ms->v[i], ms->n == 1)) return -1;
    }
    const size_t total = kv_budget(st);
    if (st->max_loaded <= 0 || st->max_loaded >= n_gen) return load_all(ms, total);
    ms->lazy_share = total / (size_t)st->max_loaded;
    fprintf(stderr,
            "cllm serve: at most %d of %d models in memory (--max-loaded-models); KV cache budget %.1f MiB, "
            "%.1f MiB for each model in memory; loading the first %d now, the others on their first request\n",
            st->max_loaded, n_gen, (double)total / 1048576.0, (double)ms->lazy_share / 1048576.0, st->max_loaded);
    for (int i = 0, loaded = 0; i < ms->n && loaded < st->max_loaded; i++) {
        if (ms->v[i].enc) continue;
        if (load_one(&ms->v[i], &ms->st) || start_engine(ms, i, ms->lazy_share)) return -1;
        loaded++;
    }
    return 0;
}

static void unload(model_set *ms, int i) {
    model_set_entry *sm = &ms->v[i];
    embedder_free(sm->eb);
    encoder_free(sm->enc);
    sm->eb = NULL;
    sm->enc = NULL;
    engine_free(sm->e);
    if (sm->tmpl) chat_template_free(sm->tmpl);
    if (sm->m) model_free(sm->m);
    sm->e = NULL;
    sm->tmpl = NULL;
    sm->m = NULL;
}

static int load_cb(void *user, int i, model **m, engine **e, const chat_template **tmpl) {
    model_set *ms = user;
    model_set_entry *sm = &ms->v[i];
    if (load_one(sm, &ms->st) || start_engine(ms, i, ms->lazy_share)) {
        unload(ms, i); /* err_get() still says why */
        return -1;
    }
    *m = sm->m;
    *e = sm->e;
    *tmpl = sm->tmpl;
    return 0;
}

static void unload_cb(void *user, int i) {
    model_set *ms = user;
    fprintf(stderr, "cllm serve: unloading %s (the least recently used, to make room)\n", ms->v[i].name);
    unload(ms, i);
}

served_model_loader model_set_loader(model_set *ms) {
    return (served_model_loader){.user = ms, .load = load_cb, .unload = unload_cb};
}

void model_set_free(model_set *ms) {
    for (int i = 0; i < ms->n; i++) { /* every engine and embedder stops before any model goes */
        engine_free(ms->v[i].e);
        ms->v[i].e = NULL;
        embedder_free(ms->v[i].eb);
        ms->v[i].eb = NULL;
    }
    for (int i = 0; i < ms->n; i++) {
        unload(ms, i);
        free(ms->v[i].name);
    }
    free(ms->v);
    free(ms->names);
    *ms = (model_set){0};
}
