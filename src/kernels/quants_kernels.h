/* Prototypes of the quantized-format kernels, for quants_register.c and
 * nothing else: the rest of the engine reaches them through the wtype
 * registry. Signatures match wtype.h's function types. Naming:
 *   <type>_to_float_<impl>      dequantize n elements
 *   <type>_from_float_<impl>    quantize n elements (n a multiple of the block)
 *   vec_dot_<w>_<a>_<impl>      dot of n weights of type w with activations a
 * <impl> is ref (scalar, the definition of the format) or avx2. */
#ifndef CLLM_KERNELS_QUANTS_KERNELS_H
#define CLLM_KERNELS_QUANTS_KERNELS_H

#include <stdint.h>

#define QUANTS_CONVERT(T, impl)                                                                    \
    void T##_to_float_##impl(const void *restrict x, float *restrict y, int64_t n);                \
    void T##_from_float_##impl(const float *restrict x, void *restrict y, int64_t n);
#define QUANTS_DOT(W, A, impl)                                                                     \
    void vec_dot_##W##_##A##_##impl(int n, float *restrict s, const void *restrict x,              \
                                    const void *restrict y);

/* quants_legacy_ref.c */
QUANTS_CONVERT(q4_0, ref)
QUANTS_CONVERT(q4_1, ref)
QUANTS_CONVERT(q5_0, ref)
QUANTS_CONVERT(q5_1, ref)
QUANTS_CONVERT(q8_0, ref)
QUANTS_CONVERT(q8_1, ref)
QUANTS_DOT(q4_0, q8_0, ref)
QUANTS_DOT(q4_1, q8_1, ref)
QUANTS_DOT(q5_0, q8_0, ref)
QUANTS_DOT(q5_1, q8_1, ref)
QUANTS_DOT(q8_0, q8_0, ref)

/* quants_k_ref.c (quantizer searches in quants_k_search.c) */
QUANTS_CONVERT(q2_K, ref)
QUANTS_CONVERT(q3_K, ref)
QUANTS_CONVERT(q4_K, ref)
QUANTS_CONVERT(q5_K, ref)
QUANTS_CONVERT(q6_K, ref)
QUANTS_CONVERT(q8_K, ref)
QUANTS_DOT(q2_K, q8_K, ref)
QUANTS_DOT(q3_K, q8_K, ref)
QUANTS_DOT(q4_K, q8_K, ref)
QUANTS_DOT(q5_K, q8_K, ref)
QUANTS_DOT(q6_K, q8_K, ref)

/* quants_legacy_avx2.c */
void q8_0_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void q8_1_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void q4_0_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
void q8_0_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
QUANTS_DOT(q4_0, q8_0, avx2)
QUANTS_DOT(q4_1, q8_1, avx2)
QUANTS_DOT(q5_0, q8_0, avx2)
QUANTS_DOT(q5_1, q8_1, avx2)
QUANTS_DOT(q8_0, q8_0, avx2)

/* quants_k_avx2.c */
void q8_K_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
QUANTS_DOT(q2_K, q8_K, avx2)
QUANTS_DOT(q3_K, q8_K, avx2)
QUANTS_DOT(q4_K, q8_K, avx2)
QUANTS_DOT(q5_K, q8_K, avx2)
QUANTS_DOT(q6_K, q8_K, avx2)

#undef QUANTS_CONVERT
#undef QUANTS_DOT

#endif
