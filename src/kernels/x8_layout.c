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
