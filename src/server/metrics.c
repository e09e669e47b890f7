/* See metrics.h. */
#include "server/metrics.h"

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
    const char *model;
} out;

static void head(out *o, const char *name, const char *type, const char *help) {
    buf_printf(o->b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void labels(out *o, const char *extra_key, const char *extra_val) {
    buf_puts(o->b, "{model_name=\"");
    label_value(o->b, o->model);
    buf_puts(o->b, "\"");
    if (extra_key) {
        buf_printf(o->b, ",%s=\"", extra_key);
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

static void gauge(out *o, const char *name, const char *help, double v) {
    head(o, name, "gauge", help);
    sample(o, name, NULL, NULL, v);
}

static void counter(out *o, const char *name, const char *help, uint64_t v) {
    head(o, name, "counter", help);
    sample(o, name, NULL, NULL, (double)v);
}

static void histo(out *o, const char *name, const char *help, const histogram *h) {
    char nm[128], le[32];
    head(o, name, "histogram", help);
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

void metrics_render(buf *b, const metrics_input *in) {
    out o = {.b = b, .model = in->model_name ? in->model_name : ""};
    const engine_stats *s = &in->stats;
    gauge(&o, "cllm:server_ready", "1 when the model is loaded and requests are served.", in->ready ? 1 : 0);
    gauge(&o, "vllm:num_requests_running", "Number of sequences running in the engine.", s->n_running);
    gauge(&o, "vllm:num_requests_waiting", "Number of sequences waiting to be scheduled.", s->n_waiting);
    gauge(&o, "vllm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1).",
          s->kv_blocks_total > 0 ? (double)s->kv_blocks_used / s->kv_blocks_total : 0.0);
    gauge(&o, "cllm:kv_cache_blocks_total", "KV cache blocks in the pool.", s->kv_blocks_total);
    gauge(&o, "cllm:kv_cache_blocks_used", "KV cache blocks in use.", s->kv_blocks_used);
    gauge(&o, "cllm:kv_cache_tokens_used", "KV cache token slots holding data.", s->kv_tokens_used);
    counter(&o, "vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            s->prefix_queries);
    counter(&o, "vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", s->prefix_hits);
    counter(&o, "vllm:num_preemptions_total", "Sequences preempted (to be recomputed later).", s->preemptions);
    counter(&o, "cllm:kv_evictions_total", "KV cache compactions by an eviction policy (--kv-eviction).",
            s->kv_evictions);
    counter(&o, "cllm:kv_evicted_tokens_total", "Tokens evicted from sequences' KV caches.", s->kv_evicted_tokens);
    counter(&o, "vllm:prompt_tokens_total", "Prompt tokens scheduled.", s->prompt_tokens);
    counter(&o, "vllm:generation_tokens_total", "Tokens generated.", s->generation_tokens);
    counter(&o, "vllm:spec_decode_num_drafts_total", "Speculative verifications (one per sequence and step).",
            s->spec_drafts);
    counter(&o, "vllm:spec_decode_num_draft_tokens_total", "Speculative draft tokens verified.", s->spec_draft_tokens);
    counter(&o, "vllm:spec_decode_num_accepted_tokens_total", "Speculative draft tokens accepted.",
            s->spec_accepted_tokens);
    head(&o, "vllm:spec_decode_num_accepted_tokens_per_pos", "counter",
         "Speculative draft tokens accepted, by position in the draft (0 = first).");
    for (int i = 0; i < s->spec_k && i < SPEC_MAX_TOKENS; i++) {
        char pos[16];
        snprintf(pos, sizeof pos, "%d", i);
        sample(&o, "vllm:spec_decode_num_accepted_tokens_per_pos", "position", pos,
               (double)s->spec_accepted_per_pos[i]);
    }

    head(&o, "vllm:request_success_total", "counter", "Finished sequences by finish reason.");
    static const struct {
        finish_reason r;
        const char *name;
    } reasons[] = {{FINISH_STOP, "stop"}, {FINISH_LENGTH, "length"}, {FINISH_ABORT, "abort"}, {FINISH_ERROR, "error"}};
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
        sample(&o, "vllm:request_success_total", "finished_reason", reasons[i].name,
               (double)in->finished[reasons[i].r]);

    head(&o, "cllm:http_responses_total", "counter", "HTTP responses by status class.");
    static const char *const classes[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int c = 2; c <= 5; c++) sample(&o, "cllm:http_responses_total", "code", classes[c], (double)in->http[c]);

    if (in->has_response_cache) {
        const response_cache_stats *rc = &in->response_cache;
        counter(&o, "cllm:response_cache_hits_total", "Cacheable requests answered from the response cache.",
                rc->hits);
        counter(&o, "cllm:response_cache_misses_total", "Cacheable requests not in the response cache.", rc->misses);
        gauge(&o, "cllm:response_cache_entries", "Responses held in the response cache.", (double)rc->entries);
    }
    if (in->has_embedder) {
        const embedder_stats *es = &in->embedder;
        counter(&o, "cllm:embedding_inputs_total", "Inputs embedded by the model (cache hits not counted).", es->inputs);
        counter(&o, "cllm:embedding_tokens_total", "Tokens of the inputs embedded by the model.", es->tokens);
        counter(&o, "cllm:embedding_forward_passes_total", "Forward passes of the embedding model.",
                es->forward_passes);
    }
    if (in->has_embed_cache) {
        const embed_cache_stats *ec = &in->embed_cache;
        counter(&o, "cllm:embedding_cache_hits_total", "Text inputs answered from the embedding cache.", ec->hits);
        counter(&o, "cllm:embedding_cache_misses_total", "Text inputs not in the embedding cache.", ec->misses);
        gauge(&o, "cllm:embedding_cache_entries", "Embeddings held in the embedding cache.", (double)ec->entries);
    }

    histo(&o, "vllm:time_to_first_token_seconds", "Time from arrival to the first generated token.", &s->ttft);
    histo(&o, "vllm:time_per_output_token_seconds", "Mean time per output token after the first.", &s->tpot);
    histo(&o, "vllm:e2e_request_latency_seconds", "Time from arrival to the end of the request.", &s->e2e);
    histo(&o, "vllm:request_queue_time_seconds", "Time from arrival to first being scheduled.", &s->queue);
}
