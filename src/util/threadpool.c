/* Thread pool; see threadpool.h. A job is published by bumping `generation`;
 * workers wait for a new generation (spinning, then on a condition variable),
 * run their share and count themselves done. */
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Roughly 50-100 microseconds of spinning before a worker sleeps. */
#define TP_SPIN_ITERS 20000

struct threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tp_fn fn;
    void *ctx;
    atomic_uint generation;
    atomic_int pending;
    atomic_bool stop;
    int n_sleeping; /* guarded by mu */
};

typedef struct {
    threadpool *tp;
    int ith;
} worker_arg;

int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    threadpool *tp = wa->tp;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&tp->generation, memory_order_acquire)) == seen &&
               !atomic_load(&tp->stop)) {
            if (++spins < TP_SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            tp->n_sleeping++;
            while (atomic_load(&tp->generation) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv, &tp->mu);
            tp->n_sleeping--;
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = gen;
        tp->fn(tp->ctx, ith, tp->n);
        atomic_fetch_sub_explicit(&tp->pending, 1, memory_order_acq_rel);
    }
}

threadpool *tp_create(int n_threads) {
    if (n_threads <= 0) n_threads = cpu_count();
    threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return NULL;
    tp->n = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    atomic_init(&tp->generation, 0);
    atomic_init(&tp->pending, 0);
    atomic_init(&tp->stop, false);
    tp->threads = calloc((size_t)n_threads, sizeof *tp->threads);
    if (!tp->threads) {
        free(tp);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        wa->tp = tp;
        wa->ith = i;
        if (pthread_create(&tp->threads[i], NULL, worker_main, wa)) {
            free(wa);
            tp->n = i; /* run with the threads we got */
            break;
        }
    }
    return tp;
}

void tp_free(threadpool *tp) {
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, true);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n; i++) pthread_join(tp->threads[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->threads);
    free(tp);
}

int tp_size(const threadpool *tp) { return tp ? tp->n : 1; }

void tp_run(threadpool *tp, tp_fn fn, void *ctx) {
    if (!tp || tp->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    atomic_store_explicit(&tp->pending, tp->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add_explicit(&tp->generation, 1, memory_order_release);
    if (tp->n_sleeping) pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    fn(ctx, 0, tp->n);
    while (atomic_load_explicit(&tp->pending, memory_order_acquire) > 0) cpu_relax();
}
