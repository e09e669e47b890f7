/* Drives the engine through a scripted scenario for the integration tests:
 * reads JSON from stdin (engine config; requests with prompt token ids,
 * parameters, the step at which each arrives and optionally is aborted),
 * steps the engine until every request has finished, and prints JSON with
 * each request's tokens, text, finish reason and evicted tokens per sample,
 * plus the block accounting at the end and the blocks in use after each step. Usage: engine_harness MODEL.gguf < scenario.json */
#include "engine/engine.h"
#include "kv/block_pool.h"
#include "model/model.h"
#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    json_t *samples; /* array of {tokens, text, finish, logprobs} */
    int cached_tokens;
    int prompt_tokens;
    int finished;
    int n;
} req_state;

static void on_output(void *user, const engine_output *o) {
    req_state *st = user;
    json_t *s = json_array_get(st->samples, (size_t)o->index);
    json_t *toks = json_object_get(s, "tokens");
    for (int i = 0; i < o->n_new_tokens; i++) json_array_append_new(toks, json_integer(o->new_tokens[i]));
    if (o->logprobs)
        for (int i = 0; i < o->n_new_tokens; i++)
            json_array_append_new(json_object_get(s, "logprobs"), json_real(o->logprobs[i].logprob));
    const char *old = json_string_value(json_object_get(s, "text"));
    size_t ol = strlen(old);
    char *cat = malloc(ol + o->text_len + 1);
    memcpy(cat, old, ol);
    memcpy(cat + ol, o->text, o->text_len);
    cat[ol + o->text_len] = 0;
    json_object_set_new(s, "text", json_string(cat));
    free(cat);
    st->cached_tokens = o->n_cached_tokens;
    st->prompt_tokens = o->n_prompt_tokens;
    json_object_set_new(s, "evicted", json_integer(o->n_evicted_tokens));
    if (o->finished) {
        json_object_set_new(s, "finish", json_string(finish_reason_name(o->reason)));
        st->finished++;
    }
}

static int geti(json_t *o, const char *k, int def) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

