/* Thread pool; see threadpool.h.
 *
 * One 64-bit word holds the loop's state: the generation (high 32 bits), a
 * "closed" flag (bit 31) and the number of workers inside the loop (low bits).
 * A worker enters only while the loop is open, by a compare-and-swap that
 * increments the count; the caller, once no chunk is left to claim, closes the
 * loop and waits only for the workers already inside, which are running. */
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
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
#define CLOSED_BIT ((uint64_t)1 << 31)
#define ACTIVE_MASK (CLOSED_BIT - 1)

struct threadpool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int n_sleeping; /* changed under mu; read by tp_for without it (seq_cst: see tp_for) */
    atomic_bool stop;
    _Alignas(64) atomic_uint_fast64_t state;
    /* The current loop; written by the caller before it opens the loop. */
    tp_range_fn fn;
    void *ctx;
    long n_items, grain;
    _Alignas(64) atomic_long next;
};

int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void claim_and_run(threadpool *tp) {
    for (;;) {
        long lo = atomic_fetch_add_explicit(&tp->next, tp->grain, memory_order_relaxed);
        if (lo >= tp->n_items) return;
        long hi = lo + tp->grain < tp->n_items ? lo + tp->grain : tp->n_items;
        tp->fn(tp->ctx, lo, hi);
    }
}

static void *worker_main(void *p) {
    threadpool *tp = p;
    uint64_t seen_gen = 0;
    for (;;) {
        uint64_t s;
        int spins = 0;
        while (((s = atomic_load_explicit(&tp->state, memory_order_acquire)) >> 32) == seen_gen) {
            if (atomic_load_explicit(&tp->stop, memory_order_relaxed)) return NULL;
            if (++spins < TP_SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            atomic_fetch_add(&tp->n_sleeping, 1);
            while ((atomic_load(&tp->state) >> 32) == seen_gen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv, &tp->mu);
            atomic_fetch_sub(&tp->n_sleeping, 1);
            pthread_mutex_unlock(&tp->mu);
            spins = 0;
        }
        seen_gen = s >> 32;
        /* Enter only an open loop of this generation. */
        while (!(s & CLOSED_BIT) && (s >> 32) == seen_gen) {
            if (atomic_compare_exchange_weak_explicit(&tp->state, &s, s + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                claim_and_run(tp);
                atomic_fetch_sub_explicit(&tp->state, 1, memory_order_acq_rel);
                break;
            }
        }
    }
}

threadpool *tp_create(int n_threads) {
    if (n_threads <= 0) n_threads = cpu_count();
    threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return NULL;
    tp->n = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    atomic_init(&tp->state, CLOSED_BIT);
    atomic_init(&tp->next, 0);
    atomic_init(&tp->stop, false);
    atomic_init(&tp->n_sleeping, 0);
    tp->threads = calloc((size_t)n_threads, sizeof *tp->threads);
    if (!tp->threads) {
        free(tp);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++)
        if (pthread_create(&tp->threads[i], NULL, worker_main, tp)) {
            tp->n = i; /* run with the threads we got */
            break;
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

void tp_for(threadpool *tp, long n, long grain, tp_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!tp || tp->n == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    tp->n_items = n;
    tp->grain = grain;
    atomic_store_explicit(&tp->next, 0, memory_order_relaxed);
    /* Open the loop: next generation, no workers inside. */
    const uint64_t gen = (atomic_load_explicit(&tp->state, memory_order_relaxed) >> 32) + 1;
    /* Both seq_cst: either we see a sleeper and wake it, or it sees the new
     * generation before it waits (store-load ordering on both sides). */
    atomic_store(&tp->state, gen << 32);
    if (atomic_load(&tp->n_sleeping)) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
    }
    claim_and_run(tp);
    /* Close it and wait for the workers that entered. */
    uint64_t s = atomic_fetch_or_explicit(&tp->state, CLOSED_BIT, memory_order_acq_rel) | CLOSED_BIT;
    while (s & ACTIVE_MASK) {
        cpu_relax();
        s = atomic_load_explicit(&tp->state, memory_order_acquire);
    }
}
