/* Prototypes of the kernels of the float weight formats (F32, F16, BF16), for
 * the registry tables and the kernel tests; the naming is quants_kernels.h's.
 * Activations stay f32; F16/BF16 weights are widened on the fly. */
#ifndef CLLM_KERNELS_FLOAT_KERNELS_H
#define CLLM_KERNELS_FLOAT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Tile shape of the AVX2 float tiles (gemm_float_avx2.c); the reference
 * tiles take it too. */
#define GEMM_FLOAT_ROWS 4
#ifndef GEMM_FLOAT_COLS
#define GEMM_FLOAT_COLS 2
#endif

/* float_dot_ref.c */
void f32_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void f32_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void f16_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void f16_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void bf16_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void bf16_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_f32_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_f16_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_bf16_f32_ref(int n, float *restrict s, const void *restrict x, const void *restrict y);

/* float_dot_avx2.c */
void f16_to_float_avx2(const void *restrict x, float *restrict y, int64_t n);
void f16_from_float_avx2(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_f32_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_f16_f32_avx2(int n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_bf16_f32_avx2(int n, float *restrict s, const void *restrict x,
                           const void *restrict y);

/* gemm_ref.c: one reference dot product per output */
void gemm_f32_f32_ref(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                      size_t bx, const void *restrict y, size_t by);
void gemm_f16_f32_ref(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                      size_t bx, const void *restrict y, size_t by);
void gemm_bf16_f32_ref(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                       size_t bx, const void *restrict y, size_t by);

/* gemm_float_avx2.c */
void gemm_f32_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                       size_t bx, const void *restrict y, size_t by);
void gemm_f16_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                       size_t bx, const void *restrict y, size_t by);
void gemm_bf16_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                        const void *restrict x, size_t bx, const void *restrict y, size_t by);

#endif
