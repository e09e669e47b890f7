/* The x8 layout of the 32-element formats Q4_0, Q5_0 and Q8_0: eight weight
 * rows interleaved block by block, so that a one-token matmul reads one
 * sequential stream and meets eight rows per vector without a horizontal
 * reduction (gemm_x8_avx2.c). matmul repacks weights into it once, at load
 * (weight_repack); it takes exactly the bytes of the eight rows it replaces.
 *
 * Per block of 32 elements of rows 0..7 (element e of row r: q[r][e], the
 * stored level; "group k" is elements 4k..4k+3):
 *   Q8_0 (272 bytes): d[8] (f16, row order), then qs[8 groups][8 rows][4]:
 *        byte 32k + 4r + j = q[r][4k + j].
 *   Q4_0 (144 bytes): d[8], then qs[4][8][4]: byte 32k + 4r + j holds
 *        q[r][4k + j] (group k) in its low nibble and q[r][16 + 4k + j]
 *        (group k + 4) in its high nibble; that is byte 4k + j of row r's
 *        block, so a 32-byte load gives groups k and k + 4 by a mask and a
 *        shift.
 *   Q5_0 (176 bytes): d[8], then qh[8][4]: bit g of byte 4r + j is bit 4 of
 *        element 4g + j of row r (one shift and mask brings group g's high
 *        bits to bit 4 of each byte), then the low nibbles as Q4_0.
 * The scalar pack and unpack here define the layout; unpacking restores the
 * rows byte for byte. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_blocks.h"

#include <string.h>

/* ---- Q8_0 ---- */

void x8_pack_q8_0_ref(int n, const void *restrict rows, size_t bx, void *restrict out) {
    uint8_t *o = out;
    for (int b = 0; b < n / QK8_0; b++, o += X8_BLOCK_Q8_0) {
        for (int r = 0; r < 8; r++) {
            const block_q8_0 *src = (const block_q8_0 *)((const uint8_t *)rows + r * bx) + b;
            memcpy(o + 2 * r, &src->d, 2);
            for (int k = 0; k < 8; k++) memcpy(o + 16 + 32 * k + 4 * r, src->qs + 4 * k, 4);
        }
    }
}

void x8_unpack_q8_0_ref(int n, const void *restrict x8, void *restrict rows, size_t bx) {
    const uint8_t *in = x8;
    for (int b = 0; b < n / QK8_0; b++, in += X8_BLOCK_Q8_0) {
        for (int r = 0; r < 8; r++) {
            block_q8_0 *dst = (block_q8_0 *)((uint8_t *)rows + r * bx) + b;
            memcpy(&dst->d, in + 2 * r, 2);
            for (int k = 0; k < 8; k++) memcpy(dst->qs + 4 * k, in + 16 + 32 * k + 4 * r, 4);
        }
    }
}

/* ---- Q4_0 and Q5_0: the nibbles ---- */

static void pack_nibbles(const uint8_t *qs, int r, uint8_t *o) {
    for (int k = 0; k < 4; k++) memcpy(o + 32 * k + 4 * r, qs + 4 * k, 4);
}

static void unpack_nibbles_x8(const uint8_t *o, int r, uint8_t *qs) {
    for (int k = 0; k < 4; k++) memcpy(qs + 4 * k, o + 32 * k + 4 * r, 4);
}

void x8_pack_q4_0_ref(int n, const void *restrict rows, size_t bx, void *restrict out) {
    uint8_t *o = out;
    for (int b = 0; b < n / QK4_0; b++, o += X8_BLOCK_Q4_0) {
        for (int r = 0; r < 8; r++) {
            const block_q4_0 *src = (const block_q4_0 *)((const uint8_t *)rows + r * bx) + b;
            memcpy(o + 2 * r, &src->d, 2);
            pack_nibbles(src->qs, r, o + 16);
        }
    }
}

void x8_unpack_q4_0_ref(int n, const void *restrict x8, void *restrict rows, size_t bx) {
    const uint8_t *in = x8;
    for (int b = 0; b < n / QK4_0; b++, in += X8_BLOCK_Q4_0) {
        for (int r = 0; r < 8; r++) {
            block_q4_0 *dst = (block_q4_0 *)((uint8_t *)rows + r * bx) + b;
            memcpy(&dst->d, in + 2 * r, 2);
            unpack_nibbles_x8(in + 16, r, dst->qs);
        }
    }
}

void x8_pack_q5_0_ref(int n, const void *restrict rows, size_t bx, void *restrict out) {
    uint8_t *o = out;
    for (int b = 0; b < n / QK5_0; b++, o += X8_BLOCK_Q5_0) {
        for (int r = 0; r < 8; r++) {
            const block_q5_0 *src = (const block_q5_0 *)((const uint8_t *)rows + r * bx) + b;
            uint32_t qh;
            memcpy(&qh, src->qh, 4);
            memcpy(o + 2 * r, &src->d, 2);
            for (int j = 0; j < 4; j++) {
                uint8_t byte = 0;
                for (int g = 0; g < 8; g++) byte |= (uint8_t)(((qh >> (4 * g + j)) & 1u) << g);
                o[16 + 4 * r + j] = byte;
            }
            pack_nibbles(src->qs, r, o + 48);
        }
    }
}

