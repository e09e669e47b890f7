/* membw: streaming-read memory bandwidth, the ceiling on single-stream
 * generation speed (each generated token reads every weight once, so
 * tokens/s <= bandwidth / bytes of weights).
 *
 * Each thread reads its own contiguous slice of one large buffer with 256-bit
 * AVX2 loads (four independent accumulators, so the loads are not serialized
 * behind one dependency chain), the buffer is written once beforehand so its
 * pages are real, and the best of --reps passes is reported (the least
 * disturbed by other work on the machine). The default buffer, 2 GiB, is far
 * beyond any last-level cache; --size MODEL_BYTES measures at the size of a
 * model's weights, which on a machine with a very large cache may be served
 * partly from it.
 *
 * usage: membw [--size MiB] [--threads N] [--reps N]
 * Prints "threads N: X.X GB/s" for 1 thread and for N (default: all online
 * CPUs), GB = 1e9 bytes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const uint8_t *p;
    size_t n;
    pthread_barrier_t *start;
    uint64_t sink;
} slice;

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, s);
    return out[0] + out[1] + out[2] + out[3];
}

static uint64_t read_scalar(const uint8_t *p, size_t n) {
    const uint64_t *q = (const uint64_t *)p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) a0 += q[i], a1 += q[i + 1], a2 += q[i + 2], a3 += q[i + 3];
    return a0 + a1 + a2 + a3;
}

static int have_avx2;

static void *worker(void *arg) {
    slice *s = arg;
    pthread_barrier_wait(s->start);
    s->sink = have_avx2 ? read_avx2(s->p, s->n) : read_scalar(s->p, s->n);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One pass of `threads` threads over the buffer; returns bytes/second. The
 * clock starts when every thread is ready and stops when the last is done. */
static double pass(const uint8_t *buf, size_t size, int threads, uint64_t *sink) {
    pthread_t tid[1024];
    slice sl[1024];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    const size_t chunk = (size / (size_t)threads) & ~(size_t)127;
    for (int t = 0; t < threads; t++) {
        sl[t] = (slice){.p = buf + (size_t)t * chunk, .n = chunk, .start = &start};
        pthread_create(&tid[t], NULL, worker, &sl[t]);
    }
    pthread_barrier_wait(&start);
    const double t0 = now();
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        *sink += sl[t].sink;
    }
    const double dt = now() - t0;
    pthread_barrier_destroy(&start);
    return (double)chunk * threads / dt;
}

int main(int argc, char **argv) {
    size_t size = (size_t)2048 << 20;
    long threads = sysconf(_SC_NPROCESSORS_ONLN), reps = 5;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--size")) size = (size_t)(atof(argv[++i]) * 1048576.0);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: membw [--size MiB] [--threads N] [--reps N]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    if (threads > 1024) threads = 1024;
    if (reps < 1) reps = 1;
    if (size < (size_t)threads * 4096) size = (size_t)threads * 4096;
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2");
    uint8_t *buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    if (!buf) {
        fprintf(stderr, "membw: cannot allocate %zu MiB\n", size >> 20);
        return 1;
    }
    for (size_t i = 0; i < size; i += 64) memset(buf + i, (int)(i >> 6), 64);
    printf("buffer %.0f MiB, %s loads, best of %ld\n", size / 1048576.0, have_avx2 ? "AVX2" : "scalar 64-bit",
           reps);
    uint64_t sink = 0;
    const long counts[2] = {1, threads};
    for (int k = 0; k < (threads > 1 ? 2 : 1); k++) {
        double best = 0;
        for (long r = 0; r < reps; r++) {
            const double bw = pass(buf, size, (int)counts[k], &sink);
            if (bw > best) best = bw;
        }
        printf("threads %ld: %.1f GB/s\n", counts[k], best / 1e9);
    }
    fprintf(stderr, "(checksum %llx)\n", (unsigned long long)sink);
    free(buf);
    return 0;
}
