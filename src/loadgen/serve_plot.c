/* Charts of serving results, drawn by gnuplot (Debian's gnuplot-nox, with
 * its pngcairo terminal). The data go to plain files in the output folder
 * next to the script that draws them (plot.gp), so a chart can be redrawn or
 * restyled by hand:
 *   latency.png     cumulative distributions of TTFT, TPOT, ITL and E2E
 *                   latency, one curve per result;
 *   throughput.png  (two or more results) output throughput, P99 TTFT and
 *                   median TPOT against concurrency, one line per label.
 * A result's label is its "label" field (--label), else its base URL; its
 * concurrency is max_concurrency, else the peak number of requests seen in
 * flight. */
#include "loadgen/serve.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const METRICS[] = {"ttft", "tpot", "itl", "e2el"};
static const char *const METRIC_TITLES[] = {"Time to first token", "Time per output token", "Inter-token latency",
                                            "End-to-end latency"};

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double num(const json_t *j, const char *key) {
    const json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *label_of(const json_t *r) {
    const json_t *l = json_object_get(r, "label");
    if (json_is_string(l) && json_string_length(l)) return json_string_value(l);
    l = json_object_get(r, "base_url");
    return json_is_string(l) ? json_string_value(l) : "run";
}

static double concurrency_of(const json_t *r) {
    const double c = num(r, "max_concurrency");
    return c > 0 ? c : num(r, "max_concurrent_requests");
}

/* Values of one metric of one result, in milliseconds, from the per-request arrays. */
static int metric_values(const json_t *r, int m, double **out) {
    const json_t *ttfts = json_object_get(r, "ttfts"), *e2els = json_object_get(r, "e2els");
    const json_t *outl = json_object_get(r, "output_lens"), *itls = json_object_get(r, "itls");
    const json_t *errors = json_object_get(r, "errors");
    const size_t n = json_array_size(ttfts);
    size_t cap = n + 1;
    if (m == 2)
        for (size_t i = 0; i < json_array_size(itls); i++) cap += json_array_size(json_array_get(itls, i));
    double *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *err = json_array_get(errors, i);
        if (json_is_string(err) && json_string_length(err)) continue; /* failed */
        const double ttft = json_number_value(json_array_get(ttfts, i)), e2el = json_number_value(json_array_get(e2els, i));
        const long ol = (long)json_integer_value(json_array_get(outl, i));
        switch (m) {
        case 0: v[k++] = ttft * 1e3; break;
        case 1:
            if (ol > 1) v[k++] = (e2el - ttft) / (double)(ol - 1) * 1e3;
            break;
        case 2: {
            const json_t *g = json_array_get(itls, i);
            for (size_t j = 0; j < json_array_size(g); j++) v[k++] = json_number_value(json_array_get(g, j)) * 1e3;
            break;
        }
        default: v[k++] = e2el * 1e3; break;
        }
    }
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    *out = v;
    return k;
}

static FILE *open_in(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "cllm bench: cannot write '%s': %s\n", path, strerror(errno));
    return f;
}

/* A gnuplot string literal: single quotes, with '' for a quote. */
static void gp_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static int write_latency(FILE *gp, const char *dir, json_t *const *results, int n) {
    for (int i = 0; i < n; i++)
        for (int m = 0; m < 4; m++) {
            double *v;
            const int k = metric_values(results[i], m, &v);
            if (k < 0) return -1;
            char name[64];
            snprintf(name, sizeof name, "latency_%d_%s.dat", i, METRICS[m]);
            FILE *f = open_in(dir, name);
            if (!f) {
                free(v);
                return -1;
            }
            fprintf(f, "# %s (ms)  cumulative fraction\n", METRICS[m]);
            for (int j = 0; j < k; j++) fprintf(f, "%.6f %.6f\n", v[j], (j + 1.0) / k);
            if (k == 0) fprintf(f, "0 0\n");
            fclose(f);
            free(v);
        }
    fprintf(gp, "set output 'latency.png'\nset multiplot layout 2,2 title 'Latency distributions'\n");
    fprintf(gp, "set ylabel 'cumulative fraction'\nset yrange [0:1]\nset key bottom right\nset grid\n");
    for (int m = 0; m < 4; m++) {
        fprintf(gp, "set title '%s'\nset xlabel 'ms'\nplot ", METRIC_TITLES[m]);
        for (int i = 0; i < n; i++) {
            char title[512];
            const double c = concurrency_of(results[i]);
            snprintf(title, sizeof title, "%s (concurrency %g)", label_of(results[i]), c);
            fprintf(gp, "%s'latency_%d_%s.dat' using 1:2 with steps lw 2 title ", i ? ", " : "", i, METRICS[m]);
            gp_str(gp, title);
        }
        fputc('\n', gp);
    }
    fprintf(gp, "unset multiplot\nset yrange [*:*]\n");
    return 0;
}

