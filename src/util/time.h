/* Time for measuring: seconds on the monotonic clock, so intervals never run
 * backwards when the wall clock is set. */
#ifndef CLLM_UTIL_TIME_H
#define CLLM_UTIL_TIME_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double now_seconds(void);

#endif
