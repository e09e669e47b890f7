/* See kv_plan.h. */
#include "kv/kv_plan.h"

#include "util/error.h"
#include "util/array.h"

#include <stdlib.h>
#include <string.h>

int kv_plan_reserve(kv_plan *p, int n) {
    if (array_reserve((void **)&p->ops, &p->cap, (size_t)p->n + (size_t)n, sizeof *p->ops))
        return err_oom("out of memory for the KV plan");
    return 0;
}

void kv_plan_copy(kv_plan *p, int src, int dst) { p->ops[p->n++] = (kv_op){.kind = KV_OP_COPY, .src = src, .dst = dst}; }

static void free_op(kv_op *op) {
    for (int g = 0; g < KV_MAX_GROUPS; g++) free(op->ids[g]);
    free(op->keep);
}

void kv_plan_move(kv_plan *p, int n_groups, int32_t *const ids[], const int n_ids[], int32_t *keep, int n_keep,
                  int first, bool shift) {
    kv_op op = {.kind = KV_OP_MOVE, .n_groups = n_groups, .keep = keep, .n_keep = n_keep, .first = first,
                .shift = shift};
    for (int g = 0; g < n_groups; g++) op.ids[g] = ids[g], op.n_ids[g] = n_ids[g];
    p->ops[p->n++] = op;
}

/* Moves one token's rows (every kv head of every layer of group g) from slot
 * `from` to slot `to` of the blocks `ids`, re-rotating the keys (shift
 * NULL: the bytes as they are). */
static void move_slot(kv_cache *kv, const int32_t *ids, int g, int from, int to, float *buf, kv_key_shift_fn shift,
                      void *user) {
    const int bs = kv->block_size;
    const size_t k_row = kv_row_bytes(kv->dtype, kv->head_dim_k), v_row = kv_row_bytes(kv->dtype, kv->head_dim_v);
    const int src = ids[from / bs], dst = ids[to / bs];
    for (int il = 0; il < kv->n_layers; il++) {
        if (kv->layer_group[il] != g) continue;
        const uint8_t *ks = kv_k_block(kv, il, src), *vs = kv_v_block(kv, il, src);
        uint8_t *kd = kv_k_block(kv, il, dst), *vd = kv_v_block(kv, il, dst);
        if (!shift) {
            for (int h = 0; h < kv->n_kv_heads; h++)
                memcpy(kd + ((size_t)h * bs + to % bs) * k_row, ks + ((size_t)h * bs + from % bs) * k_row, k_row);
        } else {
            for (int h = 0; h < kv->n_kv_heads; h++) {
                const uint8_t *row = ks + ((size_t)h * bs + from % bs) * k_row;
                for (int d = 0; d < kv->head_dim_k; d++)
                    buf[(size_t)h * kv->head_dim_k + d] = kv_row_value(kv->dtype, row, d);
            }
            shift(user, il, buf, kv->n_kv_heads, to - from);
            for (int h = 0; h < kv->n_kv_heads; h++)
                kv_row_store(kv->dtype, buf + (size_t)h * kv->head_dim_k, kd + ((size_t)h * bs + to % bs) * k_row,
                             kv->head_dim_k);
        }
        if (kv->v_in_k) continue; /* V is the K row's prefix, moved with it */
        for (int h = 0; h < kv->n_kv_heads; h++)
            memcpy(vd + ((size_t)h * bs + to % bs) * v_row, vs + ((size_t)h * bs + from % bs) * v_row, v_row);
    }
}

/* Slot i always comes from a slot >= i, so slot by slot in order is in place, like memmove. */
static void apply_move(kv_cache *kv, const kv_op *op, float *buf, kv_key_shift_fn shift, void *user) {
    for (int g = 0; g < op->n_groups; g++)
        for (int i = op->first; i < op->n_keep; i++)
            move_slot(kv, op->ids[g], g, op->keep[i], i, buf, op->shift ? shift : NULL, user);
}

int kv_plan_apply(kv_plan *p, kv_cache *kv, kv_key_shift_fn shift, void *user) {
    float *buf = NULL; /* one token's keys of one layer, for the moves */
    int rc = 0;
    for (int i = 0; i < p->n && !rc; i++) {
        const kv_op *op = &p->ops[i];
        if (op->kind == KV_OP_COPY) {
            kv_cache_copy_block(kv, op->src, op->dst);
            continue;
        }
        if (!buf && !(buf = malloc((size_t)kv->n_kv_heads * kv->head_dim_k * sizeof *buf)))
            rc = err_oom("out of memory compacting the KV cache");
        else apply_move(kv, op, buf, shift, user);
    }
    free(buf);
    kv_plan_clear(p);
    return rc;
}

void kv_plan_clear(kv_plan *p) {
    for (int i = 0; i < p->n; i++) free_op(&p->ops[i]);
    p->n = 0;
}

void kv_plan_free(kv_plan *p) {
    kv_plan_clear(p);
    free(p->ops);
    *p = (kv_plan){0};
}
