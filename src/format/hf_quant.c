/* GPTQ / AWQ -> GQ repacking; see hf_quant.h for both source layouts and
 * format/qgroup.h for the target. The integers are first unpacked into a
 * transposed byte matrix q[n_out][n_in] (one pass over the checkpoint in its
 * own order), then each output row is cut into GQ blocks (gq_pack_block),
 * taking the scale and zero of the group its columns belong to. */
#include "format/hf_quant.h"

#include "format/gq_layout.h"
#include "util/error.h"
#include "util/fp16.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rd_u32(const void *p, size_t i) {
    const uint8_t *b = (const uint8_t *)p + 4 * i;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint16_t rd_u16(const void *p, size_t i) {
    const uint8_t *b = (const uint8_t *)p + 2 * i;
    return (uint16_t)(b[0] | b[1] << 8);
}

int64_t gq_layer_group(const gq_layer *l) { return l->group_size == -1 ? l->n_in : l->group_size; }

int64_t gq_layer_n_groups(const gq_layer *l) {
    int64_t g = gq_layer_group(l);
    return g > 0 ? (l->n_in + g - 1) / g : 0;
}

int gq_layer_type(const gq_layer *l) { return gq_type(l->bits, gq_group_code(l->group_size)); }

size_t gq_layer_row_bytes(const gq_layer *l) {
    const int t = gq_layer_type(l);
    return t < 0 ? 0 : gq_row_size((uint32_t)t, l->n_in);
}

int gq_layer_check(const gq_layer *l, bool awq, const char *what) {
    if (l->bits != 4 && l->bits != 8) return err_set("%s: %d-bit checkpoints are not supported (4, 8)", what, l->bits);
    if (gq_layer_type(l) < 0)
        return err_set("%s: %d-bit groups of %d are not a supported GQ format", what, l->bits, l->group_size);
    if (l->n_in <= 0 || l->n_out <= 0) return err_set("%s: empty layer", what);
    const int64_t g = gq_layer_group(l);
    if (l->n_in % g)
        return err_set("%s: group size %" PRId64 " does not divide the %" PRId64 " input columns", what, g, l->n_in);
    const int pack = 32 / l->bits;
    if (!awq && l->n_in % pack)
        return err_set("%s: %" PRId64 " input columns do not fill whole %d-bit words", what, l->n_in, l->bits);
    if (l->n_out % pack)
        return err_set("%s: %" PRId64 " output columns do not fill whole %d-bit words", what, l->n_out, l->bits);
    if (gq_layer_row_bytes(l) == 0)
        return err_set("%s: %" PRId64 " input columns are not a multiple of %d, as GQ rows must be", what, l->n_in,
                       GQ_CHUNK);
    return 0;
}

/* Appends the GQ block of n levels taken from row q at columns
 * cols[base + j] (or base + j), with the checkpoint's f16 scale bits. */
static uint8_t *put_block(uint8_t *dst, uint16_t d, int z, const uint8_t *q, const int32_t *cols, int64_t base,
                          int64_t n, int bits, uint8_t *levels) {
    for (int64_t j = 0; j < n; j++) levels[j] = q[cols ? cols[base + j] : base + j];
    /* f16 -> f32 -> f16 gives back the same bits. */
    gq_pack_block(bits, n, f16_to_f32(d), z, levels, dst);
    return dst + gq_block_bytes(bits, n);
}

/* Columns sorted by group (stable); NULL group = contiguous. Returns 1 if
 * the order differs from the identity, 0 if not, -1 on error. Each GQ block
 * of g stored columns must then belong to one checkpoint group, whose index
 * goes to block_group[b]. */
static int order_columns(const gq_layer *l, const void *g_idx, int64_t n_groups, int32_t *perm, int32_t *block_group,
                         const char *what) {
    const int64_t n = l->n_in, g = gq_layer_group(l);
    if (!g_idx) {
        for (int64_t b = 0; b < n / g; b++) block_group[b] = (int32_t)b;
        return 0;
    }
    int64_t *count = calloc((size_t)n_groups + 1, sizeof *count);
    if (!count) return err_oom("out of memory");
    for (int64_t i = 0; i < n; i++) {
        const int32_t gi = (int32_t)rd_u32(g_idx, (size_t)i);
        if (gi < 0 || gi >= n_groups) {
            free(count);
            return err_set("%s: g_idx[%" PRId64 "] = %d is outside [0, %" PRId64 ")", what, i, gi, n_groups);
        }
        count[gi + 1]++;
    }
    for (int64_t k = 0; k < n_groups; k++) count[k + 1] += count[k];
    bool identity = true;
    for (int64_t i = 0; i < n; i++) {
        const int32_t gi = (int32_t)rd_u32(g_idx, (size_t)i);
        const int64_t at = count[gi]++;
        perm[at] = (int32_t)i;
        identity &= at == i;
    }
    free(count);
    for (int64_t b = 0; b < n / g; b++) {
        block_group[b] = (int32_t)rd_u32(g_idx, (size_t)perm[b * g]);
        for (int64_t j = 1; j < g; j++)
            if ((int32_t)rd_u32(g_idx, (size_t)perm[b * g + j]) != block_group[b])
                return err_set("%s: g_idx does not split the columns into groups of %" PRId64, what, g);
    }
    return identity ? 0 : 1;
}

