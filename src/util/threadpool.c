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
    atomic_int n_sleeping; /* changed under mu; read by threadpool_for without it (seq_cst: see threadpool_for) */
    atomic_bool stop;
    _Alignas(64) atomic_uint_fast64_t state;
    /* The current loop; written by the caller before it opens the loop. */
    threadpool_range_fn fn;
    void *ctx;
    long n_items, grain;
    _Alignas(64) atomic_long next;
};

int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void claim_and_run(threadpool *threads) {
    for (;;) {
        long lo = atomic_fetch_add_explicit(&threads->next, threads->grain, memory_order_relaxed);
        if (lo >= threads->n_items) return;
        long hi = lo + threads->grain < threads->n_items ? lo + threads->grain : threads->n_items;
        threads->fn(threads->ctx, lo, hi);
    }
}

static void *worker_main(void *p) {
    threadpool *threads = p;
    uint64_t seen_gen = 0;
    for (;;) {
        uint64_t s;
        int spins = 0;
        while (((s = atomic_load_explicit(&threads->state, memory_order_acquire)) >> 32) == seen_gen) {
            if (atomic_load_explicit(&threads->stop, memory_order_relaxed)) return NULL;
            if (++spins < TP_SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&threads->mu);
            atomic_fetch_add(&threads->n_sleeping, 1);
            while ((atomic_load(&threads->state) >> 32) == seen_gen && !atomic_load(&threads->stop))
                pthread_cond_wait(&threads->cv, &threads->mu);
            atomic_fetch_sub(&threads->n_sleeping, 1);
            pthread_mutex_unlock(&threads->mu);
            spins = 0;
        }
        seen_gen = s >> 32;
        /* Enter only an open loop of this generation. */
        while (!(s & CLOSED_BIT) && (s >> 32) == seen_gen) {
            if (atomic_compare_exchange_weak_explicit(&threads->state, &s, s + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                claim_and_run(threads);
                atomic_fetch_sub_explicit(&threads->state, 1, memory_order_acq_rel);
                break;
            }
        }
    }
}

threadpool *threadpool_create(int n_threads) {
    if (n_threads <= 0) n_threads = cpu_count();
    threadpool *threads = calloc(1, sizeof *threads);
    if (!threads) return NULL;
    threads->n = n_threads;
    pthread_mutex_init(&threads->mu, NULL);
    pthread_cond_init(&threads->cv, NULL);
    atomic_init(&threads->state, CLOSED_BIT);
    atomic_init(&threads->next, 0);
    atomic_init(&threads->stop, false);
    atomic_init(&threads->n_sleeping, 0);
    threads->threads = calloc((size_t)n_threads, sizeof *threads->threads);
    if (!threads->threads) {
        free(threads);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++)
        if (pthread_create(&threads->threads[i], NULL, worker_main, threads)) {
            threads->n = i; /* run with the threads we got */
            break;
        }
    return threads;
}

void threadpool_free(threadpool *threads) {
    if (!threads) return;
    pthread_mutex_lock(&threads->mu);
    atomic_store(&threads->stop, true);
    pthread_cond_broadcast(&threads->cv);
    pthread_mutex_unlock(&threads->mu);
    for (int i = 1; i < threads->n; i++) pthread_join(threads->threads[i], NULL);
    pthread_mutex_destroy(&threads->mu);
    pthread_cond_destroy(&threads->cv);
    free(threads->threads);
    free(threads);
}

int threadpool_size(const threadpool *threads) { return threads ? threads->n : 1; }

void threadpool_for(threadpool *threads, long n, long grain, threadpool_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!threads || threads->n == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    threads->fn = fn;
    threads->ctx = ctx;
    threads->n_items = n;
    threads->grain = grain;
    atomic_store_explicit(&threads->next, 0, memory_order_relaxed);
    /* Open the loop: next generation, no workers inside. */
    const uint64_t gen = (atomic_load_explicit(&threads->state, memory_order_relaxed) >> 32) + 1;
    /* Both seq_cst: either we see a sleeper and wake it, or it sees the new
     * generation before it waits (store-load ordering on both sides). */
    atomic_store(&threads->state, gen << 32);
    if (atomic_load(&threads->n_sleeping)) {
        pthread_mutex_lock(&threads->mu);
        pthread_cond_broadcast(&threads->cv);
        pthread_mutex_unlock(&threads->mu);
    }
    claim_and_run(threads);
    /* Close it and wait for the workers that entered. */
    uint64_t s = atomic_fetch_or_explicit(&threads->state, CLOSED_BIT, memory_order_acq_rel) | CLOSED_BIT;
    while (s & ACTIVE_MASK) {
        cpu_relax();
        s = atomic_load_explicit(&threads->state, memory_order_acquire);
    }
}