static double getf(json_t *o, const char *k, double def) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : def;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: engine_harness MODEL.gguf < scenario.json\n");
        return 2;
    }
    json_error_t jerr;
    json_t *sc = json_loadf(stdin, 0, &jerr);
    if (!sc) {
        fprintf(stderr, "bad scenario JSON: %s\n", jerr.text);
        return 2;
    }
    model *m = model_load(argv[1]);
    if (!m) {
        fprintf(stderr, "%s\n", err_get());
        return 1;
    }
    json_t *cfgj = json_object_get(sc, "config");
    engine_config cfg = engine_config_defaults();
    cfg.max_num_seqs = geti(cfgj, "max_num_seqs", cfg.max_num_seqs);
    cfg.max_num_batched_tokens = geti(cfgj, "max_num_batched_tokens", cfg.max_num_batched_tokens);
    cfg.block_size = geti(cfgj, "block_size", cfg.block_size);
    cfg.kv_cache_blocks = geti(cfgj, "kv_cache_blocks", 0);
    cfg.max_model_len = geti(cfgj, "max_model_len", cfg.max_model_len);
    cfg.n_threads = geti(cfgj, "threads", 2);
    cfg.prefix_caching = json_is_false(json_object_get(cfgj, "prefix_caching")) ? false : true;
    cfg.kv_type = geti(cfgj, "kv_f32", 0) ? KV_F32 : KV_F16;
    const char *kv_dtype_arg = json_string_value(json_object_get(cfgj, "kv_dtype"));
    if (kv_dtype_arg && kv_dtype_parse(kv_dtype_arg, &cfg.kv_type)) {
        fprintf(stderr, "kv_dtype: %s\n", err_get());
        return 1;
    }
    json_t *specj = json_object_get(cfgj, "speculative_config");
    if (specj) {
        char *text = json_dumps(specj, 0);
        int bad = spec_config_parse_json(text, &cfg.spec);
        free(text);
        if (bad) {
            fprintf(stderr, "speculative_config: %s\n", err_get());
            return 1;
        }
    }
    engine *e = engine_create(m, &cfg);
    if (!e) {
        fprintf(stderr, "%s\n", err_get());
        return 1;
    }
    json_t *reqs = json_object_get(sc, "requests");
    const int n_req = (int)json_array_size(reqs);
    req_state *st = calloc((size_t)n_req, sizeof *st);
    uint64_t *ids = calloc((size_t)n_req, sizeof *ids);
    int submitted = 0, step = 0, rc = 0;
    json_t *blocks_per_step = json_array();
    for (;; step++) {
        for (int i = 0; i < n_req; i++) {
            json_t *r = json_array_get(reqs, (size_t)i);
            if (geti(r, "arrive", 0) == step) {
                json_t *pj = json_object_get(r, "prompt");
                int np = (int)json_array_size(pj);
                int32_t *prompt = malloc((size_t)(np ? np : 1) * sizeof *prompt);
                for (int k = 0; k < np; k++) prompt[k] = (int32_t)json_integer_value(json_array_get(pj, (size_t)k));
                request_params p = request_params_defaults();
                p.max_tokens = geti(r, "max_tokens", 16);
                p.n = geti(r, "n", 1);
                p.ignore_eos = json_is_true(json_object_get(r, "ignore_eos"));
                p.sampling.temperature = (float)getf(r, "temperature", 0.0);
                p.sampling.top_p = (float)getf(r, "top_p", 1.0);
                p.sampling.top_k = geti(r, "top_k", 0);
                p.sampling.repetition_penalty = (float)getf(r, "repetition_penalty", 1.0);
                p.sampling.frequency_penalty = (float)getf(r, "frequency_penalty", 0.0);
                p.min_tokens = geti(r, "min_tokens", 0);
                p.sampling.seed = (uint64_t)geti(r, "seed", 0);
                p.logprobs = geti(r, "logprobs", -1);
                p.beam_width = geti(r, "beam_width", 0);
                p.length_penalty = (float)getf(r, "length_penalty", 1.0);
                const char *policy = json_string_value(json_object_get(r, "kv_eviction"));
                if (policy && kv_evict_parse(policy, &p.evict.policy)) {
                    fprintf(stderr, "kv_eviction: unknown policy '%s'\n", policy);
                    return 1;
                }
                p.evict.budget = geti(r, "kv_budget", 0);
                p.evict.sink = geti(r, "kv_sink_tokens", p.evict.sink);
                json_t *stops = json_object_get(r, "stop");
                const char *stop_strs[8];
                p.n_stop = (int)json_array_size(stops);
                if (p.n_stop > 8) p.n_stop = 8;
                for (int k = 0; k < p.n_stop; k++) stop_strs[k] = json_string_value(json_array_get(stops, (size_t)k));
                p.stop = stop_strs;
                st[i].n = p.n;
                st[i].samples = json_array();
                for (int k = 0; k < p.n; k++)
                    json_array_append_new(st[i].samples, json_pack("{s:[],s:s,s:n,s:[]}", "tokens", "text", "",
                                                                   "finish", "logprobs"));
                if (engine_submit(e, prompt, np, &p, on_output, &st[i], &ids[i])) {
                    for (int k = 0; k < p.n; k++)
                        json_object_set_new(json_array_get(st[i].samples, (size_t)k), "finish",
                                            json_string("rejected"));
                    json_object_set_new(json_array_get(st[i].samples, 0), "error", json_string(err_get()));
                    st[i].finished = p.n;
                }
                submitted++;
                free(prompt);
            }
            if (geti(r, "abort", -1) == step && ids[i]) engine_abort(e, ids[i]);
        }
        int left = engine_step(e);
        engine_stats now;
        engine_get_stats(e, &now);
        json_array_append_new(blocks_per_step, json_integer(now.kv_blocks_used));
        if (submitted == n_req && left == 0) break;
        if (step > 1000000) {
            fprintf(stderr, "scenario did not finish\n");
            rc = 1;
            break;
        }
    }
    engine_stats stats;
    engine_get_stats(e, &stats);
    json_t *out = json_object();
    json_t *ra = json_array();
    for (int i = 0; i < n_req; i++)
        json_array_append_new(ra, json_pack("{s:o,s:i,s:i}", "samples", st[i].samples, "cached_tokens",
                                            st[i].cached_tokens, "prompt_tokens", st[i].prompt_tokens));
    json_object_set_new(out, "requests", ra);
    json_object_set_new(out, "steps", json_integer(step + 1));
    json_object_set_new(out, "blocks_in_use", json_integer(stats.kv_blocks_used));
    json_object_set_new(out, "blocks_total", json_integer(stats.kv_blocks_total));
    json_object_set_new(out, "blocks_per_step", blocks_per_step);
    json_object_set_new(out, "kv_evictions", json_integer((json_int_t)stats.kv_evictions));
    json_object_set_new(out, "kv_evicted_tokens", json_integer((json_int_t)stats.kv_evicted_tokens));
    json_object_set_new(out, "kv_dtype", json_string(kv_dtype_name(engine_get_config(e)->kv_type)));
    json_object_set_new(out, "kv_capacity_tokens", json_integer(engine_kv_capacity_tokens(e)));
    json_object_set_new(out, "preemptions", json_integer((json_int_t)stats.preemptions));
    json_object_set_new(out, "prefix_hits", json_integer((json_int_t)stats.prefix_hits));
    json_object_set_new(out, "prefix_queries", json_integer((json_int_t)stats.prefix_queries));
    json_t *per_pos = json_array();
    for (int i = 0; i < SPEC_MAX_TOKENS; i++) json_array_append_new(per_pos, json_integer((json_int_t)stats.spec_accepted_per_pos[i]));
    json_t *drafted_per_pos = json_array();
    for (int i = 0; i < SPEC_MAX_TOKENS; i++)
        json_array_append_new(drafted_per_pos, json_integer((json_int_t)stats.spec_drafted_per_pos[i]));
    json_object_set_new(out, "spec", json_pack("{s:I,s:I,s:I,s:o,s:o,s:I,s:I,s:I}", "drafts",
                                               (json_int_t)stats.spec_drafts, "draft_tokens",
                                               (json_int_t)stats.spec_draft_tokens, "accepted_tokens",
                                               (json_int_t)stats.spec_accepted_tokens, "accepted_per_pos", per_pos,
                                               "drafted_per_pos", drafted_per_pos,
                                               "paths_moved", (json_int_t)stats.spec_paths_moved,
                                               "lookup_tokens", (json_int_t)stats.spec_lookup_tokens,
                                               "lookup_accepted", (json_int_t)stats.spec_lookup_accepted));
    json_dumpf(out, stdout, JSON_COMPACT);
    printf("\n");
    json_decref(out);
    json_decref(sc);
    free(st);
    free(ids);
    engine_free(e);
    model_free(m);
    return rc;
}
