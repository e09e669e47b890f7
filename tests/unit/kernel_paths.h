/* Unit-test helper: the SIMD kernel paths a test compares with the scalar
 * reference (test_quants.c, test_gemm.c, test_gq.c, test_ops.c,
 * test_attention.c, test_attn_mass.c). A path is one of the kernel tables of
 * wtype_tables.h: AVX2, and on top of it AVX-VNNI and AVX512-VNNI. Each runs
 * where this CPU has its instructions (read as wtype.c reads them) and the
 * environment does not turn it off (CLLM_NO_AVX2, CLLM_NO_VNNI,
 * CLLM_NO_AVX512), so CLLM_NO_VNNI=1 shows on any CPU what a CPU without
 * VNNI tests.
 *
 * Tests walk the paths instead of the active table (wtype_get): on a VNNI CPU
 * the active table holds VNNI entries, and its AVX2 entries would go
 * unchecked; a VNNI table has entries for a few types only, and the others
 * (which run the AVX2 entry) are not compared twice; and where no SIMD path
 * runs, the reference is not compared with itself. kernel_paths_print says
 * which paths ran and why the others did not, e.g.
 *   paths compared with ref: avx2 (vnni: not on this CPU, vnni512: not on this CPU)
 * Include after cmocka.h. */
#ifndef CLLM_TESTS_UNIT_KERNEL_PATHS_H
#define CLLM_TESTS_UNIT_KERNEL_PATHS_H

#include "kernels/wtype.h"
#include "kernels/wtype_tables.h"

#include <cpuid.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    KP_REF = WTYPE_ISA_REF,
    KP_AVX2 = WTYPE_ISA_AVX2,
    KP_VNNI = WTYPE_ISA_VNNI,
    KP_VNNI512 = WTYPE_ISA_VNNI512,
    KP_COUNT = WTYPE_ISA_COUNT
};
/* Sets of paths, for kernel_paths_print: the tests of AVX2-only kernels
 * (attention, row ops, GQ, x8) and those of every table. */
#define KP_SET_AVX2 (1u << KP_AVX2)
#define KP_SET_ALL ((1u << KP_AVX2) | (1u << KP_VNNI) | (1u << KP_VNNI512))

/* True when the environment variable is set to something other than "0"
 * (wtype.c's rule). */
static inline bool kernel_path_env_off(const char *var) {
    const char *v = getenv(var);
    return v && *v && strcmp(v, "0");
}

/* NULL when path p runs here, else why not. */
static inline const char *kernel_path_off(int p) {
    if (p == KP_REF) return NULL;
    unsigned a, b, c, d;
    __builtin_cpu_init();
    /* F16C (cpuid 1 ECX bit 29) and AVX-VNNI (cpuid 7.1 EAX bit 4) from
     * cpuid, as wtype.c reads them: clang 14 knows neither name. */
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c))
        return "not on this CPU";
    if (kernel_path_env_off("CLLM_NO_AVX2")) return "CLLM_NO_AVX2 set";
    if (p == KP_AVX2) return NULL;
    if (p == KP_VNNI && !(__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1)))
        return "not on this CPU";
    if (p == KP_VNNI512 &&
        !(__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")))
        return "not on this CPU";
    if (kernel_path_env_off("CLLM_NO_VNNI")) return "CLLM_NO_VNNI set";
    if (p == KP_VNNI512 && kernel_path_env_off("CLLM_NO_AVX512")) return "CLLM_NO_AVX512 set";
    return NULL;
}

static inline bool kernel_path_runs(int p) {
    return !kernel_path_off(p);
}

static inline const char *kernel_path_name(int p) {
    static const char *const names[KP_COUNT] = {"ref", "avx2", "vnni", "vnni512"};
    return names[p];
}

/* Path p's own entry for type t in *out, as the registry built it (with the
 * name and geometry; KP_* are wtype_isa_id's order); false where p does not
 * run here or has no entry of its own for t (a VNNI table outside the
 * overlay's few types: those run the AVX2 entry). */
static inline bool kernel_path_entry(int p, wtype t, wtype_traits *out) {
    if (!kernel_path_runs(p) || !wtype_table_own((wtype_isa_id)p, t)) return false;
    *out = wtype_table((wtype_isa_id)p)[t];
    return true;
}

/* "  WHAT: avx2, vnni (vnni512: not on this CPU)" for the paths of `set`,
 * "none" where none of them runs. */
static inline void kernel_paths_print(const char *what, unsigned set) {
    char ran[64] = "", off[256] = "";
    for (int p = KP_AVX2; p < KP_COUNT; p++) {
        if (!(set >> p & 1)) continue;
        const char *why = kernel_path_off(p);
        if (!why)
            snprintf(ran + strlen(ran), sizeof ran - strlen(ran), "%s%s", *ran ? ", " : "",
                     kernel_path_name(p));
        else
            snprintf(off + strlen(off), sizeof off - strlen(off), "%s%s: %s", *off ? ", " : "",
                     kernel_path_name(p), why);
    }
    print_message("  %s: %s%s%s%s\n", what, *ran ? ran : "none", *off ? " (" : "", off,
                  *off ? ")" : "");
}

#endif
