/* The float formats' gemm tiles in the registry: the AVX2 ones
 * (gemm_float_avx2.c) and the reference ones (gemm_ref.c). */
#include "kernels/gemm.h"

void gemm_float_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2) {
    static const struct {
        wtype type;
        wtype_gemm_fn gemm, gemm_fast;
    } k[] = {{WT_F32, gemm_f32_f32_ref, gemm_f32_f32_avx2},
             {WT_F16, gemm_f16_f32_ref, gemm_f16_f32_avx2},
             {WT_BF16, gemm_bf16_f32_ref, gemm_bf16_f32_avx2}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        wtype_traits *r = &ref[k[i].type], *f = &fast[k[i].type];
        r->gemm = f->gemm = k[i].gemm;
        r->gemm_rows = f->gemm_rows = GEMM_FLOAT_ROWS;
        r->gemm_cols = f->gemm_cols = GEMM_FLOAT_COLS;
        if (use_avx2) f->gemm = k[i].gemm_fast;
    }
}
