/* How one KV row (one token's K, or V, of one kv head: head_dim values) is
 * stored in the cache, for each KV cache dtype. The attention kernels read
 * rows in place through these definitions; model/forward.c writes them.
 *
 *   f32, f16, bf16   head_dim values, 4 or 2 bytes each
 *   int8             [f32 scale][head_dim int8 codes]: x = scale * code,
 *                    scale = max|x| / 127, codes rounded to nearest in -127..127
 *   fp8_e4m3         [f32 scale][head_dim E4M3 codes]: x = scale * e4m3(code),
 *                    scale = max|x| / 448 (util/fp8.h)
 *   fp8_e5m2         [f32 scale][head_dim E5M2 codes], scale = max|x| / 57344
 *
 * A row holding a NaN gets a NaN scale, so all of it decodes to NaN.
 *
 * The scale is per token and kv head (per row), not per block: a row's bytes
 * then depend on that row alone, so a token is stored the same whatever else
 * shares its block or its batch, and the engine's identity (alone = batched
 * = chunked = prefix-cached = preempted) holds in 8 bits too; a per-block
 * scale fixed by the block's first writer would not give that. It costs 4
 * bytes per head_dim codes: 3.1% at head_dim 128, 1.6% at gemma-3's 256,
 * so a token takes 0.52 (0.51) of its f16 bytes. */
#ifndef CLLM_KERNELS_KV_ROW_H
#define CLLM_KERNELS_KV_ROW_H

#include "util/fp16.h"
#include "util/fp8.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { KV_F32 = 0, KV_F16, KV_BF16, KV_FP8_E4M3, KV_FP8_E5M2, KV_INT8, KV_DTYPE_COUNT } kv_dtype;

/* Bytes before the codes of an 8-bit row: its f32 scale. */
#define KV_ROW_SCALE_BYTES 4

static inline int kv_dtype_is_8bit(kv_dtype t) { return t == KV_FP8_E4M3 || t == KV_FP8_E5M2 || t == KV_INT8; }

static inline size_t kv_row_bytes(kv_dtype t, int dim) {
    if (kv_dtype_is_8bit(t)) return KV_ROW_SCALE_BYTES + (size_t)dim;
    return (size_t)dim * (t == KV_F32 ? 4 : 2);
}

static inline float kv_row_scale(const uint8_t *row) {
    float s;
    memcpy(&s, row, sizeof s);
    return s;
}

/* Value i of a row as a float: the definition every kernel matches bit for
 * bit (an 8-bit value is its decoded code times the scale, one f32 rounding). */
static inline float kv_row_value(kv_dtype t, const uint8_t *row, int i) {
    switch (t) {
    case KV_F32: {
        float x;
        memcpy(&x, row + 4 * (size_t)i, sizeof x);
        return x;
    }
    case KV_F16: return f16_to_f32((f16_t)(row[2 * i] | row[2 * i + 1] << 8));
    case KV_BF16: return bf16_to_f32((bf16_t)(row[2 * i] | row[2 * i + 1] << 8));
    case KV_INT8: return (float)(int8_t)row[KV_ROW_SCALE_BYTES + i] * kv_row_scale(row);
    case KV_FP8_E4M3: return fp8_e4m3_to_f32(row[KV_ROW_SCALE_BYTES + i]) * kv_row_scale(row);
    case KV_FP8_E5M2: return fp8_e5m2_to_f32(row[KV_ROW_SCALE_BYTES + i]) * kv_row_scale(row);
    default: return 0;
    }
}

/* Stores x[0 .. dim) as one row of type t at row (kv_row_bytes(t, dim) bytes).
 * Depends on x alone (see above). */
void kv_row_store(kv_dtype t, const float *x, uint8_t *row, int dim);

#endif
