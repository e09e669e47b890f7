/* What the AVX2 gemm tile files (gemm_legacy_avx2.c, gemm_k_avx2.c) share:
 * the tile body is an always-inlined function of constant shape, and each
 * entry point instantiates it once per column count. Include only from
 * *_avx2.c files. */
#ifndef CLLM_KERNELS_GEMM_AVX2_H
#define CLLM_KERNELS_GEMM_AVX2_H

#include <immintrin.h>

#define GEMM_INLINE static inline __attribute__((always_inline))

/* Keeps v in a register, as it is here: without it GCC reassociates integer
 * accumulations over unrolled loops into trees of partial products, and
 * spills them. */
#define GEMM_KEEP(v) __asm__("" : "+x"(v))

/* switch (nc) over CALL(1) .. CALL(MAXC), MAXC <= 8; column counts above
 * MAXC never come, and their cases compile to the MAXC one. */
#define GEMM_CASE_(NCV, MAXC, CALL)                                                                \
    case NCV:                                                                                      \
        CALL((NCV) < (MAXC) ? (NCV) : (MAXC));                                                     \
        break;

#define GEMM_DISPATCH(nc, MAXC, CALL)                                                              \
    switch (nc) {                                                                                  \
        GEMM_CASE_(1, MAXC, CALL)                                                                  \
        GEMM_CASE_(2, MAXC, CALL)                                                                  \
        GEMM_CASE_(3, MAXC, CALL)                                                                  \
        GEMM_CASE_(4, MAXC, CALL)                                                                  \
        GEMM_CASE_(5, MAXC, CALL)                                                                  \
        GEMM_CASE_(6, MAXC, CALL)                                                                  \
        GEMM_CASE_(7, MAXC, CALL)                                                                  \
    default:                                                                                       \
        CALL(MAXC);                                                                                \
    }

#endif
