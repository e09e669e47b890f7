/* Latency histograms with fixed bucket bounds, in the shape Prometheus wants:
 * cumulative counts per upper bound, a sum and a count. */
#ifndef CLLM_UTIL_HISTOGRAM_H
#define CLLM_UTIL_HISTOGRAM_H

#include <stdint.h>

#define HIST_MAX_BUCKETS 24

typedef struct {
    int n_bounds;
    double bounds[HIST_MAX_BUCKETS]; /* ascending upper bounds; +Inf is implicit */
    uint64_t counts[HIST_MAX_BUCKETS + 1]; /* non-cumulative; last is the +Inf bucket */
    double sum;
    uint64_t count;
} histogram;

/* Buckets for latencies in seconds, from 1 ms to 5 minutes. */
void hist_init_seconds(histogram *h);
void hist_observe(histogram *h, double v);

#endif
