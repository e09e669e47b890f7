/* A fixed pool of worker threads for data-parallel kernels. tp_run(fn) calls
 * fn(ctx, ith, nth) once on each of the nth threads (the caller is thread 0)
 * and returns when all have finished. Workers spin briefly between jobs, since
 * a forward pass issues hundreds of short jobs back to back, then sleep. */
#ifndef CLLM_UTIL_THREADPOOL_H
#define CLLM_UTIL_THREADPOOL_H

typedef struct threadpool threadpool;
typedef void (*tp_fn)(void *ctx, int ith, int nth);

/* n_threads counts the caller; <= 0 means all online CPUs. */
threadpool *tp_create(int n_threads);
void tp_free(threadpool *tp);
int tp_size(const threadpool *tp);
void tp_run(threadpool *tp, tp_fn fn, void *ctx);

/* Splits [0, n) into nth near-equal contiguous ranges; thread ith gets [*lo, *hi). */
static inline void tp_range(long n, int ith, int nth, long *lo, long *hi) {
    long per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

int cpu_count(void);

#endif
