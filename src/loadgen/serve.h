/* `cllm bench serve`: a load generator for OpenAI-compatible servers, in the
 * manner of vLLM's benchmark_serving. The pieces, one file each:
 *
 *   bench/serve_sse.c    incremental Server-Sent-Events parser, and the
 *                        reading of one streamed chunk (text, usage, errors)
 *   bench/serve_stats.c  percentiles, the summary of a run, its report and
 *                        its JSON result
 *   bench/serve_data.c   seeded random numbers, Poisson arrival times, and the
 *                        datasets (random, prefix-repetition, jsonl)
 *   bench/serve_http.c   small blocking JSON calls (tokenize, models) and the
 *                        benchmark loop on libcurl's multi interface
 *   bench/serve_plot.c   PNG charts through gnuplot (`--plot`, `cllm bench plot`)
 *   cli/bench_serve.c    the command: options, then the pieces in order
 *
 * The parts that hold no I/O (SSE, stats, arrivals) are unit-tested in
 * tests/unit/test_bench_serve.c, which compiles their .c files directly. */
#ifndef CLLM_LOADGEN_SERVE_H
#define CLLM_LOADGEN_SERVE_H

#include "util/buf.h"
#include "util/rng.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- Server-Sent Events ---- */

/* Called once per complete event with its data lines joined by '\n'. */
typedef void (*sse_event_fn)(void *user, const char *data, size_t len);

typedef struct {
    buf line; /* the line being read */
    buf data; /* the event being read: its data lines so far */
    bool has_data;
    bool last_cr; /* the previous byte was '\r': a following '\n' belongs to it */
    sse_event_fn on_event;
    void *user;
} sse_parser;

void sse_init(sse_parser *p, sse_event_fn fn, void *user);
/* Feeds bytes as they arrive: split anywhere, several events per call. */
void sse_feed(sse_parser *p, const char *bytes, size_t n);
/* End of stream: an event whose blank line never came is delivered too. */
void sse_finish(sse_parser *p);
void sse_free(sse_parser *p);
/* Whether an allocation failed (the stream cannot be trusted after that). */
bool sse_oom(const sse_parser *p);

/* What one request saw, filled by bench_chunk_apply as events arrive. */
typedef struct {
    double t_start;        /* seconds since the benchmark began */
    double t_first, t_last; /* first and latest chunk with generated text (0: none) */
    double *itl;           /* gaps between chunks with text, seconds */
    int n_itl;
    size_t itl_cap;
    int n_text_chunks;
    long prompt_tokens, completion_tokens; /* from usage; -1 when not reported */
    bool done;             /* `data: [DONE]` arrived */
    bool finished;         /* a finish_reason arrived */
    double t_end;          /* the stream closed */
    long http_status;
    char *error;           /* the first error (server-sent, HTTP or transport) */
} bench_stream;

void bench_stream_init(bench_stream *s);
void bench_stream_free(bench_stream *s);
void bench_stream_fail(bench_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One SSE event's data received at time t (seconds since the benchmark
 * began): `[DONE]`, a completion or chat chunk, a usage chunk, or an error
 * object. Anything it cannot read is recorded as the request's error. */
void bench_chunk_apply(bench_stream *s, const char *data, size_t len, double t);
/* Whether the request counts as successful: no error, text arrived, and the
 * stream ended properly ([DONE] or a finish_reason). */
bool bench_stream_ok(const bench_stream *s);

/* ---- statistics ---- */

typedef struct {
    double mean, median, std, p90, p99;
} bench_dist;

/* np.percentile's linear interpolation, p in [0, 100]; v is left unchanged. */
double bench_percentile(const double *v, int n, double p);
bench_dist bench_distribution(const double *v, int n);

/* One finished request, as the report sees it. */
typedef struct {
    bool ok;
    const char *error;
    double start, ttft, e2el;     /* seconds */
    const double *itl;
    int n_itl;
    long input_tokens, output_tokens;
} bench_req;

typedef struct {
    int completed, failed;
    double duration;
    long total_input, total_output;
    double request_throughput, output_throughput, total_throughput;
    double max_output_tokens_per_s; /* the busiest one-second window */
    int max_concurrent;
    bench_dist ttft, tpot, itl, e2el; /* milliseconds */
} bench_summary;

/* reqs: every request of the run; duration: seconds from the first send to
 * the last answer. */
int bench_summarize(const bench_req *reqs, int n, double duration, bench_summary *out);
void bench_print_report(FILE *f, const bench_summary *s, const char *title);
/* The summary in vLLM's field names, plus per-request arrays. */
json_t *bench_result_json(const bench_summary *s, const bench_req *reqs, int n);

/* ---- random numbers and arrivals ---- */

/* The engine's seeded generator (xoshiro256**): rng_seed, rng_next, rng_uniform. */
typedef rng_state bench_rng;

/* Uniform integer in [lo, hi]. */
long bench_rng_range(bench_rng *r, long lo, long hi);
/* Arrival times (seconds from start) of n requests: a Poisson process of
 * `rate` requests per second (exponential gaps), or all at 0 when rate is
 * infinite or <= 0. */
