/* The weight type registry: the reference and active kernel tables (the
 * geometry of every type id is format/wtype_geom.c's). */
#include "kernels/wtype.h"

#include "kernels/float_kernels.h"
#include "kernels/gemm.h"
#include "kernels/gq.h"
#include "kernels/quants.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (i >= WT_GQ_BASE && i < WT_GQ_BASE + WT_GQ_COUNT) continue; /* gq_register's */
        g_ref[i] = (wtype_traits){.name = wtype_type_size((uint32_t)i) ? wtype_name((uint32_t)i) : NULL,
                                  .block_size = wtype_block_size((uint32_t)i),
                                  .type_size = wtype_type_size((uint32_t)i)};
    }
    set_float(&g_ref[WT_F32], f32_to_float_ref, f32_from_float_ref, vec_dot_f32_f32_ref);
    set_float(&g_ref[WT_F16], f16_to_float_ref, f16_from_float_ref, vec_dot_f16_f32_ref);
    set_float(&g_ref[WT_BF16], bf16_to_float_ref, bf16_from_float_ref, vec_dot_bf16_f32_ref);
    memcpy(g_fast, g_ref, sizeof g_fast);
    if (g_avx2) {
        set_float(&g_fast[WT_F32], f32_to_float_ref, f32_from_float_ref, vec_dot_f32_f32_avx2);
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
