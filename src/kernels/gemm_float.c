/* The float formats' gemm tiles in the registry: the AVX2 ones
 * (gemm_float_avx2.c) and reference tiles of one reference dot product per
 * output. */
#include "kernels/gemm.h"

#include "kernels/float_dot.h"

typedef void (*dot_fn)(int n, float *restrict s, const void *restrict x, const void *restrict y);

static void tile_by_dots(dot_fn dot, int n, int nr, int nc, float *restrict s, size_t ldc,
                         const void *x, size_t bx, const void *y, size_t by) {
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            dot(n, &s[(size_t)c * ldc + r], (const uint8_t *)x + (size_t)r * bx,
                (const uint8_t *)y + (size_t)c * by);
}

#define GEMM_FLOAT_REF(T, DOT)                                                                     \
    static void gemm_##T##_ref(int n, int nr, int nc, float *restrict s, size_t ldc,               \
                               const void *restrict x, size_t bx, const void *restrict y,          \
                               size_t by) {                                                        \
        tile_by_dots(DOT, n, nr, nc, s, ldc, x, bx, y, by);                                        \
    }

GEMM_FLOAT_REF(f32, vec_dot_f32_ref)
GEMM_FLOAT_REF(f16, vec_dot_f16_f32_ref)
GEMM_FLOAT_REF(bf16, vec_dot_bf16_f32_ref)

void gemm_float_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2) {
    static const struct {
        wtype type;
        wtype_gemm_fn gemm, gemm_fast;
    } k[] = {{WT_F32, gemm_f32_ref, gemm_f32_avx2},
             {WT_F16, gemm_f16_ref, gemm_f16_avx2},
             {WT_BF16, gemm_bf16_ref, gemm_bf16_avx2}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        wtype_traits *r = &ref[k[i].type], *f = &fast[k[i].type];
        r->gemm = f->gemm = k[i].gemm;
        r->gemm_rows = f->gemm_rows = GEMM_FLOAT_ROWS;
        r->gemm_cols = f->gemm_cols = GEMM_FLOAT_COLS;
        if (use_avx2) f->gemm = k[i].gemm_fast;
    }
}
