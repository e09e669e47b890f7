/* See histogram.h. */
#include "util/histogram.h"

#include <string.h>

void hist_init_seconds(histogram *h) {
    static const double b[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                               2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 300.0};
    memset(h, 0, sizeof *h);
    h->n_bounds = (int)(sizeof b / sizeof b[0]);
    memcpy(h->bounds, b, sizeof b);
}

void hist_observe(histogram *h, double v) {
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}
