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
 * Block layout (little-endian), one block per group of `group` elements:
 *     f16  d
 *     u8   z
 *     u8   pad (0)
 *     q    bits * group / 8 bytes: element j's bits start at bit j*bits of
 *          this little-endian bit stream (for 4 bits: low nibble = even j,
 *          high nibble = odd j; for 3 bits: packed across byte boundaries)
 * Type ids start at WT_GQ_BASE (outside ggml's range); the id encodes bits and
 * group size, see gq_type(). The per-row variant ("group = -1") uses
 * group = the row length: its block size is that of the tensor row, so its
 * rows are self-describing (WT_GQ*_ROW, with the group taken from the row length
 * at run time).
 *
 * GGUF files using these types are cllm's own: llama.cpp cannot read them.
 * Tensors quantized with act-order (GPTQ desc_act) are stored with their input
 * columns permuted so groups are contiguous, plus an I32 tensor
 * "<name>.perm" giving, for stored column k, the original column perm[k]; the
 * matmul gathers the activations through it. */
#ifndef CLLM_KERNELS_QGROUP_H
#define CLLM_KERNELS_QGROUP_H

#include <stdint.h>

#define WT_GQ_BASE 100

/* Group sizes encoded in a type id; GQ_GROUP_ROW means one group per row. */
enum { GQ_GROUP_32 = 0, GQ_GROUP_64 = 1, GQ_GROUP_128 = 2, GQ_GROUP_ROW = 3 };

/* bits in {2, 3, 4, 8} -> index 0..3; id = WT_GQ_BASE + bits_index * 4 + group code. */
static inline int gq_type(int bits, int group_code) {
    const int bi = bits == 2 ? 0 : bits == 3 ? 1 : bits == 4 ? 2 : 3;
    return WT_GQ_BASE + bi * 4 + group_code;
}

#define GQ_BLOCK_HEADER 4 /* f16 d, u8 z, u8 pad */

#endif
