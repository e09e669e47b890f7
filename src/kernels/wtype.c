/* The weight type registry: the active and reference tables, copied once
 * from the per-ISA kernel tables (wtype_tables.h) with each type's geometry
 * from format/wtype_geom.h. */
#include "kernels/wtype.h"

#include "format/qgroup.h"
#include "kernels/wtype_tables.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static wtype_traits g_ref[WT_COUNT];
static wtype_traits g_active[WT_COUNT];
static bool g_avx2;
static const char *g_isa = "ref";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* True unless the environment variable is set to something other than "0". */
static bool allowed(const char *off_var) {
    const char *off = getenv(off_var);
    return !(off && *off && strcmp(off, "0"));
}

/* F16C (cpuid 1 ECX bit 29) and AVX-VNNI are read from cpuid directly:
 * clang 14's __builtin_cpu_supports knows neither name. */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}

static bool cpu_has_avx2(void) {
    if (!allowed("CLLM_NO_AVX2")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

/* AVX-VNNI (cpuid 7.1 EAX bit 4), the VEX-encoded 256-bit form. */
static bool cpu_has_avxvnni(void) {
    if (!allowed("CLLM_NO_VNNI")) return false;
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}

/* A table's entry for type t with the type's geometry filled in; all zero
 * where the table has no kernels for t. The per-row GQ types have no fixed
 * block (block_size 0): their type_size is the block header's. */
static wtype_traits with_geometry(wtype t, const wtype_traits *kernels) {
    if (!kernels->to_float) return (wtype_traits){0};
    wtype_traits tr = *kernels;
    tr.name = wtype_name((uint32_t)t);
    tr.block_size = wtype_block_size((uint32_t)t);
    tr.type_size = wtype_row_block((uint32_t)t) ? GQ_BLOCK_HEADER
                                                 : wtype_row_size((uint32_t)t, tr.block_size);
    return tr;
}

/* AVX512-VNNI with AVX512VL: the EVEX forms of the same 256-bit operations. */
static bool cpu_has_avx512vnni(void) {
    if (!allowed("CLLM_NO_VNNI") || !allowed("CLLM_NO_AVX512")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}

static void init_tables(void) {
    const bool avx2 = cpu_has_avx2(), vnni = avx2 && cpu_has_avxvnni();
    const bool vnni512 = avx2 && !vnni && cpu_has_avx512vnni();
    g_avx2 = avx2;
    g_isa = vnni ? "vnni" : vnni512 ? "vnni512" : avx2 ? "avx2" : "ref";
    const wtype_traits *vnni_table = vnni ? wtype_traits_vnni : vnni512 ? wtype_traits_vnni512 : NULL;
    for (int t = 0; t < WT_COUNT; t++) {
        const wtype_traits *active = &wtype_traits_ref[t];
        if (avx2) active = &wtype_traits_avx2[t];
        if (vnni_table && vnni_table[t].to_float) active = &vnni_table[t];
        g_ref[t] = with_geometry((wtype)t, &wtype_traits_ref[t]);
        g_active[t] = with_geometry((wtype)t, active);
    }
}

void wtype_init(void) { pthread_once(&g_once, init_tables); }

bool wtype_using_avx2(void) {
    wtype_init();
    return g_avx2;
}

const char *wtype_isa(void) {
    wtype_init();
    return g_isa;
}

static const wtype_traits *lookup(const wtype_traits *table, wtype t) {
    wtype_init();
    if ((unsigned)t >= WT_COUNT || !table[t].to_float) return NULL;
    return &table[t];
}

const wtype_traits *wtype_get(wtype t) { return lookup(g_active, t); }
const wtype_traits *wtype_get_ref(wtype t) { return lookup(g_ref, t); }
