/* See stop_strings.h. Stop strings are few and short; plain scans suffice. */
#include "engine/stop_strings.h"

#include <string.h>

bool stop_scan(const char *const *stops, int n_stops, const char *held, size_t len, size_t *release,
               size_t *match_len) {
    size_t earliest = len + 1;
    for (int i = 0; i < n_stops; i++) {
        const size_t sl = strlen(stops[i]);
        if (!sl || sl > len) continue;
        for (size_t p = 0; p + sl <= len && p < earliest; p++)
            if (!memcmp(held + p, stops[i], sl)) {
                earliest = p;
                *match_len = sl;
                break;
            }
    }
    if (earliest <= len) {
        *release = earliest;
        return true;
    }
    size_t keep = 0;
    for (int i = 0; i < n_stops; i++) {
        const size_t sl = strlen(stops[i]);
        if (!sl) continue;
        /* Longest k < sl with held's last k bytes == the stop string's first k. */
        for (size_t k = (sl - 1 < len ? sl - 1 : len); k > keep; k--)
            if (!memcmp(held + len - k, stops[i], k)) {
                keep = k;
                break;
            }
    }
    *release = len - keep;
    return false;
}
