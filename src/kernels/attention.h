/* Attention over a paged KV cache. Keys and values are read through the
 * sequence's block table, block by block, with an online softmax (running max
 * and sum per query row), so neither decode nor a long prefill ever holds a
 * score row longer than one block: memory is linear in the sequence length.
 *
 * Two shapes: attn_paged_* computes one query row; attn_tile_* a tile of query
 * rows (consecutive tokens of one sequence times the query heads of one GQA
 * group) against each K/V block in turn, FlashAttention's loop on a CPU: the
 * tile's scores for a block are a small matmul, then exp, then P.V, so a K/V
 * block is read once per tile instead of once per row.
 *
 * Scalar references in attention_ref.c (one row, the definition) and
 * attention_tile_ref.c; AVX2 in attention_avx2.c, where one row is a tile of
 * one. The AVX2 tile computes each row with the same operations in the same
 * order whatever else is in the tile, so a row's bits do not depend on the
 * tile, the batch or the thread that computes it. */
#ifndef CLLM_KERNELS_ATTENTION_H
#define CLLM_KERNELS_ATTENTION_H

#include "kernels/kv_row.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One layer's K and V pages: block b's rows start at k + b * k_block_stride,
 * laid out [kv_head][token], each row kv_row_bytes(dtype, head_dim) bytes as
 * kv_row.h stores it. 8-bit rows are read in place and decoded in registers. */
typedef struct {
    const uint8_t *k;
    const uint8_t *v;
    size_t k_block_stride; /* bytes */
    size_t v_block_stride;
    kv_dtype dtype;
    int block_size;  /* at most ATTN_MAX_BLOCK */
    int n_kv_heads;
    int head_dim_k;
    int head_dim_v;
    /* V rows are the first head_dim_v dims of the K rows (latent attention):
     * v and v_block_stride are K's, and a V row is a K row apart. */
    bool v_in_k;
} paged_kv;

/* Bytes from one V row of a block to the next. */
static inline size_t paged_v_row_bytes(const paged_kv *kv) {
    return kv_row_bytes(kv->dtype, kv->v_in_k ? kv->head_dim_k : kv->head_dim_v);
}

#define ATTN_MAX_BLOCK 64

/* out[head_dim_v] = softmax(scale * q.K[j]) . V[j] over key positions
 * lo <= j <= hi of kv head `kv_head`, whose block ids are block_table[j / block_size]. */
void attn_paged_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                    int hi, float scale, float *out);
void attn_paged_avx2(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                     int hi, float scale, float *out);

/* Rows in one tile, at most: the AVX2 tile keeps a block's scores for all of
 * them on the stack (ATTN_TILE_ROWS x ATTN_MAX_BLOCK floats, 8 KB). */
#define ATTN_TILE_ROWS 32

/* Attention mass (H2O's score, kv/kv_evict.h) in fixed point: a probability
 * of 1 is ATTN_MASS_ONE. Each row's probability of a key is rounded to a
 * multiple of 1 / ATTN_MASS_ONE on its own, and sums of integers are exact,
 * so the mass a key receives is the same bits whichever tiles, threads,
 * chunks or batches add it up, in whatever order: tiles of one sequence add
 * to its array concurrently. 2^24 is a float's resolution at 1, and an int64
 * holds 2^39 probabilities of 1 (a key seen by every head of every layer of
 * a million tokens). */
#define ATTN_MASS_ONE (1 << 24)

/* A tile of query rows: n_tok tokens of one sequence times the n_head query
 * heads that share one kv head. Row (i, j), token i and head j, reads
 * q + i * q_stride + j * head_dim_k and writes out + i * out_stride +
 * j * head_dim_v; token i sees key positions lo[i] <= p <= hi[i]. Every
 * position from the smallest lo to the largest hi must be written (true for
 * tokens of one sequence: keys up to a token's own position are).
 *
 * When key_mass is set, each row's softmax probability of each key p it sees
 * is also added to key_mass[p] (in ATTN_MASS_ONE units, atomically): once a
 * row's max and sum are final, the tile sweeps its K blocks again for the
 * scores (an online softmax knows a probability only after the last block),
 * so the mass costs the Q.K half of the attention again and no memory. */
typedef struct {
    const float *q;
    float *out;
    size_t q_stride;   /* floats from one token to the next */
    size_t out_stride;
    const int32_t *lo; /* [n_tok] */
    const int32_t *hi; /* [n_tok] */
    int n_tok;
    int n_head; /* n_tok * n_head <= ATTN_TILE_ROWS */
    float softcap;     /* > 0: scores become softcap * tanh(score / softcap) (Gemma 2); 0: none */
    /* NULL, or each of the tile's heads' sink logit (gpt-oss): a key with
     * that score and a zero value in every row's softmax, which takes its
     * share of the probability and adds nothing to the output. */
    const float *sinks;
    int64_t *key_mass; /* NULL, or [hi + 1] at least */
    /* NULL, or a node of a tree of draft tokens (speculative decoding over a
     * tree, Medusa), the tile's one token (n_tok 1): tree[0] is its ancestry
     * mask over the tree's nodes, which sit at KV positions tree_base (the
     * root, bit 0) .. tree_base + 31. The token sees the keys lo ..
     * tree_base, then its ancestors below the root and itself (the mask's
     * other bits, in increasing order) as if they sat at positions
     * tree_base + 1 .. hi: the keys plain decoding of its path sees, in the
     * same places, so its output has that decoding's bits. The blocks that
     * hold those positions are gathered into tree_rows first
     * (attn_tree_rows_bytes of scratch); key_mass is not kept. */
    const uint32_t *tree;
    int tree_base;
    uint8_t *tree_rows;
} attn_tile;

/* Nodes in one draft tree, at most: one bit each in attn_tile.tree. */
#define ATTN_TREE_MAX 32

/* Scratch a tree tile needs: a block's K rows and V rows of one kv head. */
static inline size_t attn_tree_rows_bytes(const paged_kv *kv) {
    return (size_t)kv->block_size * (kv_row_bytes(kv->dtype, kv->head_dim_k) + paged_v_row_bytes(kv));
}

/* attention_tree.c, for the kernels: the KV slot of each position past
 * tree_base a tree token sees (its path below the root, in depth order);
 * returns how many. */
int attn_tree_path(uint32_t anc, int tree_base, int32_t *slots);
/* Keys t0..t1 of block b of a tree token's positions (lo .. hi as the
 * tile's), read from their slots (path: attn_tree_path's) into rows laid
 * out as one kv head's rows of a block: K at rows, V at rows + block_size K
 * rows. */
void attn_tree_gather(const paged_kv *kv, const int32_t *block_table, int kv_head, int b, int t0, int t1,
                      int tree_base, const int32_t *path, uint8_t *rows);

typedef void (*attn_tile_fn)(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t,
                             float scale);

void attn_tile_ref(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t, float scale);
void attn_tile_avx2(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t,
                    float scale);

/* The active ops table's tile (ops_tables.h): the AVX2 one when the CPU has
 * AVX2, else the reference. Defined in ops.c. */
attn_tile_fn attn_tile_best(void);

#endif