void x8_unpack_q5_0_ref(int n, const void *restrict x8, void *restrict rows, size_t bx) {
    const uint8_t *in = x8;
    for (int b = 0; b < n / QK5_0; b++, in += X8_BLOCK_Q5_0) {
        for (int r = 0; r < 8; r++) {
            block_q5_0 *dst = (block_q5_0 *)((uint8_t *)rows + r * bx) + b;
            uint32_t qh = 0;
            for (int j = 0; j < 4; j++)
                for (int g = 0; g < 8; g++) qh |= (uint32_t)((in[16 + 4 * r + j] >> g) & 1u) << (4 * g + j);
            memcpy(&dst->d, in + 2 * r, 2);
            memcpy(dst->qh, &qh, 4);
            unpack_nibbles_x8(in + 48, r, dst->qs);
        }
    }
}

/* ---- Q4_K (1184 bytes per 8 rows: the 6-bit scales and mins as bytes) ----
 *   d[8], dmin[8] (f16), sc[8 sub-blocks][8 rows], m[8][8] (bytes), then
 *   qs[4 chunks c][8 groups k][8 rows][4]: byte 160 + 256c + 32k + 4r + j is
 *   byte 32c + 4k + j of row r's qs: its low nibble is element 64c + 4k + j
 *   (sub-block 2c, group k), its high nibble element 64c + 32 + 4k + j
 *   (sub-block 2c + 1, group k). */

void x8_pack_q4_K_ref(int n, const void *restrict rows, size_t bx, void *restrict out) {
    uint8_t *o = out;
    for (int b = 0; b < n / QK_K; b++, o += X8_BLOCK_Q4_K) {
        for (int r = 0; r < 8; r++) {
            const block_q4_K *src = (const block_q4_K *)((const uint8_t *)rows + r * bx) + b;
            memcpy(o + 2 * r, &src->d, 2);
            memcpy(o + 16 + 2 * r, &src->dmin, 2);
            for (int j = 0; j < 8; j++) k4_scale_min(j, src->scales, &o[32 + 8 * j + r], &o[96 + 8 * j + r]);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 8; k++) memcpy(o + 160 + 256 * c + 32 * k + 4 * r, src->qs + 32 * c + 4 * k, 4);
        }
    }
}

/* The 12-byte packing of k4_scale_min, inverted. */
static void k4_pack_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12]) {
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

void x8_unpack_q4_K_ref(int n, const void *restrict x8, void *restrict rows, size_t bx) {
    const uint8_t *in = x8;
    for (int b = 0; b < n / QK_K; b++, in += X8_BLOCK_Q4_K) {
        for (int r = 0; r < 8; r++) {
            block_q4_K *dst = (block_q4_K *)((uint8_t *)rows + r * bx) + b;
            uint8_t sc[8], m[8];
            for (int j = 0; j < 8; j++) sc[j] = in[32 + 8 * j + r], m[j] = in[96 + 8 * j + r];
            memcpy(&dst->d, in + 2 * r, 2);
            memcpy(&dst->dmin, in + 16 + 2 * r, 2);
            k4_pack_scales(sc, m, dst->scales);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 8; k++) memcpy(dst->qs + 32 * c + 4 * k, in + 160 + 256 * c + 32 * k + 4 * r, 4);
        }
    }
}

/* ---- Q6_K (1680 bytes per 8 rows) ----
 * Level q (0..63) of element e = 4g + j (group g = 0..63) of row r:
 *   d[8] (f16);
 *   sc[8 pairs p][8 rows][2] (int8): byte 16 + 16p + 2r + i = scale 2p + i;
 *   ql[32 vectors v][8 rows][4]: byte 144 + 32v + 4r + j holds q's low 4 bits
 *     for group v in its low nibble, for group v + 32 in its high nibble;
 *   qh[16 vectors u][8 rows][4]: bits 2i..2i+1 of byte 1168 + 32u + 4r + j
 *     are q's top 2 bits for group u + 16i. */

static void q6k_set_level(block_q6_K *b, int e, int q) {
    const int h = e / 128, l = e % 32, k = (e % 128) / 32;
    uint8_t *lo = &b->ql[64 * h + l + 32 * (k & 1)], *hi = &b->qh[32 * h + l];
    const int ls = 4 * (k >= 2), hs = 2 * k;
    *lo = (uint8_t)((*lo & ~(0xF << ls)) | ((q & 0xF) << ls));
    *hi = (uint8_t)((*hi & ~(3 << hs)) | (((q >> 4) & 3) << hs));
}

/* The 256 levels (0..63) of a Q6_K block in element order, by halves of 128:
 * element 128h + 32k + l has its low 4 bits in ql[64h + l + 32 (k & 1)]
 * (the high nibble for k >= 2) and its top 2 bits at bit 2k of
 * qh[32h + l], as q6k_set_level writes them. */
