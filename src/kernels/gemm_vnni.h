/* The VNNI instructions of the VNNI builds of gemm_panel_impl.h and
 * gemm_k_impl.h, in the encoding the including file chose:
 *   GEMM_VNNI_EVEX 0 (default): AVX-VNNI, the VEX forms (Intel Alder Lake
 *     and later; the file sets #pragma GCC target("avxvnni"));
 *   GEMM_VNNI_EVEX 1: AVX512-VNNI with AVX512VL, the same 256-bit
 *     operations EVEX-encoded (AMD Zen 4, Intel Ice Lake and later servers;
 *     target("avx512vnni,avx512vl")).
 * Both compute the same integers, so every build gives the same bits. */
#ifndef CLLM_KERNELS_GEMM_VNNI_H
#define CLLM_KERNELS_GEMM_VNNI_H

#include <immintrin.h>

#ifndef GEMM_VNNI_EVEX
#define GEMM_VNNI_EVEX 0
#endif

#if GEMM_VNNI_EVEX
#define GEMM_DPBUSD(acc, a, b) _mm256_dpbusd_epi32(acc, a, b)
#define GEMM_DPWSSD(acc, a, b) _mm256_dpwssd_epi32(acc, a, b)
#else
#define GEMM_DPBUSD(acc, a, b) _mm256_dpbusd_avx_epi32(acc, a, b)
#define GEMM_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#endif

#endif
