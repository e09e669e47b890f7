/* The GQ formats' layout (spec: qgroup.h): type names, row sizes, and how a
 * block's integer levels are packed. Kernels (kernels/gq.h) and writers of GQ
 * tensors (quantize, the GPTQ/AWQ repacker) share it. */
#include "format/gq_layout.h"

#include "util/fp16.h"

#include <ctype.h>
#include <string.h>

/* ---- names and geometry ---- */

static const char *const k_names[WT_GQ_COUNT] = {
    "GQ2_G32", "GQ2_G64", "GQ2_G128", "GQ2_ROW", "GQ3_G32", "GQ3_G64", "GQ3_G128", "GQ3_ROW",
    "GQ4_G32", "GQ4_G64", "GQ4_G128", "GQ4_ROW", "GQ8_G32", "GQ8_G64", "GQ8_G128", "GQ8_ROW",
};

const char *gq_type_name(uint32_t t) {
    return gq_is_type(t) ? k_names[t - WT_GQ_BASE] : NULL;
}

int gq_type_from_name(const char *name) {
    for (int i = 0; i < WT_GQ_COUNT; i++) {
        const char *a = k_names[i], *b = name;
        while (*a && *b && toupper((unsigned char)*b) == *a) a++, b++;
        if (!*a && !*b) return WT_GQ_BASE + i;
    }
    return -1;
}

size_t gq_row_size(uint32_t t, int64_t n) {
    if (!gq_is_type(t) || n <= 0 || n % GQ_CHUNK) return 0;
    const int64_t g = gq_type_group(t, n);
    if (n % g) return 0;
    return (size_t)(n / g) * (size_t)gq_block_bytes(gq_type_bits(t), g);
}

/* ---- chunk packing (32 elements, bits * 4 bytes) ---- */

void gq_pack_chunk(int bits, const uint8_t *q, uint8_t *p) {
    switch (bits) {
    case 8:
        memcpy(p, q, 32);
        break;
    case 4:
        for (int i = 0; i < 16; i++) p[i] = (uint8_t)((q[i] & 15) | (q[i + 16] & 15) << 4);
        break;
    case 2:
    case 3:
        for (int i = 0; i < 8; i++)
            p[i] = (uint8_t)((q[i] & 3) | (q[i + 8] & 3) << 2 | (q[i + 16] & 3) << 4 | (q[i + 24] & 3) << 6);
        if (bits == 3) {
            uint32_t h = 0;
            for (int j = 0; j < 32; j++) h |= (uint32_t)((q[j] >> 2) & 1) << j;
            memcpy(p + 8, &h, 4);
        }
        break;
    }
}

void gq_unpack_chunk(int bits, const uint8_t *p, uint8_t *q) {
    switch (bits) {
    case 8:
        memcpy(q, p, 32);
        break;
    case 4:
        for (int i = 0; i < 16; i++) q[i] = p[i] & 15, q[i + 16] = p[i] >> 4;
        break;
    case 2:
    case 3:
        for (int i = 0; i < 8; i++)
            for (int k = 0; k < 4; k++) q[i + 8 * k] = (p[i] >> (2 * k)) & 3;
        if (bits == 3) {
            uint32_t h;
            memcpy(&h, p + 8, sizeof h); /* little-endian, as the x86 targets are */
            for (int j = 0; j < 32; j++) q[j] |= (uint8_t)(((h >> j) & 1) << 2);
        }
        break;
    }
}

void gq_pack_block(int bits, int64_t group, float d, int z, const uint8_t *q, void *block) {
    uint8_t *b = block;
    const f16_t d16 = f32_to_f16(d);
    memcpy(b, &d16, 2);
    b[2] = (uint8_t)z;
    b[3] = 0;
    for (int64_t c = 0; c < group / GQ_CHUNK; c++)
        gq_pack_chunk(bits, q + c * GQ_CHUNK, b + GQ_BLOCK_HEADER + c * bits * 4);
}

void gq_unpack_block(int bits, int64_t group, const void *block, float *d, int *z, uint8_t *q) {
    const uint8_t *b = block;
    f16_t d16;
    memcpy(&d16, b, 2);
    *d = f16_to_f32(d16);
    *z = b[2];
    for (int64_t c = 0; c < group / GQ_CHUNK; c++)
        gq_unpack_chunk(bits, b + GQ_BLOCK_HEADER + c * bits * 4, q + c * GQ_CHUNK);
}
