/* A fixed pool of worker threads for data-parallel loops. threadpool_for(n, grain, fn)
 * splits [0, n) into chunks of `grain` that the caller and the workers claim
 * from a shared counter, so a thread that the OS deschedules (the machine is
 * shared) only delays the chunk it holds: the caller finishes the rest and
 * never waits for a worker that has not started. Workers spin briefly between
 * loops, since a forward pass issues hundreds of short loops back to back,
 * then sleep. */
#ifndef CLLM_UTIL_THREADPOOL_H
#define CLLM_UTIL_THREADPOOL_H

typedef struct threadpool threadpool;
/* Processes items [lo, hi). */
typedef void (*threadpool_range_fn)(void *ctx, long lo, long hi);

/* n_threads counts the caller; <= 0 means all online CPUs. */
threadpool *threadpool_create(int n_threads);
void threadpool_free(threadpool *threads);
int threadpool_size(const threadpool *threads);
/* Runs fn over [0, n) in chunks of grain items; returns when all are done. */
void threadpool_for(threadpool *threads, long n, long grain, threadpool_range_fn fn, void *ctx);

int cpu_count(void);

#endif
