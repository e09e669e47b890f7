/* gemm tiles (wtype_gemm_fn) of the float weight formats F32, F16 and BF16
 * against f32 activations; the quantized formats' tiles are registered by
 * quants_register (quants_kernels.h). */
#ifndef CLLM_KERNELS_GEMM_H
#define CLLM_KERNELS_GEMM_H

#include "kernels/wtype.h"

/* Tile shape of the AVX2 float tiles (gemm_float_avx2.c); the reference
 * tiles take it too. */
#define GEMM_FLOAT_ROWS 4
#ifndef GEMM_FLOAT_COLS
#define GEMM_FLOAT_COLS 2
#endif

/* Sets the tiles of F32, F16 and BF16 in both tables (AVX2 ones in `fast`
 * when use_avx2); their other fields are already filled. */
void gemm_float_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2);

void gemm_f32_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                   size_t bx, const void *restrict y, size_t by);
void gemm_f16_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                   size_t bx, const void *restrict y, size_t by);
void gemm_bf16_avx2(int n, int nr, int nc, float *restrict s, size_t ldc, const void *restrict x,
                    size_t bx, const void *restrict y, size_t by);

#endif
