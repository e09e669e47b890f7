/* The generated tables behind unicode.h (unicode_data.c, written by
 * scripts/gen_unicode_data.py); only unicode.c reads them. */
#ifndef CLLM_UTIL_UNICODE_TABLES_H
#define CLLM_UTIL_UNICODE_TABLES_H

#include <stdint.h>

typedef struct {
    uint32_t lo, hi;
} unicode_range;

/* Code points lo, lo+stride, ..., hi map to cp + delta. */
typedef struct {
    uint32_t lo, hi;
    int32_t stride, delta;
} unicode_case_run;

/* A code point and what it maps to, 0-terminated when shorter. */
typedef struct {
    uint32_t cp;
    uint32_t to[3];
} unicode_map3;
typedef struct {
    uint32_t cp;
    uint32_t to[4];
} unicode_map4;

extern const unicode_range unicode_other[], unicode_punct[], unicode_mark_nonspacing[], unicode_separator[],
    unicode_cased[], unicode_case_ignorable[], unicode_decimal[];
extern const int unicode_other_count, unicode_punct_count, unicode_mark_nonspacing_count, unicode_separator_count,
    unicode_cased_count, unicode_case_ignorable_count, unicode_decimal_count;
extern const unicode_case_run unicode_upper_runs[], unicode_lower_runs[], unicode_title_runs[];
extern const int unicode_upper_runs_count, unicode_lower_runs_count, unicode_title_runs_count;
extern const unicode_map3 unicode_upper_multi[], unicode_lower_multi[], unicode_title_multi[];
extern const int unicode_upper_multi_count, unicode_lower_multi_count, unicode_title_multi_count;
extern const unicode_map4 unicode_nfd_map[];
extern const int unicode_nfd_map_count;

#endif
