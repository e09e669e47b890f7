/* See metrics.h. */
#include "server/metrics.h"

#include <stddef.h>
#include <stdio.h>

/* Label values escape backslash, double quote and newline. */
static void label_value(buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '\\') buf_puts(b, "\\\\");
        else if (*s == '"') buf_puts(b, "\\\"");
        else if (*s == '\n') buf_puts(b, "\\n");
        else buf_append(b, s, 1);
    }
}

typedef struct {
    buf *b;
    const char *model; /* the model_name label; NULL: a server-wide sample */
} out;

static void head(out *o, const char *name, const char *type, const char *help) {
    buf_printf(o->b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void labels(out *o, const char *extra_key, const char *extra_val) {
    if (!o->model && !extra_key) return;
    buf_puts(o->b, "{");
    if (o->model) {
        buf_puts(o->b, "model_name=\"");
        label_value(o->b, o->model);
        buf_puts(o->b, extra_key ? "\"," : "\"");
    }
    if (extra_key) {
        buf_printf(o->b, "%s=\"", extra_key);
        label_value(o->b, extra_val);
        buf_puts(o->b, "\"");
    }
    buf_puts(o->b, "}");
}

static void sample(out *o, const char *name, const char *ek, const char *ev, double v) {
    buf_puts(o->b, name);
    labels(o, ek, ev);
    buf_printf(o->b, " %.17g\n", v);
}

static void histo_samples(out *o, const char *name, const histogram *h) {
    char nm[128], le[32];
    snprintf(nm, sizeof nm, "%s_bucket", name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        snprintf(le, sizeof le, "%g", h->bounds[i]);
        sample(o, nm, "le", le, (double)cum);
    }
    cum += h->counts[h->n_bounds];
    sample(o, nm, "le", "+Inf", (double)cum);
    snprintf(nm, sizeof nm, "%s_sum", name);
    sample(o, nm, NULL, NULL, h->sum);
    snprintf(nm, sizeof nm, "%s_count", name);
    sample(o, nm, NULL, NULL, (double)h->count);
}

/* A metric read from each model's engine_stats: an int or a uint64_t field. */
typedef struct {
    const char *name, *type, *help;
    size_t offset;
    bool is_u64;
} stat_row;

#define INT_ROW(n, t, h, f) {n, t, h, offsetof(engine_stats, f), false}
#define U64_ROW(n, h, f) {n, "counter", h, offsetof(engine_stats, f), true}
static const stat_row STAT_ROWS[] = {
    INT_ROW("vllm:num_requests_running", "gauge", "Number of sequences running in the engine.", n_running),
    INT_ROW("vllm:num_requests_waiting", "gauge", "Number of sequences waiting to be scheduled.", n_waiting),
    INT_ROW("cllm:kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.", kv_blocks_total),
    INT_ROW("cllm:kv_cache_blocks_used", "gauge", "KV cache blocks in use.", kv_blocks_used),
    INT_ROW("cllm:kv_cache_tokens_used", "gauge", "KV cache token slots holding data.", kv_tokens_used),
    U64_ROW("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", prefix_queries),
    U64_ROW("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", prefix_hits),
    U64_ROW("vllm:num_preemptions_total", "Sequences preempted (to be recomputed later).", preemptions),
    U64_ROW("cllm:kv_evictions_total", "KV cache compactions by an eviction policy (--kv-eviction).", kv_evictions),
    U64_ROW("cllm:kv_evicted_tokens_total", "Tokens evicted from sequences' KV caches.", kv_evicted_tokens),
    U64_ROW("vllm:prompt_tokens_total", "Prompt tokens scheduled.", prompt_tokens),
    U64_ROW("vllm:generation_tokens_total", "Tokens generated.", generation_tokens),
    U64_ROW("vllm:spec_decode_num_drafts_total", "Speculative verifications (one per sequence and step).",
            spec_drafts),
    U64_ROW("vllm:spec_decode_num_draft_tokens_total", "Speculative draft tokens verified.", spec_draft_tokens),
    U64_ROW("vllm:spec_decode_num_accepted_tokens_total", "Speculative draft tokens accepted.",
            spec_accepted_tokens),
    U64_ROW("cllm:moe_layer_steps_total", "Mixture-of-experts layers run (one per layer and engine step).",
            moe_layer_steps),
    U64_ROW("cllm:moe_experts_read_total",
            "Experts those layers read: the distinct experts the step's tokens chose (divide by the layer steps).",
            moe_experts_read),
};
#undef INT_ROW
#undef U64_ROW

static double stat_value(const engine_stats *s, const stat_row *row) {
    const char *p = (const char *)s + row->offset;
    return row->is_u64 ? (double)*(const uint64_t *)p : (double)*(const int *)p;
}

static const struct {
    const char *name, *help;
    size_t offset;
} HISTOGRAMS[] = {
    {"vllm:time_to_first_token_seconds", "Time from arrival to the first generated token.",
     offsetof(engine_stats, ttft)},
    {"vllm:time_per_output_token_seconds", "Mean time per output token after the first.",
     offsetof(engine_stats, tpot)},
    {"vllm:e2e_request_latency_seconds", "Time from arrival to the end of the request.", offsetof(engine_stats, e2e)},
    {"vllm:request_queue_time_seconds", "Time from arrival to first being scheduled.", offsetof(engine_stats, queue)},
};

static void model_metrics(out *o, const metrics_input *in) {
    head(o, "cllm:server_ready", "gauge", "1 when the model is loaded and requests are served.");
    for (int m = 0; m < in->n_models; m++) {
        o->model = in->models[m].name;
        sample(o, "cllm:server_ready", NULL, NULL, in->models[m].ready ? 1 : 0);
    }
    for (size_t r = 0; r < sizeof STAT_ROWS / sizeof *STAT_ROWS; r++) {
        head(o, STAT_ROWS[r].name, STAT_ROWS[r].type, STAT_ROWS[r].help);
        for (int m = 0; m < in->n_models; m++) {
            o->model = in->models[m].name;
            sample(o, STAT_ROWS[r].name, NULL, NULL, stat_value(&in->models[m].stats, &STAT_ROWS[r]));
        }
    }
    head(o, "vllm:kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (0 to 1).");
    for (int m = 0; m < in->n_models; m++) {
        const engine_stats *s = &in->models[m].stats;
        o->model = in->models[m].name;
        sample(o, "vllm:kv_cache_usage_perc", NULL, NULL,
               s->kv_blocks_total > 0 ? (double)s->kv_blocks_used / s->kv_blocks_total : 0.0);
    }
    head(o, "vllm:spec_decode_num_accepted_tokens_per_pos", "counter",
         "Speculative draft tokens accepted, by position in the draft (0 = first).");
    for (int m = 0; m < in->n_models; m++) {
        const engine_stats *s = &in->models[m].stats;
        o->model = in->models[m].name;
        for (int i = 0; i < s->spec_k && i < SPEC_MAX_TOKENS; i++) {
            char pos[16];
            snprintf(pos, sizeof pos, "%d", i);
            sample(o, "vllm:spec_decode_num_accepted_tokens_per_pos", "position", pos,
                   (double)s->spec_accepted_per_pos[i]);
        }
    }
    head(o, "vllm:request_success_total", "counter", "Finished sequences by finish reason.");
    static const struct {
        finish_reason r;
        const char *name;
    } reasons[] = {{FINISH_STOP, "stop"}, {FINISH_LENGTH, "length"}, {FINISH_ABORT, "abort"}, {FINISH_ERROR, "error"}};
    for (int m = 0; m < in->n_models; m++) {
        o->model = in->models[m].name;
        for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
            sample(o, "vllm:request_success_total", "finished_reason", reasons[i].name,
                   (double)in->models[m].finished[reasons[i].r]);
    }
    if (in->has_response_cache) {
        head(o, "cllm:response_cache_hits_total", "counter", "Cacheable requests answered from the response cache.");
        for (int m = 0; m < in->n_models; m++) {
            o->model = in->models[m].name;
            sample(o, "cllm:response_cache_hits_total", NULL, NULL, (double)in->models[m].cache_hits);
        }
        head(o, "cllm:response_cache_misses_total", "counter", "Cacheable requests not in the response cache.");
        for (int m = 0; m < in->n_models; m++) {
            o->model = in->models[m].name;
            sample(o, "cllm:response_cache_misses_total", NULL, NULL, (double)in->models[m].cache_misses);
        }
    }
    for (size_t h = 0; h < sizeof HISTOGRAMS / sizeof *HISTOGRAMS; h++) {
        head(o, HISTOGRAMS[h].name, "histogram", HISTOGRAMS[h].help);
        for (int m = 0; m < in->n_models; m++) {
            o->model = in->models[m].name;
            histo_samples(o, HISTOGRAMS[h].name,
                          (const histogram *)((const char *)&in->models[m].stats + HISTOGRAMS[h].offset));
        }
    }
}

/* A metric with one sample (of o->model, or server-wide). */
static void single(out *o, const char *type, const char *name, const char *help, double v) {
    head(o, name, type, help);
    sample(o, name, NULL, NULL, v);
}

static double emb_inputs(const metrics_model *mm) { return (double)mm->embedder.inputs; }
static double emb_tokens(const metrics_model *mm) { return (double)mm->embedder.tokens; }
static double emb_passes(const metrics_model *mm) { return (double)mm->embedder.forward_passes; }
static double emb_cache_hits(const metrics_model *mm) { return (double)mm->embed_cache.hits; }
static double emb_cache_misses(const metrics_model *mm) { return (double)mm->embed_cache.misses; }
static double emb_cache_entries(const metrics_model *mm) { return (double)mm->embed_cache.entries; }

static const struct {
    bool of_cache; /* the embedding cache's, else the embedder's */
    const char *type, *name, *help;
    double (*value)(const metrics_model *mm);
} EMBEDDING_ROWS[] = {
    {false, "counter", "cllm:embedding_inputs_total", "Inputs embedded by the model (cache hits not counted).",
     emb_inputs},
    {false, "counter", "cllm:embedding_tokens_total", "Tokens of the inputs embedded by the model.", emb_tokens},
    {false, "counter", "cllm:embedding_forward_passes_total", "Forward passes of the embedding model.", emb_passes},
    {true, "counter", "cllm:embedding_cache_hits_total", "Text inputs answered from the embedding cache.",
     emb_cache_hits},
    {true, "counter", "cllm:embedding_cache_misses_total", "Text inputs not in the embedding cache.",
     emb_cache_misses},
    {true, "gauge", "cllm:embedding_cache_entries", "Embeddings held in the embedding cache.", emb_cache_entries},
};

/* One sample per embedding model that has the row's stats; a row no model
 * has is left out. */
static void embedding_metrics(out *o, const metrics_input *in) {
    for (size_t r = 0; r < sizeof EMBEDDING_ROWS / sizeof *EMBEDDING_ROWS; r++) {
        bool headed = false;
        for (int m = 0; m < in->n_models; m++) {
            const metrics_model *mm = &in->models[m];
            if (!(EMBEDDING_ROWS[r].of_cache ? mm->has_embed_cache : mm->has_embedder)) continue;
            if (!headed) head(o, EMBEDDING_ROWS[r].name, EMBEDDING_ROWS[r].type, EMBEDDING_ROWS[r].help);
            headed = true;
            o->model = mm->name;
            sample(o, EMBEDDING_ROWS[r].name, NULL, NULL, EMBEDDING_ROWS[r].value(mm));
        }
    }
}

void metrics_render(buf *b, const metrics_input *in) {
    out o = {.b = b};
    model_metrics(&o, in);
    o.model = NULL; /* the rest belongs to the whole server */
    head(&o, "cllm:http_responses_total", "counter", "HTTP responses by status class.");
    static const char *const classes[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int c = 2; c <= 5; c++) sample(&o, "cllm:http_responses_total", "code", classes[c], (double)in->http[c]);
    if (in->has_response_cache) {
        single(&o, "gauge", "cllm:response_cache_entries", "Responses held in the response cache.",
               (double)in->response_cache_entries);
    }
    single(&o, "counter", "cllm:constraint_cache_hits_total",
           "Structured-output constraints found already compiled (a schema, grammar or regex seen before).",
           (double)in->constraint_cache_hits);
    single(&o, "counter", "cllm:constraint_cache_misses_total", "Structured-output constraints compiled anew.",
           (double)in->constraint_cache_misses);
    embedding_metrics(&o, in);
}
