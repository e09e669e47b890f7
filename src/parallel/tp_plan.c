/* See tp_plan.h. Payload layout of a forward:
 *   tokens[n_tokens] pos[n_tokens] seq[n_tokens]
 *   then per sequence: len, then per group len block ids */
#include "parallel/tp_plan.h"

#include "util/error.h"
#include "util/array.h"

#include <stdlib.h>
#include <string.h>

static int push(tp_plan *p, const int32_t *v, size_t n) {
    if (array_reserve((void **)&p->data, &p->cap, p->len + n, sizeof *p->data)) return -1;
    if (n) memcpy(p->data + p->len, v, n * sizeof *v);
    p->len += n;
    return 0;
}

/* Blocks a sequence's tables must carry: up to the block of its last position. */
static int32_t table_len(const kv_cache *kv, const fwd_batch *b, int i) {
    int32_t max_pos = -1;
    for (int t = 0; t < b->n_tokens; t++)
        if (b->seq[t] == i && b->pos[t] > max_pos) max_pos = b->pos[t];
    return max_pos < 0 ? 0 : max_pos / kv->block_size + 1;
}

int tp_plan_encode(tp_plan *p, const kv_cache *kv, const fwd_batch *b, tp_msg_header *h) {
    p->len = 0;
    const size_t n = (size_t)b->n_tokens;
    if (push(p, b->tokens, n) || push(p, b->pos, n) || push(p, b->seq, n)) return -1;
    for (int i = 0; i < b->n_seqs; i++) {
        const int32_t len = table_len(kv, b, i);
        if (push(p, &len, 1)) return -1;
        for (int g = 0; g < kv->n_groups; g++)
            if (push(p, b->seqs[i].block_table[g], (size_t)len)) return -1;
    }
    if (p->len > INT32_MAX) return err_set("a forward of %zu int32s is too large to send", p->len);
    *h = (tp_msg_header){.kind = TP_MSG_FORWARD, .a = b->n_tokens, .b = b->n_seqs, .c = kv->n_groups,
                         .payload_len = (int32_t)p->len};
    return 0;
}

int tp_plan_reserve(tp_plan *p, const tp_msg_header *h) {
    if (h->payload_len < 0) return err_set("negative payload length %d", h->payload_len);
    if (array_reserve((void **)&p->data, &p->cap, (size_t)h->payload_len, sizeof *p->data)) return -1;
    p->len = (size_t)h->payload_len;
    return 0;
}

int tp_plan_decode(tp_plan *p, const tp_msg_header *h, int block_size) {
    const int32_t n = h->a, n_seqs = h->b, n_groups = h->c;
    if (h->kind != TP_MSG_FORWARD || n < 1 || n_seqs < 1 || n_groups < 1 || n_groups > KV_MAX_GROUPS)
        return err_set("malformed forward message (%d tokens, %d sequences, %d groups)", n, n_seqs, n_groups);
    if ((size_t)h->payload_len != p->len || p->len < 3 * (size_t)n)
        return err_set("forward message of %zu int32s is too short for %d tokens", p->len, n);
    if (block_size < 1) return err_set("no KV cache to run a forward over");
    if (array_reserve((void **)&p->seqs, &p->seqs_cap, (size_t)n_seqs, sizeof *p->seqs) ||
        array_reserve((void **)&p->lens, &p->lens_cap, (size_t)n_seqs, sizeof *p->lens))
        return -1;
    size_t at = 3 * (size_t)n;
    for (int i = 0; i < n_seqs; i++) {
        if (at >= p->len) return err_set("forward message ends before sequence %d", i);
        const int32_t len = p->data[at++];
        if (len < 0 || (size_t)len * (size_t)n_groups > p->len - at)
            return err_set("forward message: sequence %d's tables of %d blocks do not fit", i, len);
        memset(&p->seqs[i], 0, sizeof p->seqs[i]);
        p->lens[i] = len;
        for (int g = 0; g < n_groups; g++, at += (size_t)len) p->seqs[i].block_table[g] = p->data + at;
    }
    if (at != p->len) return err_set("forward message has %zu int32s past its tables", p->len - at);
    for (int t = 0; t < n; t++) { /* each token's block must be in its sequence's tables */
        const int32_t s = p->data[2 * (size_t)n + t], pos = p->data[n + t];
        if (s < 0 || s >= n_seqs || pos < 0 || pos / block_size >= p->lens[s])
            return err_set("forward message: token %d has an invalid sequence or position", t);
    }
    p->batch = (fwd_batch){.n_tokens = n, .tokens = p->data, .pos = p->data + n, .seq = p->data + 2 * (size_t)n,
                           .n_seqs = n_seqs, .seqs = p->seqs, .n_out = 0, .out_rows = NULL};
    return 0;
}

void tp_plan_free(tp_plan *p) {
    free(p->data);
    free(p->seqs);
    free(p->lens);
    memset(p, 0, sizeof *p);
}
