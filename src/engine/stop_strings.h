/* Stop strings over streamed text: text is released only when no stop string
 * can still begin inside it, so a stop string is never split across stream
 * chunks and never appears in the output. */
#ifndef CLLM_ENGINE_STOP_STRINGS_H
#define CLLM_ENGINE_STOP_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

/* Looks at `held` (text not yet released). Returns true when a stop string
 * occurs in it; *release is then the length before the earliest occurrence
 * and *match_len that stop string's length. Otherwise *release is how much
 * can go out now: all but the longest suffix that is a proper prefix of some
 * stop string. */
bool stop_scan(const char *const *stops, int n_stops, const char *held, size_t len, size_t *release,
               size_t *match_len);

#endif
