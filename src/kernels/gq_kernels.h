/* Prototypes of the GQ formats' kernels (format/qgroup.h), for the
 * registry tables and the kernel tests; the naming is quants_kernels.h's,
 * with gq<bits>_<group> for the weight type (gq4_g128 is GQ4_G128, gq8_row is
 * GQ8_ROW). The function types carry no type id, so each type has its own
 * entry points, each a call of the shared body with its bits and group. */
#ifndef CLLM_KERNELS_GQ_KERNELS_H
#define CLLM_KERNELS_GQ_KERNELS_H

#include "format/qgroup.h"

#include <stddef.h>
#include <stdint.h>

/* The GQ type ids by name, for the registry tables: gq_type(bits, group
 * code) of qgroup.h, i.e. WT_GQ_BASE + 4 * (index of bits) + group code. */
enum {
    WT_GQ2_G32 = WT_GQ_BASE,
    WT_GQ2_G64,
    WT_GQ2_G128,
    WT_GQ2_ROW,
    WT_GQ3_G32,
    WT_GQ3_G64,
    WT_GQ3_G128,
    WT_GQ3_ROW,
    WT_GQ4_G32,
    WT_GQ4_G64,
    WT_GQ4_G128,
    WT_GQ4_ROW,
    WT_GQ8_G32,
    WT_GQ8_G64,
    WT_GQ8_G128,
    WT_GQ8_ROW,
};
_Static_assert(WT_GQ8_ROW == WT_GQ_BASE + WT_GQ_COUNT - 1 &&
                   WT_GQ4_G128 - WT_GQ_BASE == 4 * 2 + GQ_GROUP_128,
               "the GQ ids of qgroup.h's gq_type()");

/* Tile shape of the AVX2 GQ tiles (gq_avx2.c). */
#define GQ_TILE_ROWS 4
#define GQ_TILE_COLS 4

/* gq_ref.c */
void gq2_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq2_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq2_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq2_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq2_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq2_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq2_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq2_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq2_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gq2_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq2_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq2_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq3_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq3_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq3_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq3_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq3_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq3_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq3_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq3_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq3_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gq3_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq3_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq3_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq4_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq4_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq4_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq4_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq4_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq4_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq4_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq4_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq4_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gq4_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq4_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq4_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq8_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq8_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq8_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq8_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq8_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq8_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);
void gq8_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq8_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq8_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gq8_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n);
void gq8_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n);
void vec_dot_gq8_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y);

/* gq_avx2.c */
void vec_dot_gq2_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq2_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq2_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq2_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq2_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y);
void gemm_gq2_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq2_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq2_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq3_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq3_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq3_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq3_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq3_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y);
void gemm_gq3_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq3_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq3_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq4_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq4_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq4_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq4_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq4_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y);
void gemm_gq4_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq4_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq4_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq8_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq8_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq8_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq8_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq8_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y);
void gemm_gq8_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by);
void vec_dot_gq8_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y);
void gemm_gq8_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by);

#endif
