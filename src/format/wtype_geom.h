/* Weight type ids and block geometry: what a file format needs to size and
 * check a tensor (bytes per row, elements per block, a printable name), for
 * every ggml type id and cllm's GQ types, whether or not kernels exist for
 * it. Type ids are ggml's, so GGUF tensor types index the table directly;
 * the kernels for each type are in kernels/wtype.h. */
#ifndef CLLM_FORMAT_WTYPE_GEOM_H
#define CLLM_FORMAT_WTYPE_GEOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    WT_F32 = 0,
    WT_F16 = 1,
    WT_Q4_0 = 2,
    WT_Q4_1 = 3,
    WT_Q5_0 = 6,
    WT_Q5_1 = 7,
    WT_Q8_0 = 8,
    WT_Q8_1 = 9,
    WT_Q2_K = 10,
    WT_Q3_K = 11,
    WT_Q4_K = 12,
    WT_Q5_K = 13,
    WT_Q6_K = 14,
    WT_Q8_K = 15,
    WT_BF16 = 30,
    WT_MXFP4 = 39,
    WT_COUNT = 128 /* GQ types (qgroup.h) use ids 100..115 */
} wtype;

/* A printable name for any id, known or not ("Q4_K", "type 17"). */
const char *wtype_name(uint32_t t);
/* Bytes for a row of n elements; 0 if the type is unknown or n is not a
 * multiple of its block size. */
size_t wtype_row_size(uint32_t t, int64_t n);
/* Elements per block; 0 if the type is unknown or has one block per row. */
int wtype_block_size(uint32_t t);
/* True for types with one block per row whatever its length (the per-row GQ
 * types, qgroup.h): their kernels take exactly one row per call, and their
 * traits' block_size is 0. */
bool wtype_row_block(uint32_t t);
/* Bytes per block; 0 if the type is unknown (GQ types: see gq_row_size). */
size_t wtype_type_size(uint32_t t);

#endif
