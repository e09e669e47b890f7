/* cllm's own group-quantized weight formats ("GQ"), for what standard GGUF
 * types cannot hold exactly: GPTQ/AWQ checkpoints (b-bit integers, a scale and
 * an integer zero point per group of g input columns) and `cllm quantize`
 * output at 8/4/3/2 bits with group sizes 32/64/128 or one group per row.
 *
 * Value of element j of a group:  w = d * (q_j - z),  q_j in [0, 2^bits),
 * d an f16 scale and z an unsigned 8-bit zero point (symmetric quantization
 * stores z = 2^(bits-1)). Storing the zero as an integer keeps GPTQ/AWQ
 * weights exact.
 *
 * Block layout (little-endian), one block per group of `g` elements (g a
 * multiple of 32):
 *     f16  d
 *     u8   z
 *     u8   pad (0)
 *     q    g / 32 chunks of 32 elements, bits * 4 bytes each. Within a chunk:
 *          8 bits: byte i = q_i
 *          4 bits: byte i = q_i | q_(i+16) << 4            (i < 16; as Q4_0)
 *          2 bits: byte i = q_i | q_(i+8) << 2 | q_(i+16) << 4 | q_(i+24) << 6
 *                                                          (i < 8)
 *          3 bits: 8 bytes holding the low 2 bits of each q as the 2-bit
 *                  layout, then a little-endian u32 whose bit j is bit 2 of q_j
 *          (A chunk is what one AVX2 register unpacks with shifts and masks,
 *          in element order; an earlier draft of this spec packed a plain bit
 *          stream, which needs shuffles and multiplies per chunk to unpack.)
 * Block bytes: GQ_BLOCK_HEADER + bits * g / 8 (4-bit g128: 68 bytes, 4.25
 * bits per weight).
 *
 * Type ids start at WT_GQ_BASE (outside ggml's range); the id encodes bits and
 * group size, see gq_type(). The per-row variant ("group = -1", GQ_GROUP_ROW)
 * has one block per row, g = the row length: its registry entry has
 * block_size 0, its kernels take exactly one row per call, and
 * wtype_row_size(t, n) = 4 + bits * n / 8 for any n that is a multiple of 32.
 *
 * Dot products pair these weights with Q8_1 activations (32-element blocks:
 * f16 scale dy, f16 s = dy * sum of the block's int8 quants). A group is a
 * whole number of activation blocks, so per group
 *     sum_j w_j y_j = d * (sum_c dy_c * sum_{j in c} (q_j - o) y_j - (z - o) * sum_c s_c)
 * with exact integer inner sums and o = 128 for 8 bits (levels as signed
 * bytes; exact for symmetric 8-bit, whose z is 128), 0 otherwise. Only the
 * zero-point term goes through the f16-rounded s, as Q4_1's min does. The
 * scalar reference (gq_ref.c) defines this value and the AVX2 kernels
 * (gq_avx2.c) compute the same sum.
 *
 * GGUF files using these types are cllm's own: llama.cpp cannot read them.
 * Tensors quantized with act-order (GPTQ desc_act) are stored with their input
 * columns permuted so groups are contiguous, plus an I32 tensor
 * "<name>.perm" giving, for stored column k, the original column perm[k]; the
 * matmul gathers the activations through it (weight.perm in matmul.h). */
#ifndef CLLM_FORMAT_QGROUP_H
#define CLLM_FORMAT_QGROUP_H

#include <stdbool.h>
#include <stdint.h>

#define WT_GQ_BASE 100
#define WT_GQ_COUNT 16

/* Group sizes encoded in a type id; GQ_GROUP_ROW means one group per row. */
enum { GQ_GROUP_32 = 0, GQ_GROUP_64 = 1, GQ_GROUP_128 = 2, GQ_GROUP_ROW = 3 };

#define GQ_BLOCK_HEADER 4 /* f16 d, u8 z, u8 pad */
#define GQ_CHUNK 32       /* elements per packed chunk and per activation block */

/* bits in {2, 3, 4, 8} -> index 0..3; id = WT_GQ_BASE + bits_index * 4 + group code.
 * -1 for other bit widths or group codes. */
static inline int gq_type(int bits, int group_code) {
    const int bi = bits == 2 ? 0 : bits == 3 ? 1 : bits == 4 ? 2 : bits == 8 ? 3 : -1;
    if (bi < 0 || group_code < GQ_GROUP_32 || group_code > GQ_GROUP_ROW) return -1;
    return WT_GQ_BASE + bi * 4 + group_code;
}

static inline bool gq_is_type(uint32_t t) {
    return t >= WT_GQ_BASE && t < WT_GQ_BASE + WT_GQ_COUNT;
}

static inline int gq_type_bits(uint32_t t) {
    static const int bits[4] = {2, 3, 4, 8};
    return bits[(t - WT_GQ_BASE) / 4];
}

static inline int gq_type_group_code(uint32_t t) {
    return (int)((t - WT_GQ_BASE) % 4);
}

/* Group size of a type for rows of n elements (n itself for per-row types). */
static inline int64_t gq_type_group(uint32_t t, int64_t n) {
    const int gc = gq_type_group_code(t);
    return gc == GQ_GROUP_ROW ? n : (int64_t)32 << gc;
}

/* The group code of a group size (32, 64, 128; -1 for per row); -1 if none. */
static inline int gq_group_code(int group) {
    return group == 32 ? GQ_GROUP_32 : group == 64 ? GQ_GROUP_64 : group == 128 ? GQ_GROUP_128
           : group == -1 ? GQ_GROUP_ROW : -1;
}

static inline uint64_t gq_block_bytes(int bits, int64_t group) {
    return GQ_BLOCK_HEADER + (uint64_t)bits * (uint64_t)group / 8;
}

#endif
