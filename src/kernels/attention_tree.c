/* A draft tree's keys for the attention tiles (attention.h, attn_tile.tree):
 * a node's path from the root, gathered from the slots where the tree's
 * nodes were written into the places plain decoding of that path would
 * have them, so both kernels run over them unchanged. */
#include "kernels/attention.h"

#include <string.h>

int attn_tree_path(uint32_t anc, int tree_base, int32_t *slots) {
    int n = 0;
    for (int bit = 1; bit < ATTN_TREE_MAX; bit++)
        if (anc >> bit & 1u) slots[n++] = tree_base + bit;
    return n;
}

void attn_tree_gather(const paged_kv *kv, const int32_t *block_table, int kv_head, int b, int t0,
                      int t1, int tree_base, const int32_t *path, uint8_t *rows) {
    const int bs = kv->block_size;
    const size_t k_row = kv_row_bytes(kv->dtype, kv->head_dim_k), v_row = paged_v_row_bytes(kv);
    uint8_t *v_rows = rows + (size_t)bs * k_row;
    for (int k = t0; k <= t1; k++) {
        const int p = b * bs + k, slot = p <= tree_base ? p : path[p - tree_base - 1];
        const size_t row = (size_t)kv_head * bs + slot % bs, blk = (size_t)block_table[slot / bs];
        memcpy(rows + k * k_row, kv->k + blk * kv->k_block_stride + row * k_row, k_row);
        memcpy(v_rows + k * v_row, kv->v + blk * kv->v_block_stride + row * v_row, v_row);
    }
}