static void q6k_levels(const block_q6_K *b, uint8_t q[QK_K]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        uint8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (uint8_t)((ql[l] & 0xF) | ((qh[l] & 3) << 4));
            o[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            o[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            o[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
    }
}

void x8_pack_q6_K_ref(int n, const void *restrict rows, size_t bx, void *restrict out) {
    uint8_t *o = out;
    for (int b = 0; b < n / QK_K; b++, o += X8_BLOCK_Q6_K) {
        for (int r = 0; r < 8; r++) {
            const block_q6_K *src = (const block_q6_K *)((const uint8_t *)rows + r * bx) + b;
            memcpy(o + 2 * r, &src->d, 2);
            for (int s = 0; s < 16; s++) o[16 + 16 * (s / 2) + 2 * r + s % 2] = (uint8_t)src->scales[s];
            uint8_t q[QK_K];
            q6k_levels(src, q);
            /* element e = 4g + j: low bits of groups g and g + 32 share a byte, top bits of
             * groups u, u + 16, u + 32 and u + 48 another */
            for (int g = 0; g < 32; g++)
                for (int j = 0; j < 4; j++)
                    o[144 + 32 * g + 4 * r + j] = (uint8_t)((q[4 * g + j] & 0xF) | ((q[4 * (g + 32) + j] & 0xF) << 4));
            for (int u = 0; u < 16; u++)
                for (int j = 0; j < 4; j++)
                    o[1168 + 32 * u + 4 * r + j] =
                        (uint8_t)((q[4 * u + j] >> 4) | ((q[4 * (u + 16) + j] >> 4) << 2) |
                                  ((q[4 * (u + 32) + j] >> 4) << 4) | ((q[4 * (u + 48) + j] >> 4) << 6));
        }
    }
}

void x8_unpack_q6_K_ref(int n, const void *restrict x8, void *restrict rows, size_t bx) {
    const uint8_t *in = x8;
    for (int b = 0; b < n / QK_K; b++, in += X8_BLOCK_Q6_K) {
        for (int r = 0; r < 8; r++) {
            block_q6_K *dst = (block_q6_K *)((uint8_t *)rows + r * bx) + b;
            memcpy(&dst->d, in + 2 * r, 2);
            for (int s = 0; s < 16; s++) dst->scales[s] = (int8_t)in[16 + 16 * (s / 2) + 2 * r + s % 2];
            for (int e = 0; e < QK_K; e++) {
                const int g = e / 4, j = e % 4;
                const int lo = (in[144 + 32 * (g % 32) + 4 * r + j] >> (4 * (g / 32))) & 0xF;
                const int hi = (in[1168 + 32 * (g % 16) + 4 * r + j] >> (2 * (g / 16))) & 3;
                q6k_set_level(dst, e, lo | (hi << 4));
            }
        }
    }
}

/* ---- Q5_K (1440 bytes per 8 rows): Q4_K's x8 block with the high bits ----
 *   d[8], dmin[8], sc[8][8], m[8][8] as Q4_K, then qh[8 groups k][8 rows][4]:
 *   byte 160 + 32k + 4r + j is qh[4k + j] of row r, whose bit s is bit 4 of
 *   element 32s + 4k + j (sub-block s, group k); then the nibbles as Q4_K at
 *   416. */

void x8_pack_q5_K_ref(int n, const void *restrict rows, size_t bx, void *restrict out) {
    uint8_t *o = out;
    for (int b = 0; b < n / QK_K; b++, o += X8_BLOCK_Q5_K) {
        for (int r = 0; r < 8; r++) {
            const block_q5_K *src = (const block_q5_K *)((const uint8_t *)rows + r * bx) + b;
            memcpy(o + 2 * r, &src->d, 2);
            memcpy(o + 16 + 2 * r, &src->dmin, 2);
            for (int j = 0; j < 8; j++) k4_scale_min(j, src->scales, &o[32 + 8 * j + r], &o[96 + 8 * j + r]);
            for (int k = 0; k < 8; k++) memcpy(o + 160 + 32 * k + 4 * r, src->qh + 4 * k, 4);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 8; k++) memcpy(o + 416 + 256 * c + 32 * k + 4 * r, src->qs + 32 * c + 4 * k, 4);
        }
    }
}

void x8_unpack_q5_K_ref(int n, const void *restrict x8, void *restrict rows, size_t bx) {
    const uint8_t *in = x8;
    for (int b = 0; b < n / QK_K; b++, in += X8_BLOCK_Q5_K) {
        for (int r = 0; r < 8; r++) {
            block_q5_K *dst = (block_q5_K *)((uint8_t *)rows + r * bx) + b;
            uint8_t sc[8], m[8];
            for (int j = 0; j < 8; j++) sc[j] = in[32 + 8 * j + r], m[j] = in[96 + 8 * j + r];
            memcpy(&dst->d, in + 2 * r, 2);
            memcpy(&dst->dmin, in + 16 + 2 * r, 2);
            k4_pack_scales(sc, m, dst->scales);
            for (int k = 0; k < 8; k++) memcpy(dst->qh + 4 * k, in + 160 + 32 * k + 4 * r, 4);
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < 8; k++) memcpy(dst->qs + 32 * c + 4 * k, in + 416 + 256 * c + 32 * k + 4 * r, 4);
        }
    }
}
