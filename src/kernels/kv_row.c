/* Writing KV rows; the layout and the choice of a scale per row are in kv_row.h. */
#include "kernels/kv_row.h"

#include "kernels/wtype.h"

#include <math.h>
#include <stdbool.h>

/* Largest magnitude of the codes an 8-bit row uses: max|x| maps to it. */
static float code_max(kv_dtype t) {
    if (t == KV_INT8) return 127.0f;
    return t == KV_FP8_E4M3 ? FP8_E4M3_MAX : FP8_E5M2_MAX;
}

static uint8_t encode(kv_dtype t, float y) {
    if (t == KV_FP8_E4M3) return f32_to_fp8_e4m3(y);
    if (t == KV_FP8_E5M2) return f32_to_fp8_e5m2(y);
    const float r = nearbyintf(y); /* ties to even; |y| <= 127 but for rounding of the scale */
    return (uint8_t)(int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
}

static void store_8bit(kv_dtype t, const float *x, uint8_t *row, int dim) {
    float amax = 0;
    bool has_nan = false;
    for (int i = 0; i < dim; i++) amax = fmaxf(amax, fabsf(x[i])), has_nan |= isnan(x[i]);
    /* A row with a NaN decodes to NaN throughout, as its f16 row would make
     * every score with it NaN; so no kernel has to decode a NaN code. */
    const float scale = has_nan ? NAN : amax / code_max(t);
    memcpy(row, &scale, sizeof scale);
    uint8_t *codes = row + KV_ROW_SCALE_BYTES;
    for (int i = 0; i < dim; i++) codes[i] = scale > 0 ? encode(t, x[i] / scale) : 0; /* false for NaN */
}

void kv_row_store(kv_dtype t, const float *x, uint8_t *row, int dim) {
    /* The float types through the weight-type converters (F16C where the CPU
     * has it; the same rounding as the scalar ones). */
    switch (t) {
    case KV_F32: memcpy(row, x, sizeof(float) * (size_t)dim); break;
    case KV_F16: wtype_get(WT_F16)->from_float(x, row, dim); break;
    case KV_BF16: wtype_get(WT_BF16)->from_float(x, row, dim); break;
    default: store_8bit(t, x, row, dim); break;
    }
}