void bench_arrivals(bench_rng *r, double rate, int n, double *out);
/* A length drawn uniformly from [len*(1-ratio), len*(1+ratio)], at least 1
 * (vLLM's --random-range-ratio). */
long bench_jitter_len(bench_rng *r, long len, double ratio);

/* ---- the server's tokenizer, over HTTP ---- */

typedef enum { TOK_NONE, TOK_VLLM, TOK_LLAMACPP } bench_tok_style;

/* /tokenize and /detokenize of the server under test: vLLM's and cllm's
 * ({"prompt"} -> {"tokens"}, {"tokens"} -> {"prompt"}) or llama.cpp's
 * ({"content"} -> {"tokens"}, {"tokens"} -> {"content"}). */
typedef struct {
    void *curl;
    char *base_url;
    const char *api_key, *model;
    bench_tok_style style;
    long n_vocab;   /* 0: unknown */
    int n_special;  /* tokens the server adds to a completion prompt (BOS) */
} bench_tok;

/* Finds out which API the server speaks (style TOK_NONE when neither) and
 * the vocabulary size: vocab_hint when > 0, else /v1/models' meta.n_vocab
 * (llama.cpp), else probed through /detokenize. */
void bench_tok_open(bench_tok *t, const char *base_url, const char *api_key, const char *model, long vocab_hint);
void bench_tok_close(bench_tok *t);
/* Returns the number of ids (in *ids, malloc'd) or -1. */
int bench_tok_encode(bench_tok *t, const char *text, bool add_special, int32_t **ids);
/* Returns malloc'd text or NULL. */
char *bench_tok_decode(bench_tok *t, const int32_t *ids, int n);

/* GET or POST (body != NULL) JSON; returns the parsed answer of a 2xx reply,
 * else NULL with *status set (0: no answer). */
json_t *bench_http_json(void *curl, const char *url, const char *api_key, const json_t *body, long *status);
/* The first model id of GET base/v1/models (malloc'd), or NULL. */
char *bench_first_model(const char *base_url, const char *api_key);

/* Speculative decoding counters of a vLLM-style /metrics (summed over label
 * sets): verifications, draft tokens, accepted tokens. */
typedef struct {
    double drafts, draft_tokens, accepted_tokens;
} bench_spec_counters;

/* Reads base/metrics; -1 when it cannot be read or has no spec_decode
 * counters (a server without speculative decoding). */
int bench_read_spec_counters(const char *base_url, const char *api_key, bench_spec_counters *out);
/* Sums the samples of counter `name` in Prometheus text (0 when absent;
 * *found says whether any sample was there). */
double bench_metric_sum(const char *text, const char *name, bool *found);

/* ---- datasets ---- */

typedef struct {
    char *prompt;     /* completions: the prompt; chat: the user message (when messages is NULL) */
    json_t *messages; /* chat conversations from a jsonl file */
    long input_len;   /* the prompt's length in tokens as far as known here (-1: unknown) */
    long output_len;  /* max_tokens */
} bench_item;

typedef struct {
    const char *name; /* random | prefix-repetition | jsonl */
    long num_prompts; /* 0 for jsonl: every line */
    long input_len, output_len, prefix_len, suffix_len, num_prefixes;
    double range_ratio;
    const char *path; /* jsonl */
    bool chat;        /* the prompts go to /v1/chat/completions: no BOS to subtract */
} bench_dataset_opts;

/* Builds the requests. tok may be TOK_NONE: prompts are then made of words
 * from a built-in list, one word per wanted token (the server's usage gives
 * the true count). Returns the number of items (in *items) or -1 with a
 * message on stderr. */
int bench_dataset_build(const bench_dataset_opts *o, bench_tok *tok, bench_rng *rng, bench_item **items);
void bench_items_free(bench_item *items, int n);
/* Writes items as jsonl that the jsonl dataset reads back. */
int bench_dataset_save(const char *path, const bench_item *items, int n);

/* ---- the run ---- */

typedef struct {
    const char *url; /* base_url + endpoint */
    const char *api_key, *model;
    bool chat;
    int max_concurrency; /* 0: no limit */
    double temperature;
    const json_t *extra_body; /* merged into every request (may be NULL) */
    long timeout_s;           /* per request; 0: none */
    bool progress;
} bench_run_opts;

/* Sends items[i] at arrivals[i] seconds (never more than max_concurrency at
 * once) and records each stream in streams[i] (initialized here). Returns the
 * time from the first send to the last answer in *duration; -1 only when
 * libcurl cannot start. */
int bench_run(const bench_run_opts *o, const bench_item *items, int n, const double *arrivals, bench_stream *streams,
              double *duration);

/* ---- charts ---- */

/* Latency distributions of one result (a bench_result_json object) as PNGs
 * in dir; with several results also throughput and latency against
 * concurrency. labels[i] names result i. Needs gnuplot on PATH. */
int bench_plot(const char *dir, json_t *const *results, int n);

#endif
