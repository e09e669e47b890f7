/* Unicode tables of the chat-template interpreter (generated data in
 * template_unicode_data.c, lookups in template_unicode.c). */
#ifndef CLLM_CHAT_TEMPLATE_UNICODE_H
#define CLLM_CHAT_TEMPLATE_UNICODE_H

#include <stdint.h>

typedef struct {
    uint32_t lo, hi;
} tpl_range;

/* Code points lo, lo+stride, ..., hi map to cp + delta. */
typedef struct {
    uint32_t lo, hi;
    int32_t stride, delta;
} tpl_case_run;

/* A code point whose mapping is several code points (0-terminated). */
typedef struct {
    uint32_t cp;
    uint32_t to[3];
} tpl_case_multi;

extern const tpl_case_run tpl_upper_runs[], tpl_lower_runs[], tpl_title_runs[];
extern const int tpl_upper_runs_count, tpl_lower_runs_count, tpl_title_runs_count;
extern const tpl_case_multi tpl_upper_multi[], tpl_lower_multi[], tpl_title_multi[];
extern const int tpl_upper_multi_count, tpl_lower_multi_count, tpl_title_multi_count;
extern const tpl_range tpl_nonprintable[], tpl_cased[], tpl_case_ignorable[], tpl_decimal[];
extern const int tpl_nonprintable_count, tpl_cased_count, tpl_case_ignorable_count,
    tpl_decimal_count;

#endif