typedef struct {
    double c;
    const json_t *r;
} point;

static int cmp_point(const void *a, const void *b) {
    const double x = ((const point *)a)->c, y = ((const point *)b)->c;
    return x < y ? -1 : x > y;
}

static int write_throughput(FILE *gp, const char *dir, json_t *const *results, int n) {
    const char **labels = calloc((size_t)n, sizeof *labels);
    point *pts = calloc((size_t)n, sizeof *pts);
    if (!labels || !pts) {
        free(labels);
        free(pts);
        return -1;
    }
    int nl = 0;
    for (int i = 0; i < n; i++) {
        const char *l = label_of(results[i]);
        int k = 0;
        while (k < nl && strcmp(labels[k], l)) k++;
        if (k == nl) labels[nl++] = l;
    }
    for (int k = 0; k < nl; k++) {
        int np = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(label_of(results[i]), labels[k])) pts[np++] = (point){concurrency_of(results[i]), results[i]};
        qsort(pts, (size_t)np, sizeof *pts, cmp_point);
        char name[64];
        snprintf(name, sizeof name, "throughput_%d.dat", k);
        FILE *f = open_in(dir, name);
        if (!f) {
            free(labels);
            free(pts);
            return -1;
        }
        fprintf(f, "# concurrency output_tok_s total_tok_s p99_ttft_ms median_tpot_ms request_s\n");
        for (int j = 0; j < np; j++)
            fprintf(f, "%g %.3f %.3f %.3f %.3f %.4f\n", pts[j].c, num(pts[j].r, "output_throughput"),
                    num(pts[j].r, "total_token_throughput"), num(pts[j].r, "p99_ttft_ms"),
                    num(pts[j].r, "median_tpot_ms"), num(pts[j].r, "request_throughput"));
        fclose(f);
    }
    static const struct {
        int col;
        const char *title, *ylabel;
    } panels[] = {{2, "Output throughput", "tokens/s"},
                  {4, "P99 time to first token", "ms"},
                  {5, "Median time per output token", "ms"}};
    fprintf(gp, "set output 'throughput.png'\nset multiplot layout 1,3 title 'Against concurrency'\n");
    fprintf(gp, "set xlabel 'concurrency'\nset logscale x 2\nset key top left\nset grid\n");
    for (size_t p = 0; p < sizeof panels / sizeof *panels; p++) {
        fprintf(gp, "set title '%s'\nset ylabel '%s'\nplot ", panels[p].title, panels[p].ylabel);
        for (int k = 0; k < nl; k++) {
            fprintf(gp, "%s'throughput_%d.dat' using 1:%d with linespoints lw 2 pt 7 title ", k ? ", " : "", k,
                    panels[p].col);
            gp_str(gp, labels[k]);
        }
        fputc('\n', gp);
    }
    fprintf(gp, "unset multiplot\nunset logscale x\n");
    free(labels);
    free(pts);
    return 0;
}

static int run_gnuplot(const char *dir) {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (chdir(dir)) _exit(126);
        execlp("gnuplot", "gnuplot", "plot.gp", (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        fprintf(stderr, "cllm bench: gnuplot is not installed (apt-get install gnuplot-nox, or scripts/setup.sh); "
                        "the data and plot.gp are in %s\n", dir);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "cllm bench: gnuplot failed on %s/plot.gp\n", dir);
        return -1;
    }
    return 0;
}

int bench_plot(const char *dir, json_t *const *results, int n) {
    if (mkdir(dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "cllm bench: cannot create '%s': %s\n", dir, strerror(errno));
        return -1;
    }
    FILE *gp = open_in(dir, "plot.gp");
    if (!gp) return -1;
    fprintf(gp, "# Written by cllm bench; run `gnuplot plot.gp` in this folder to redraw.\n");
    fprintf(gp, "set terminal pngcairo size 1400,1000 noenhanced font ',10'\n");
    int rc = write_latency(gp, dir, results, n);
    if (!rc && n >= 2) {
        fprintf(gp, "set terminal pngcairo size 1500,500 noenhanced font ',10'\n");
        rc = write_throughput(gp, dir, results, n);
    }
    if (fclose(gp)) rc = -1;
    if (rc) return -1;
    if (run_gnuplot(dir)) return -1;
    fprintf(stderr, "cllm bench: charts in %s (latency.png%s)\n", dir, n >= 2 ? ", throughput.png" : "");
    return 0;
}
