/* Geometry of every ggml weight type id (so a GGUF file's tensor sizes can be
 * checked even for types cllm cannot compute with) and of the GQ types. */
#include "format/wtype_geom.h"

#include "format/gq_layout.h"

#include <stdio.h>

typedef struct {
    const char *name;
    int block_size;
    int type_size;
} wtype_geometry;

/* ggml's type ids and block layouts (ggml-common.h); gaps are removed types. */
static const wtype_geometry k_geometry[WT_COUNT] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},     [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 36},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},  [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};

const char *wtype_name(uint32_t t) {
    static _Thread_local char buf[32];
    if (t < WT_COUNT && k_geometry[t].name) return k_geometry[t].name;
    if (gq_is_type(t)) return gq_type_name(t);
    snprintf(buf, sizeof buf, "type %u", t);
    return buf;
}

int wtype_block_size(uint32_t t) {
    if (gq_is_type(t)) return (int)(wtype_row_block(t) ? 0 : gq_type_group(t, 0));
    return t < WT_COUNT && k_geometry[t].name ? k_geometry[t].block_size : 0;
}

bool wtype_row_block(uint32_t t) {
    return gq_is_type(t) && gq_type_group_code(t) == GQ_GROUP_ROW;
}

size_t wtype_row_size(uint32_t t, int64_t n) {
    if (gq_is_type(t)) return gq_row_size(t, n);
    int bs = wtype_block_size(t);
    if (bs <= 0 || n < 0 || n % bs) return 0;
    return (size_t)(n / bs) * (size_t)k_geometry[t].type_size;
}

size_t wtype_type_size(uint32_t t) {
    return t < WT_COUNT && k_geometry[t].name ? (size_t)k_geometry[t].type_size : 0;
}
