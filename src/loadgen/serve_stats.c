/* The numbers of a serving benchmark, defined as vLLM's benchmark_serving
 * defines them so results compare across tools:
 *   TTFT  time from sending a request to its first chunk of generated text;
 *   TPOT  (E2E latency - TTFT) / (output tokens - 1), per request with more
 *         than one output token;
 *   ITL   every gap between consecutive chunks of text, over all requests;
 *   E2EL  time from sending a request to the end of its stream.
 * Token counts are the server's usage numbers. Distributions are summarized
 * by mean, median, standard deviation, P90 and P99 (np.percentile's linear
 * interpolation), in milliseconds. */
#include "loadgen/serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile_sorted(const double *v, int n, double p) {
    if (n <= 0) return 0;
    const double idx = p / 100.0 * (n - 1);
    const int lo = (int)floor(idx);
    if (lo + 1 >= n) return v[n - 1];
    return v[lo] + (idx - lo) * (v[lo + 1] - v[lo]);
}

double bench_percentile(const double *v, int n, double p) {
    if (n <= 0) return 0;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    const double r = percentile_sorted(s, n, p);
    free(s);
    return r;
}

bench_dist bench_distribution(const double *v, int n) {
    bench_dist d = {0};
    if (n <= 0) return d;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return (bench_dist){NAN, NAN, NAN, NAN, NAN};
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += s[i];
    d.mean = sum / n;
    double var = 0;
    for (int i = 0; i < n; i++) var += (s[i] - d.mean) * (s[i] - d.mean);
    d.std = sqrt(var / n); /* population, as np.std */
    d.median = percentile_sorted(s, n, 50);
    d.p90 = percentile_sorted(s, n, 90);
    d.p99 = percentile_sorted(s, n, 99);
    free(s);
    return d;
}

/* The most requests in flight at once: +1 at each start, -1 at each end;
 * at the same instant ends count first. */
typedef struct {
    double t;
    int d;
} edge;

static int cmp_edge(const void *a, const void *b) {
    const edge *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->d - y->d;
}

static int max_concurrent(const bench_req *reqs, int n) {
    edge *e = malloc((size_t)(2 * n + 1) * sizeof *e);
    if (!e) return 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (reqs[i].e2el <= 0) continue;
        e[m++] = (edge){reqs[i].start, +1};
        e[m++] = (edge){reqs[i].start + reqs[i].e2el, -1};
    }
    qsort(e, (size_t)m, sizeof *e, cmp_edge);
    int cur = 0, best = 0;
    for (int i = 0; i < m; i++) {
        cur += e[i].d;
        if (cur > best) best = cur;
    }
    free(e);
    return best;
}

/* Output tokens per one-second window, each request's tokens spread evenly
 * over its chunks of text (a chunk may carry several tokens). */
static double peak_output_rate(const bench_req *reqs, int n, double duration) {
    const int nb = (int)ceil(duration) + 1;
    double *bucket = calloc((size_t)nb, sizeof *bucket);
    if (!bucket) return 0;
    for (int i = 0; i < n; i++) {
        const bench_req *r = &reqs[i];
        if (!r->ok || r->output_tokens <= 0) continue;
        const double per_chunk = (double)r->output_tokens / (r->n_itl + 1);
        double t = r->start + r->ttft;
        for (int k = 0; k <= r->n_itl; k++) {
            if (k > 0) t += r->itl[k - 1];
            int b = (int)floor(t);
            if (b < 0) b = 0;
            if (b >= nb) b = nb - 1;
            bucket[b] += per_chunk;
        }
    }
    double best = 0;
    for (int b = 0; b < nb; b++)
        if (bucket[b] > best) best = bucket[b];
    free(bucket);
    return best;
}

int bench_summarize(const bench_req *reqs, int n, double duration, bench_summary *out) {
    memset(out, 0, sizeof *out);
    long n_itl = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i].ok) n_itl += reqs[i].n_itl;
    double *ttft = malloc((size_t)(n + 1) * sizeof *ttft), *tpot = malloc((size_t)(n + 1) * sizeof *tpot);
    double *e2el = malloc((size_t)(n + 1) * sizeof *e2el), *itl = malloc((size_t)(n_itl + 1) * sizeof *itl);
    if (!ttft || !tpot || !e2el || !itl) {
        free(ttft), free(tpot), free(e2el), free(itl);
        return -1;
    }
    int n_ok = 0, n_tpot = 0, k = 0;
    for (int i = 0; i < n; i++) {
        const bench_req *r = &reqs[i];
        if (!r->ok) {
            out->failed++;
            continue;
        }
        out->completed++;
        if (r->input_tokens > 0) out->total_input += r->input_tokens;
        if (r->output_tokens > 0) out->total_output += r->output_tokens;
        ttft[n_ok] = r->ttft * 1e3;
        e2el[n_ok] = r->e2el * 1e3;
        n_ok++;
        if (r->output_tokens > 1) tpot[n_tpot++] = (r->e2el - r->ttft) / (double)(r->output_tokens - 1) * 1e3;
        for (int j = 0; j < r->n_itl; j++) itl[k++] = r->itl[j] * 1e3;
    }
    out->duration = duration;
    if (duration > 0) {
        out->request_throughput = out->completed / duration;
        out->output_throughput = out->total_output / duration;
        out->total_throughput = (out->total_input + out->total_output) / duration;
    }
    out->ttft = bench_distribution(ttft, n_ok);
    out->tpot = bench_distribution(tpot, n_tpot);
    out->itl = bench_distribution(itl, k);
    out->e2el = bench_distribution(e2el, n_ok);
    out->max_concurrent = max_concurrent(reqs, n);
    out->max_output_tokens_per_s = peak_output_rate(reqs, n, duration);
    free(ttft), free(tpot), free(e2el), free(itl);
    return 0;
}

