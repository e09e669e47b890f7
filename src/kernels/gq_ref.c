/* Scalar reference of the GQ formats (format/qgroup.h; names, row sizes and
 * chunk packing are in format/gq_layout.c): the dequantizer, the
 * round-to-nearest quantizer, and the dot product against Q8_1 activations
 * that defines the value the AVX2 kernels must compute. The registry's
 * per-type entry points are at the end: the function types carry no type id,
 * so each (bits, group) pair has its own, a call of the shared body. */
#include "kernels/gq.h"

#include "kernels/gq_kernels.h"

#include "kernels/quants_blocks.h"
#include "util/fp16.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---- round to nearest ---- */

void gq_group_params(int bits, bool sym, const float *x, int64_t n, float *d, int *z) {
    const int qmax = (1 << bits) - 1;
    if (sym) {
        /* The signed extreme lands on level 0, i.e. d * (0 - z) = max. */
        *z = 1 << (bits - 1);
        *d = f16_to_f32(f32_to_f16(quant_signed_absmax(x, (int)n) / (float)-*z));
        return;
    }
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    float s = f16_to_f32(f32_to_f16((hi - lo) / (float)qmax));
    if (s == 0.0f) {
        *d = 0;
        *z = 0;
        return;
    }
    int zz = (int)lrintf(-lo / s);
    *z = zz < 0 ? 0 : zz > qmax ? qmax : zz;
    *d = s;
}

void gq_quantize_row(uint32_t t, const float *x, void *dst, int64_t n, bool sym) {
    const int bits = gq_type_bits(t);
    const int64_t g = gq_type_group(t, n);
    const size_t bb = gq_block_bytes(bits, g);
    uint8_t q[GQ_CHUNK];
    for (int64_t b = 0; b < n / g; b++) {
        const float *xg = x + b * g;
        uint8_t *blk = (uint8_t *)dst + b * bb;
        float d;
        int z;
        gq_group_params(bits, sym, xg, g, &d, &z);
        const f16_t d16 = f32_to_f16(d);
        memcpy(blk, &d16, 2);
        blk[2] = (uint8_t)z;
        blk[3] = 0;
        for (int64_t c = 0; c < g / GQ_CHUNK; c++) {
            for (int j = 0; j < GQ_CHUNK; j++)
                q[j] = (uint8_t)gq_level(xg[c * GQ_CHUNK + j], d, z, bits);
            gq_pack_chunk(bits, q, blk + GQ_BLOCK_HEADER + c * bits * 4);
        }
    }
}

/* ---- dequantize and dot (generic over bits and group) ---- */

static void to_float(int bits, int64_t g, const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    const size_t bb = gq_block_bytes(bits, g);
    uint8_t q[GQ_CHUNK];
    for (int64_t b = 0; b < n / g; b++, x += bb) {
        f16_t d16;
        memcpy(&d16, x, 2);
        const float d = f16_to_f32(d16);
        const int z = x[2];
        for (int64_t c = 0; c < g / GQ_CHUNK; c++, y += GQ_CHUNK) {
            gq_unpack_chunk(bits, x + GQ_BLOCK_HEADER + c * bits * 4, q);
            for (int j = 0; j < GQ_CHUNK; j++)
                y[j] = d * (float)(q[j] - z);
        }
    }
}

static void dot(int bits, int64_t g, int n, float *s, const void *vx, const void *vy) {
    const uint8_t *x = vx;
    const block_q8_1 *y = vy;
    const size_t bb = gq_block_bytes(bits, g);
    const int o = bits == 8 ? 128 : 0; /* level offset: see qgroup.h */
    uint8_t q[GQ_CHUNK];
    double acc = 0;
    for (int64_t b = 0; b < n / g; b++, x += bb) {
        f16_t d16;
        memcpy(&d16, x, 2);
        double qy = 0, ys = 0;
        for (int64_t c = 0; c < g / GQ_CHUNK; c++, y++) {
            gq_unpack_chunk(bits, x + GQ_BLOCK_HEADER + c * bits * 4, q);
            int isum = 0;
            for (int j = 0; j < GQ_CHUNK; j++)
                isum += (q[j] - o) * y->qs[j];
            qy += (double)f16_to_f32(y->d) * isum;
            ys += f16_to_f32(y->s);
        }
        acc += (double)f16_to_f32(d16) * (qy - (x[2] - o) * ys);
    }
    *s = (float)acc;
}

