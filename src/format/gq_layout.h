/* The GQ formats' layout (spec: qgroup.h): names, row sizes and block
 * packing, which writers and readers of GQ tensors share. The kernels that
 * compute with these types are in kernels/gq.h. */
#ifndef CLLM_FORMAT_GQ_LAYOUT_H
#define CLLM_FORMAT_GQ_LAYOUT_H

#include "format/qgroup.h"

#include <stddef.h>
#include <stdint.h>

/* "GQ4_G128", "GQ8_ROW", ...; NULL when t is not a GQ type. */
const char *gq_type_name(uint32_t t);
/* Bytes of a row of n elements; 0 when n is not a positive multiple of 32 or
 * of the group size. */
size_t gq_row_size(uint32_t t, int64_t n);
/* The GQ type named `name` (case-insensitive), or -1. */
int gq_type_from_name(const char *name);

/* One block of `group` elements (a multiple of 32) from its levels q[group]
 * (each < 2^bits), scale d (rounded to f16) and zero point z (0..255). */
void gq_pack_block(int bits, int64_t group, float d, int z, const uint8_t *q, void *block);
/* The inverse: levels, scale and zero point of a block. */
void gq_unpack_block(int bits, int64_t group, const void *block, float *d, int *z, uint8_t *q);

/* One chunk of 32 levels to its bits * 4 packed bytes, and back. */
void gq_pack_chunk(int bits, const uint8_t *q, uint8_t *p);
void gq_unpack_chunk(int bits, const uint8_t *p, uint8_t *q);

#endif