static void section(FILE *f, const char *title) {
    const int width = 50, len = (int)strlen(title);
    const int left = (width - len) / 2, right = width - len - left;
    fprintf(f, "%.*s%s%.*s\n", left, "--------------------------------------------------", title, right,
            "--------------------------------------------------");
}

static void dist_lines(FILE *f, const char *name, const bench_dist *d) {
    char label[64];
    snprintf(label, sizeof label, "Mean %s (ms):", name);
    fprintf(f, "%-40s %.2f\n", label, d->mean);
    snprintf(label, sizeof label, "Median %s (ms):", name);
    fprintf(f, "%-40s %.2f\n", label, d->median);
    snprintf(label, sizeof label, "P90 %s (ms):", name);
    fprintf(f, "%-40s %.2f\n", label, d->p90);
    snprintf(label, sizeof label, "P99 %s (ms):", name);
    fprintf(f, "%-40s %.2f\n", label, d->p99);
}

void bench_print_report(FILE *f, const bench_summary *s, const char *title) {
    fprintf(f, "%s\n", "============ Serving Benchmark Result ============");
    if (title && *title) fprintf(f, "%-40s %s\n", "Run:", title);
    fprintf(f, "%-40s %d\n", "Successful requests:", s->completed);
    fprintf(f, "%-40s %d\n", "Failed requests:", s->failed);
    fprintf(f, "%-40s %.2f\n", "Benchmark duration (s):", s->duration);
    fprintf(f, "%-40s %ld\n", "Total input tokens:", s->total_input);
    fprintf(f, "%-40s %ld\n", "Total generated tokens:", s->total_output);
    fprintf(f, "%-40s %.2f\n", "Request throughput (req/s):", s->request_throughput);
    fprintf(f, "%-40s %.2f\n", "Output token throughput (tok/s):", s->output_throughput);
    fprintf(f, "%-40s %.2f\n", "Peak output token throughput (tok/s):", s->max_output_tokens_per_s);
    fprintf(f, "%-40s %d\n", "Peak concurrent requests:", s->max_concurrent);
    fprintf(f, "%-40s %.2f\n", "Total Token throughput (tok/s):", s->total_throughput);
    section(f, "Time to First Token");
    dist_lines(f, "TTFT", &s->ttft);
    section(f, "Time per Output Token (excl. 1st token)");
    dist_lines(f, "TPOT", &s->tpot);
    section(f, "Inter-token Latency");
    dist_lines(f, "ITL", &s->itl);
    section(f, "End-to-end Latency");
    dist_lines(f, "E2EL", &s->e2el);
    fprintf(f, "%s\n", "==================================================");
}

static void set_dist(json_t *j, const char *name, const bench_dist *d) {
    static const char *const stat[] = {"mean", "median", "std", "p90", "p99"};
    const double val[] = {d->mean, d->median, d->std, d->p90, d->p99};
    for (int i = 0; i < 5; i++) {
        char key[48];
        snprintf(key, sizeof key, "%s_%s_ms", stat[i], name);
        json_object_set_new(j, key, json_real(val[i]));
    }
}

json_t *bench_result_json(const bench_summary *s, const bench_req *reqs, int n) {
    json_t *j = json_object();
    json_object_set_new(j, "duration", json_real(s->duration));
    json_object_set_new(j, "completed", json_integer(s->completed));
    json_object_set_new(j, "failed", json_integer(s->failed));
    json_object_set_new(j, "total_input_tokens", json_integer(s->total_input));
    json_object_set_new(j, "total_output_tokens", json_integer(s->total_output));
    json_object_set_new(j, "request_throughput", json_real(s->request_throughput));
    json_object_set_new(j, "output_throughput", json_real(s->output_throughput));
    json_object_set_new(j, "total_token_throughput", json_real(s->total_throughput));
    json_object_set_new(j, "max_output_tokens_per_s", json_real(s->max_output_tokens_per_s));
    json_object_set_new(j, "max_concurrent_requests", json_integer(s->max_concurrent));
    set_dist(j, "ttft", &s->ttft);
    set_dist(j, "tpot", &s->tpot);
    set_dist(j, "itl", &s->itl);
    set_dist(j, "e2el", &s->e2el);
    json_t *in = json_array(), *outl = json_array(), *ttfts = json_array(), *itls = json_array();
    json_t *e2els = json_array(), *starts = json_array(), *errors = json_array();
    for (int i = 0; i < n; i++) {
        const bench_req *r = &reqs[i];
        json_array_append_new(in, json_integer(r->input_tokens));
        json_array_append_new(outl, json_integer(r->ok ? r->output_tokens : 0));
        json_array_append_new(ttfts, json_real(r->ok ? r->ttft : 0));
        json_array_append_new(e2els, json_real(r->e2el));
        json_array_append_new(starts, json_real(r->start));
        json_t *gaps = json_array();
        for (int k = 0; r->ok && k < r->n_itl; k++) json_array_append_new(gaps, json_real(r->itl[k]));
        json_array_append_new(itls, gaps);
        json_array_append_new(errors, json_string(r->ok ? "" : (r->error ? r->error : "unknown error")));
    }
    json_object_set_new(j, "input_lens", in);
    json_object_set_new(j, "output_lens", outl);
    json_object_set_new(j, "ttfts", ttfts);
    json_object_set_new(j, "itls", itls);
    json_object_set_new(j, "e2els", e2els);
    json_object_set_new(j, "start_times", starts);
    json_object_set_new(j, "errors", errors);
    return j;
}