/* ---- per-type entry points ---- */

/* 2 bits */

void gq2_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(2, 32, x, y, n);
}

void gq2_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(2, GQ_GROUP_32), x, y, n, false);
}

void vec_dot_gq2_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(2, 32, n, s, x, y);
}

void gq2_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(2, 64, x, y, n);
}

void gq2_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(2, GQ_GROUP_64), x, y, n, false);
}

void vec_dot_gq2_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(2, 64, n, s, x, y);
}

void gq2_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(2, 128, x, y, n);
}

void gq2_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(2, GQ_GROUP_128), x, y, n, false);
}

void vec_dot_gq2_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    dot(2, 128, n, s, x, y);
}

void gq2_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(2, n, x, y, n);
}

void gq2_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(2, GQ_GROUP_ROW), x, y, n, false);
}

void vec_dot_gq2_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(2, n, n, s, x, y);
}

/* 3 bits */

void gq3_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(3, 32, x, y, n);
}

void gq3_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(3, GQ_GROUP_32), x, y, n, false);
}

void vec_dot_gq3_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(3, 32, n, s, x, y);
}

void gq3_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(3, 64, x, y, n);
}

void gq3_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(3, GQ_GROUP_64), x, y, n, false);
}

void vec_dot_gq3_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(3, 64, n, s, x, y);
}

void gq3_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(3, 128, x, y, n);
}

void gq3_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(3, GQ_GROUP_128), x, y, n, false);
}

void vec_dot_gq3_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    dot(3, 128, n, s, x, y);
}

void gq3_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(3, n, x, y, n);
}

void gq3_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(3, GQ_GROUP_ROW), x, y, n, false);
}

void vec_dot_gq3_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(3, n, n, s, x, y);
}

/* 4 bits */

void gq4_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(4, 32, x, y, n);
}

void gq4_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(4, GQ_GROUP_32), x, y, n, false);
}

void vec_dot_gq4_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(4, 32, n, s, x, y);
}

void gq4_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(4, 64, x, y, n);
}

void gq4_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(4, GQ_GROUP_64), x, y, n, false);
}

void vec_dot_gq4_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(4, 64, n, s, x, y);
}

void gq4_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(4, 128, x, y, n);
}

void gq4_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(4, GQ_GROUP_128), x, y, n, false);
}

void vec_dot_gq4_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    dot(4, 128, n, s, x, y);
}

void gq4_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(4, n, x, y, n);
}

void gq4_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(4, GQ_GROUP_ROW), x, y, n, false);
}

void vec_dot_gq4_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(4, n, n, s, x, y);
}

/* 8 bits */

void gq8_g32_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(8, 32, x, y, n);
}

void gq8_g32_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(8, GQ_GROUP_32), x, y, n, false);
}

void vec_dot_gq8_g32_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(8, 32, n, s, x, y);
}

void gq8_g64_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(8, 64, x, y, n);
}

void gq8_g64_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(8, GQ_GROUP_64), x, y, n, false);
}

void vec_dot_gq8_g64_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(8, 64, n, s, x, y);
}

void gq8_g128_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(8, 128, x, y, n);
}

void gq8_g128_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(8, GQ_GROUP_128), x, y, n, false);
}

void vec_dot_gq8_g128_q8_1_ref(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    dot(8, 128, n, s, x, y);
}

void gq8_row_to_float_ref(const void *restrict x, float *restrict y, int64_t n) {
    to_float(8, n, x, y, n);
}

void gq8_row_from_float_ref(const float *restrict x, void *restrict y, int64_t n) {
    gq_quantize_row((uint32_t)gq_type(8, GQ_GROUP_ROW), x, y, n, false);
}

void vec_dot_gq8_row_q8_1_ref(int n, float *restrict s, const void *restrict x,
                              const void *restrict y) {
    dot(8, n, n, s, x, y);
}
