/* The kernel registry: the table of each instruction set, built once from
 * the per-ISA kernel tables (wtype_tables.h: the VNNI ones as the AVX2 table
 * with the VNNI overlay laid over it) with each type's geometry from
 * format/wtype_geom.h; the active one of them and the active ops table
 * (ops_tables.h), chosen by cpuid and the CLLM_NO_* switches. */
#include "kernels/wtype.h"

#include "format/qgroup.h"
#include "kernels/ops_tables.h"
#include "kernels/wtype_tables.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static wtype_traits g_tables[WTYPE_ISA_COUNT][WT_COUNT];
static bool g_own[WTYPE_ISA_COUNT][WT_COUNT];
static const wtype_traits *g_active = g_tables[WTYPE_ISA_REF];
static const kernel_ops *g_ops = &kernel_ops_ref;
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

/* AVX512-VNNI with AVX512VL: the EVEX forms of the same 256-bit operations,
 * and the 512-bit K-quant panels. */
static bool cpu_has_avx512vnni(void) {
    if (!allowed("CLLM_NO_VNNI") || !allowed("CLLM_NO_AVX512")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
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

/* The AVX2 entry e with column `build` of overlay entry o laid over it;
 * false (e unchanged) where o sets nothing. */
static bool lay_over(wtype_traits *e, const wtype_vnni_overlay *o, int build) {
    bool own = false;
    if (o->gemm[build]) e->gemm = o->gemm[build], own = true;
    if (o->gemm_pack[build]) e->gemm_pack = o->gemm_pack[build], own = true;
    if (o->x8_gemm_pack[build]) e->x8_gemm_pack = o->x8_gemm_pack[build], own = true;
    if (o->gemm_panel[build]) e->gemm_panel = o->gemm_panel[build], own = true;
    if (o->panel_prep[build]) e->panel_prep = o->panel_prep[build], own = true;
    if (o->gemm_x8[build]) e->gemm_x8 = o->gemm_x8[build], own = true;
    if (o->x8_cols[build]) e->x8_cols = o->x8_cols[build], own = true;
    if (o->panel_block_bytes) e->panel_block_bytes = o->panel_block_bytes, own = true;
    if (o->x8_panel_min_tok) e->x8_panel_min_tok = o->x8_panel_min_tok, own = true;
    return own;
}

static void build_tables(void) {
    for (int t = 0; t < WT_COUNT; t++) {
        const wtype_traits *ref = &wtype_traits_ref[t], *avx2 = &wtype_traits_avx2[t];
        g_tables[WTYPE_ISA_REF][t] = with_geometry((wtype)t, ref);
        g_tables[WTYPE_ISA_AVX2][t] = with_geometry((wtype)t, avx2);
        g_own[WTYPE_ISA_REF][t] = ref->to_float != NULL;
        g_own[WTYPE_ISA_AVX2][t] = avx2->to_float != NULL;
        for (int build = 0; build < 2; build++) {
            wtype_traits e = *avx2;
            const int isa = build ? WTYPE_ISA_VNNI512 : WTYPE_ISA_VNNI;
            g_own[isa][t] = avx2->to_float != NULL && lay_over(&e, &wtype_overlay_vnni[t], build);
            g_tables[isa][t] = with_geometry((wtype)t, &e);
        }
    }
}

static void init_tables(void) {
    build_tables();
    /* AVX512-VNNI first where the CPU has both: its K-quant panels are 512-bit
     * (gemm_k_panel_zmm.h); CLLM_NO_AVX512=1 takes the AVX-VNNI build. */
    const bool avx2 = cpu_has_avx2(), vnni512 = avx2 && cpu_has_avx512vnni();
    const bool vnni = avx2 && !vnni512 && cpu_has_avxvnni();
    const wtype_isa_id isa = vnni      ? WTYPE_ISA_VNNI
                             : vnni512 ? WTYPE_ISA_VNNI512
                             : avx2    ? WTYPE_ISA_AVX2
                                       : WTYPE_ISA_REF;
    static const char *const names[WTYPE_ISA_COUNT] = {"ref", "avx2", "vnni", "vnni512"};
    g_avx2 = avx2;
    g_isa = names[isa];
    g_active = g_tables[isa];
    g_ops = avx2 ? &kernel_ops_avx2 : &kernel_ops_ref;
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

const kernel_ops *kernel_ops_active(void) {
    wtype_init();
    return g_ops;
}

const wtype_traits *wtype_table(wtype_isa_id isa) {
    wtype_init();
    return g_tables[isa];
}

bool wtype_table_own(wtype_isa_id isa, wtype t) {
    wtype_init();
    return (unsigned)t < WT_COUNT && g_own[isa][t];
}

static const wtype_traits *lookup(const wtype_traits *table, wtype t) {
    if ((unsigned)t >= WT_COUNT || !table[t].to_float) return NULL;
    return &table[t];
}

/* (g_active is read after wtype_init has set it.) */
const wtype_traits *wtype_get(wtype t) {
    wtype_init();
    return lookup(g_active, t);
}

const wtype_traits *wtype_get_ref(wtype t) {
    wtype_init();
    return lookup(g_tables[WTYPE_ISA_REF], t);
}