int gptq_to_gq(const gq_layer *l, bool zeros_plus_one, const void *qweight, const void *qzeros, const void *scales,
               const void *g_idx, void *out, int32_t *perm, const char *what) {
    if (gq_layer_check(l, false, what)) return -1;
    const int bits = l->bits, pack = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const int64_t n_in = l->n_in, n_out = l->n_out, g = gq_layer_group(l), n_blocks = n_in / g;
    const int64_t n_groups = gq_layer_n_groups(l);
    uint8_t *q = malloc((size_t)(n_in * n_out)), *levels = malloc((size_t)g);
    int32_t *block_group = malloc((size_t)n_blocks * sizeof *block_group);
    int32_t *cols = malloc((size_t)n_in * sizeof *cols);
    int rc = 0;
    if (!q || !levels || !block_group || !cols) rc = err_oom("out of memory repacking %s", what);
    const int permuted = rc ? -1 : order_columns(l, g_idx, n_groups, cols, block_group, what);
    if (permuted < 0) rc = -1;
    for (int64_t r = 0; !rc && r < n_in / pack; r++)
        for (int64_t o = 0; o < n_out; o++) {
            uint32_t w = rd_u32(qweight, (size_t)(r * n_out + o));
            for (int k = 0; k < pack; k++, w >>= bits) q[o * n_in + r * pack + k] = (uint8_t)(w & mask);
        }
    const size_t row_bytes = gq_layer_row_bytes(l);
    for (int64_t o = 0; !rc && o < n_out; o++) {
        uint8_t *dst = (uint8_t *)out + o * row_bytes;
        for (int64_t b = 0; b < n_blocks && !rc; b++) {
            const int64_t gi = block_group[b];
            const uint32_t zw = rd_u32(qzeros, (size_t)(gi * (n_out / pack) + o / pack));
            const uint32_t z = ((zw >> (o % pack * bits)) & mask) + (zeros_plus_one ? 1 : 0);
            if (z > 255)
                rc = err_set("%s: zero point %u (group %" PRId64 ", output %" PRId64 ") does not fit GQ's 8 bits",
                             what, z, gi, o);
            else
                dst = put_block(dst, rd_u16(scales, (size_t)(gi * n_out + o)), (int)z, q + o * n_in,
                                permuted ? cols : NULL, b * g, g, bits, levels);
        }
    }
    if (!rc && permuted) memcpy(perm, cols, (size_t)n_in * sizeof *perm);
    free(q);
    free(levels);
    free(block_group);
    free(cols);
    return rc ? -1 : permuted;
}

/* Nibble of a word that holds output column c (mod 8): AWQ_REVERSE_ORDER. */
static const int k_awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

int awq_to_gq(const gq_layer *l, const void *qweight, const void *qzeros, const void *scales, void *out,
              const char *what) {
    if (l->bits != 4) return err_set("%s: AWQ with %d bits is not supported", what, l->bits);
    if (gq_layer_check(l, true, what)) return -1;
    const int64_t n_in = l->n_in, n_out = l->n_out, g = gq_layer_group(l), n_blocks = n_in / g;
    const int64_t words = n_out / 8;
    uint8_t *q = malloc((size_t)(n_in * n_out)), *levels = malloc((size_t)g);
    if (!q || !levels) {
        free(q);
        free(levels);
        return err_oom("out of memory repacking %s", what);
    }
    for (int64_t i = 0; i < n_in; i++)
        for (int64_t c = 0; c < words; c++) {
            const uint32_t w = rd_u32(qweight, (size_t)(i * words + c));
            for (int k = 0; k < 8; k++) q[(c * 8 + k) * n_in + i] = (uint8_t)(w >> (4 * k_awq_nibble[k]) & 0xF);
        }
    const size_t row_bytes = gq_layer_row_bytes(l);
    for (int64_t o = 0; o < n_out; o++) {
        uint8_t *dst = (uint8_t *)out + o * row_bytes;
        for (int64_t b = 0; b < n_blocks; b++) {
            const uint32_t zw = rd_u32(qzeros, (size_t)(b * words + o / 8));
            const int z = (int)(zw >> (4 * k_awq_nibble[o % 8]) & 0xF);
            dst = put_block(dst, rd_u16(scales, (size_t)(b * n_out + o)), z, q + o * n_in, NULL, b * g, g, 4, levels);
        }
    }
    free(q);
    free(levels);
    return 0;
}
