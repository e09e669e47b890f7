/* Block layouts of the GGUF quantized formats, byte for byte as ggml writes
 * them (ggml-common.h), so a tensor in a GGUF file can be cast to an array of
 * these structs. Every struct is a multiple of 2 bytes with 2-byte alignment
 * (Q8_K: 4), and GGUF aligns tensor data to 32, so the f16 fields can be read
 * directly. Scales are IEEE f16 bit patterns (f16_t); a weight is
 * dequantized as d * q (symmetric types) or d * q - m / d * q + m (types with
 * a min), with q the small integer stored in the block.
 *
 * Also here: the few small helpers that the kernel files share (the 6-bit
 * scale unpacking of Q4_K/Q5_K and Q3_K, rounding, the signed max). */
#ifndef CLLM_KERNELS_QUANTS_BLOCKS_H
#define CLLM_KERNELS_QUANTS_BLOCKS_H

#include "util/fp16.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* x = d * (q - 8), q in [0, 15]; element j in the low nibble of qs[j],
 * element j + 16 in the high nibble. */
typedef struct {
    f16_t d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

/* x = d * q + m, q in [0, 15]; nibble order as Q4_0. */
typedef struct {
    f16_t d;
    f16_t m;
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

/* x = d * (q - 16), q in [0, 31]; low 4 bits as Q4_0, bit 4 of element j is
 * bit j of the little-endian u32 qh. */
typedef struct {
    f16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

/* x = d * q + m, q in [0, 31]; bits as Q5_0. */
typedef struct {
    f16_t d;
    f16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

/* MXFP4 (OCP microscaling, gpt-oss's experts): x = E2M1(q) * 2^(e - 127), an
 * 8-bit shared exponent e per 32 and 4-bit floats q (sign bit 3; magnitudes
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6); element j in the low nibble of qs[j],
 * element j + 16 in the high nibble, as Q4_0. */
#define QK_MXFP4 32
typedef struct {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
} block_mxfp4;

/* x = d * q. As a weight q may be -128..127; our quantizers write -127..127,
 * and the AVX2 dot products rely on that for activations. */
typedef struct {
    f16_t d;
    int8_t qs[QK8_0];
} block_q8_0;

/* Activation format for Q4_1/Q5_1: as Q8_0 plus s = d * sum(qs), so the
 * weight's min term costs one multiply per block. */
typedef struct {
    f16_t d;
    f16_t s;
    int8_t qs[QK8_1];
} block_q8_1;

/* 16 sub-blocks of 16: x = d * sc * q - dmin * m, q in [0, 3], sc and m the
 * low and high nibbles of scales[j]. qs: 2 halves of 128; in each, byte l holds
 * elements l, l + 32, l + 64, l + 96 in bits 0-1, 2-3, 4-5, 6-7. */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    f16_t d;
    f16_t dmin;
} block_q2_K;

/* 16 sub-blocks of 16: x = d * (sc - 32) * (q - 4 * !hbit), q's low 2 bits laid
 * out as Q2_K; the high bit of element e is bit (e / 32) of hmask[e % 32].
 * The 16 6-bit scales are packed in 12 bytes (see q3k_unpack_scales). */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    f16_t d;
} block_q3_K;

/* 8 sub-blocks of 32: x = d * sc * q - dmin * m, q in [0, 15], 6-bit sc and m
 * packed in 12 bytes (see k4_scale_min). qs: 4 chunks of 32 bytes; chunk c
 * holds elements 64c + l (low nibble) and 64c + 32 + l (high nibble). */
typedef struct {
    f16_t d;
    f16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;

/* As Q4_K with a fifth bit: bit 4 of element 32s + l is bit s of qh[l]. */
typedef struct {
    f16_t d;
    f16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

/* 16 sub-blocks of 16: x = d * sc * (q - 32), q in [0, 63], sc int8. In each
 * half of 128 (ql 64 bytes, qh 32 bytes), element 32k + l has its low nibble
 * in ql[l + 32 * (k & 1)] (low nibble for k < 2, high for k >= 2) and its top
 * 2 bits in bits 2k..2k+1 of qh[l]. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    f16_t d;
} block_q6_K;

/* Activation format of the K-quants: f32 scale, -127..127 quants, and the sum
 * of each group of 16 quants (for the min / offset terms of the weights). */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");

/* Scale j (0..7) and min j of a Q4_K/Q5_K block. Bytes 0-3 hold sc[0..3] in
 * their low 6 bits, bytes 4-7 m[0..3]; sc[4..7] and m[4..7] keep their low 4
 * bits in the nibbles of bytes 8-11 and their top 2 bits in the spare top bits
 * of bytes 0-3 (scales) and 4-7 (mins). */
static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales then all 8 mins of a Q4_K/Q5_K block, as 16 bytes (the form
 * the AVX2 kernels widen to 16-bit lanes). */
static inline void k4_unpack_scales(const uint8_t *q, uint8_t out[16]) {
    for (int j = 0; j < 8; j++)
        k4_scale_min(j, q, &out[j], &out[8 + j]);
}

/* The 16 signed scales (sc - 32, in -32..31) of a Q3_K block. Scale j keeps its
 * low 4 bits in nibble (j / 8) of byte (j % 8) and its top 2 bits in bits
 * 2*(j / 4)..+1 of byte 8 + j % 4. */
static inline void q3k_unpack_scales(const uint8_t *q, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = (q[j % 8] >> (4 * (j / 8))) & 0xF;
        int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* Round to nearest, ties to even, for |f| < 2^22 (callers clamp or bound
 * their inputs): adding 1.5 * 2^23 puts the integer in the low mantissa bits.
 * The same rounding as the AVX2 conversions, independent of libm. */
static inline int quant_nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* The element of largest magnitude, with its sign (the first on ties); 0 for
 * an all-zero group. Symmetric quantizers scale by it. */
static inline float quant_signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    return max;
}

static inline uint32_t load_u32_le(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#endif
