/* The weight type registry: geometry for every ggml type id (so a GGUF file's
 * tensor sizes can be checked even for types we cannot compute with), and the
 * reference and active kernel tables. */
#include "kernels/wtype.h"

#include "kernels/float_dot.h"
#include "kernels/gemm.h"
#include "kernels/gq.h"
#include "kernels/quants.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static wtype_traits g_ref[WT_COUNT];
static wtype_traits g_fast[WT_COUNT];
static bool g_avx2;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool cpu_has_avx2(void) {
    const char *off = getenv("CLLM_NO_AVX2");
    if (off && *off && strcmp(off, "0")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

static void set_float(wtype_traits *t, wtype_to_float_fn to, wtype_from_float_fn from,
                      wtype_vec_dot_fn dot) {
    t->vec_dot_type = WT_F32;
    t->to_float = to;
    t->from_float = from;
    t->vec_dot = dot;
}

static void init_tables(void) {
    g_avx2 = cpu_has_avx2();
    for (int i = 0; i < WT_COUNT; i++) {
        const wtype_geometry *g = &k_geometry[i];
        g_ref[i] = (wtype_traits){.name = g->name, .block_size = g->block_size,
                                  .type_size = (size_t)g->type_size};
    }
    set_float(&g_ref[WT_F32], f32_to_float_ref, f32_from_float_ref, vec_dot_f32_ref);
    set_float(&g_ref[WT_F16], f16_to_float_ref, f16_from_float_ref, vec_dot_f16_f32_ref);
    set_float(&g_ref[WT_BF16], bf16_to_float_ref, bf16_from_float_ref, vec_dot_bf16_f32_ref);
    memcpy(g_fast, g_ref, sizeof g_fast);
    if (g_avx2) {
        set_float(&g_fast[WT_F32], f32_to_float_ref, f32_from_float_ref, vec_dot_f32_avx2);
        set_float(&g_fast[WT_F16], f16_to_float_avx2, f16_from_float_avx2, vec_dot_f16_f32_avx2);
        set_float(&g_fast[WT_BF16], bf16_to_float_ref, bf16_from_float_ref, vec_dot_bf16_f32_avx2);
    }
    gemm_float_register(g_ref, g_fast, g_avx2);
    quants_register(g_ref, g_fast, g_avx2);
    gq_register(g_ref, g_fast, g_avx2);
}

void wtype_init(void) { pthread_once(&g_once, init_tables); }

bool wtype_using_avx2(void) {
    wtype_init();
    return g_avx2;
}

static const wtype_traits *lookup(const wtype_traits *table, wtype t) {
    wtype_init();
    if ((unsigned)t >= WT_COUNT || !table[t].name || !table[t].to_float) return NULL;
    return &table[t];
}

const wtype_traits *wtype_get(wtype t) { return lookup(g_fast, t); }
const wtype_traits *wtype_get_ref(wtype t) { return lookup(g_ref, t); }

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
