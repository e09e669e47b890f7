/* matmul_bench: the weight matmuls of one decode step, timed by kind, as the
 * bandwidth they reach. For each kind of weight (the output head, and each
 * linear map of the layers: all layers' q, then all k, ...) it runs matmul
 * with --tokens activation rows over every such weight of the model, --reps
 * times, and prints the best pass: milliseconds, bytes of weights read, and
 * GB/s. The sum is what one step's matmuls cost without attention, norms or
 * sampling; set against bench/membw's bandwidth it says how far each kernel
 * is from streaming its weights at memory speed.
 *
 * A last row, "step order", runs the same matmuls in the order a decode step
 * does (each layer's q, k, v, o, gate, up, down, then the output head) and
 * prints its best and its mean pass: where it is slower than "all", what
 * costs is going from one weight to the next, not the kernels' streaming.
 *
 * usage: matmul_bench MODEL [--threads N] [--tokens T] [--reps R] */
#include "kernels/matmul.h"
#include "model/model.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum { K_OUT, K_Q, K_K, K_V, K_O, K_GATE, K_UP, K_DOWN, N_KIND };
static const char *const k_name[N_KIND] = {"output", "attn_q", "attn_k", "attn_v", "attn_output",
                                           "ffn_gate", "ffn_up", "ffn_down"};

static const weight *weight_of(const model *m, int kind, int il) {
    const layer_weights *l = &m->w.layers[il];
    const weight *const w[N_KIND] = {&m->w.output, &l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
    return w[kind]->data ? w[kind] : NULL;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), tokens = 1, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!path && argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr, "usage: matmul_bench MODEL [--threads N] [--tokens T] [--reps R]\n");
            return 2;
        }
    }
    if (!path || threads < 1 || tokens < 1 || reps < 1) {
        fprintf(stderr, "usage: matmul_bench MODEL [--threads N] [--tokens T] [--reps R]\n");
        return 2;
    }
    model *m = model_load(path);
    if (!m) {
        fprintf(stderr, "matmul_bench: %s\n", err_get());
        return 1;
    }
    threadpool *pool = threadpool_create(threads);
    size_t x_len = 0, y_len = 0, scratch = 0;
    for (int k = 0; k < N_KIND; k++)
        for (int il = 0; il < (k == K_OUT ? 1 : m->hp.n_layer); il++) {
            const weight *w = weight_of(m, k, il);
            if (!w) continue;
            if ((size_t)w->n_in > x_len) x_len = (size_t)w->n_in;
            if ((size_t)w->n_out > y_len) y_len = (size_t)w->n_out;
            if (matmul_scratch_size(w, tokens) > scratch) scratch = matmul_scratch_size(w, tokens);
        }
    float *x = malloc(x_len * (size_t)tokens * sizeof *x), *y = malloc(y_len * (size_t)tokens * sizeof *y);
    void *s = aligned_alloc(64, (scratch + 63) / 64 * 64);
    if (!pool || !x || !y || !s) {
        fprintf(stderr, "matmul_bench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < x_len * (size_t)tokens; i++) x[i] = (float)((i * 7919) % 200) / 100.0f - 1.0f;
    printf("%s, %d threads, %d token(s), best of %d\n", path, threads, tokens, reps);
    printf("%-12s %-8s %9s %10s %8s\n", "weights", "type", "ms", "MB", "GB/s");
    double total_s = 0, total_b = 0;
    for (int k = 0; k < N_KIND; k++) {
        double best = 1e30, bytes = 0;
        const char *type = "";
        for (int r = 0; r < reps; r++) {
            const double t0 = now();
            bytes = 0;
            for (int il = 0; il < (k == K_OUT ? 1 : m->hp.n_layer); il++) {
                const weight *w = weight_of(m, k, il);
                if (!w) continue;
                matmul(pool, w, x, tokens, y, s);
                bytes += (double)w->row_bytes * (double)w->n_out;
                type = wtype_name(w->type);
            }
            const double dt = now() - t0;
            if (dt < best) best = dt;
        }
        if (bytes == 0) continue;
        printf("%-12s %-8s %9.3f %10.1f %8.2f\n", k_name[k], type, best * 1e3, bytes / 1e6, bytes / best / 1e9);
        total_s += best;
        total_b += bytes;
    }
    printf("%-12s %-8s %9.3f %10.1f %8.2f  (%.1f steps/s from the matmuls alone)\n", "all", "", total_s * 1e3,
           total_b / 1e6, total_b / total_s / 1e9, 1.0 / total_s);
    double best = 1e30, sum = 0;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        for (int il = 0; il < m->hp.n_layer; il++)
            for (int k = K_Q; k < N_KIND; k++) {
                const weight *w = weight_of(m, k, il);
                if (w) matmul(pool, w, x, tokens, y, s);
            }
        const weight *head = weight_of(m, K_OUT, 0);
        if (head) matmul(pool, head, x, tokens, y, s);
        const double dt = now() - t0;
        sum += dt;
        if (dt < best) best = dt;
    }
    printf("%-12s %-8s %9.3f %10.1f %8.2f  (mean of %d passes %.3f ms)\n", "step order", "", best * 1e3, total_b / 1e6,
           total_b / best / 1e9, reps, sum / reps * 1e3);
    free(x);
    free(y);
    free(s);
    threadpool_free(pool);
    model_free(m);
    return 0;
}
