/* Tensor parallelism without MPI: the split of a model's weights into
 * shards (model/shard.h) and the forward messages rank 0 sends the other
 * ranks (parallel/tp_plan.h). The shards' rows and columns are compared with
 * the whole matrix's, and their partial output projections must add up to
 * the whole one; the messages must decode to the batch that was encoded, and
 * malformed ones must be refused. The runs across processes are in
 * tests/integration/test_tensor_parallel.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/wtype_geom.h"
#include "kernels/matmul.h"
#include "kernels/wtype.h"
#include "model/shard.h"
#include "parallel/tp_plan.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shards ---- */

enum { EMBD = 16, HEADS = 4, HEAD_DIM = 8, FF = 64 };

typedef struct {
    model m;
    float wq[HEADS * HEAD_DIM][EMBD], wk[2 * HEAD_DIM][EMBD], wv[2 * HEAD_DIM][EMBD], wo[EMBD][HEADS * HEAD_DIM];
    float gate[FF][EMBD], up[FF][EMBD], down[EMBD][FF];
    float bq[HEADS * HEAD_DIM];
} toy_model;

static weight f32_weight(const char *name, const void *data, int64_t n_in, int64_t n_out) {
    return (weight){.name = name, .data = data, .type = WT_F32, .n_in = n_in, .n_out = n_out,
                    .row_bytes = (size_t)n_in * sizeof(float)};
}

/* One layer with n_kv KV heads, every weight a distinct ramp. */
static toy_model *toy(int n_kv) {
    toy_model *t = calloc(1, sizeof *t);
    float *all[] = {&t->wq[0][0], &t->wk[0][0], &t->wv[0][0], &t->wo[0][0], &t->gate[0][0], &t->up[0][0],
                    &t->down[0][0], t->bq};
    const size_t sizes[] = {sizeof t->wq, sizeof t->wk, sizeof t->wv, sizeof t->wo, sizeof t->gate,
                            sizeof t->up, sizeof t->down, sizeof t->bq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        for (size_t k = 0; k < sizes[i] / sizeof(float); k++) all[i][k] = (float)(i * 10000 + k) / 1000.0f;
    model_hparams *hp = &t->m.hp;
    *hp = (model_hparams){.n_embd = EMBD, .n_layer = 1, .n_ff = FF, .n_head = HEADS, .n_head_kv = n_kv,
                          .head_dim_k = HEAD_DIM, .head_dim_v = HEAD_DIM};
    layer_weights *l = &t->m.w.layers[0];
    l->wq = f32_weight("wq", t->wq, EMBD, HEADS * HEAD_DIM);
    l->wk = f32_weight("wk", t->wk, EMBD, (int64_t)n_kv * HEAD_DIM);
    l->wv = f32_weight("wv", t->wv, EMBD, (int64_t)n_kv * HEAD_DIM);
    l->wo = f32_weight("wo", t->wo, HEADS * HEAD_DIM, EMBD);
    l->w_gate = f32_weight("gate", t->gate, EMBD, FF);
    l->w_up = f32_weight("up", t->up, EMBD, FF);
    l->w_down = f32_weight("down", t->down, FF, EMBD);
    l->bq = t->bq;
    return t;
}

static void toy_free(toy_model *t) {
    tensors_free(&t->m.tensors);
    free(t);
}

/* Row r, columns [c0, c0 + n) of a shard's matrix equal the whole's. */
static void assert_block(const weight *w, const float *whole, int64_t whole_n_in, int64_t r0, int64_t c0) {
    for (int64_t r = 0; r < w->n_out; r++) {
        const float *row = (const float *)((const uint8_t *)w->data + (size_t)r * w->row_bytes);
        assert_memory_equal(row, whole + (r0 + r) * whole_n_in + c0, (size_t)w->n_in * sizeof(float));
    }
}

static void test_shard_takes_each_ranks_heads_and_columns(void **state) {
    for (int rank = 0; rank < 2; rank++) {
        toy_model *t = toy(2);
        assert_int_equal(model_shard(&t->m, rank, 2), 0);
        const model_hparams *hp = &t->m.hp;
        assert_int_equal(hp->n_head, 2);
        assert_int_equal(hp->n_head_kv, 1);
        assert_int_equal(hp->n_ff, FF / 2);
        const layer_weights *l = &t->m.w.layers[0];
        const int q = 2 * HEAD_DIM, f = FF / 2;
        assert_block(&l->wq, &t->wq[0][0], EMBD, rank * q, 0);
        assert_block(&l->wk, &t->wk[0][0], EMBD, rank * HEAD_DIM, 0);
        assert_block(&l->wv, &t->wv[0][0], EMBD, rank * HEAD_DIM, 0);
        assert_block(&l->wo, &t->wo[0][0], HEADS * HEAD_DIM, 0, rank * q);
        assert_block(&l->w_gate, &t->gate[0][0], EMBD, rank * f, 0);
        assert_block(&l->w_up, &t->up[0][0], EMBD, rank * f, 0);
        assert_block(&l->w_down, &t->down[0][0], FF, 0, rank * f);
        assert_ptr_equal(l->bq, t->bq + rank * q);
        assert_int_equal(l->wo.n_in, q);
        assert_int_equal(l->w_down.n_in, f);
        toy_free(t);
    }
}

static void test_shard_replicates_a_kv_head_shared_by_ranks(void **state) {
    /* 4 query heads, 2 KV heads (groups of 2), 4 ranks: ranks 0 and 1 read
     * KV head 0, ranks 2 and 3 KV head 1. */
    for (int rank = 0; rank < 4; rank++) {
        toy_model *t = toy(2);
        assert_int_equal(model_shard(&t->m, rank, 4), 0);
        assert_int_equal(t->m.hp.n_head, 1);
        assert_int_equal(t->m.hp.n_head_kv, 1);
        assert_block(&t->m.w.layers[0].wk, &t->wk[0][0], EMBD, (rank / 2) * HEAD_DIM, 0);
        assert_block(&t->m.w.layers[0].wv, &t->wv[0][0], EMBD, (rank / 2) * HEAD_DIM, 0);
        toy_free(t);
    }
}

static void test_shard_refuses_sizes_that_do_not_divide(void **state) {
    toy_model *t = toy(2);
    assert_int_equal(model_shard(&t->m, 0, 3), -1);
    assert_non_null(strstr(err_get(), "a tensor-parallel size of 3 does not divide the model's 4 attention heads"));
    toy_free(t);
    t = toy(4); /* 4 KV heads on 8 ranks: more ranks than query heads */
    assert_int_equal(model_shard(&t->m, 0, 8), -1);
    assert_non_null(strstr(err_get(), "does not divide the model's 4 attention heads"));
    toy_free(t);
    t = toy(2); /* OLMo 2's q/k norm spans every head: its sums are added over ranks that split the KV heads */
    t->m.hp.traits = arch_find("olmo2");
    assert_int_equal(model_shard(&t->m, 0, 4), -1);
    assert_non_null(strstr(err_get(), "cannot split OLMo 2's q/k norm, which spans every head of the projection, "
                                      "over 4 ranks: they must divide its 2 KV heads"));
    toy_free(t);
    t = toy(2); /* each expert's hidden columns are split like a dense FFN's */
    t->m.hp.traits = arch_find("qwen3moe");
    t->m.hp.n_expert = 8;
    t->m.hp.n_ff_exp = 3;
    assert_int_equal(model_shard(&t->m, 0, 2), -1);
    assert_non_null(strstr(err_get(), "a tensor-parallel size of 2 does not divide the experts' 3 hidden columns"));
    toy_free(t);
}

/* The ranks' partial attention output projections add up to the whole. */
static void test_partial_output_projections_sum_to_the_whole(void **state) {
    wtype_init();
    threadpool *threads = threadpool_create(1);
    toy_model *whole = toy(2);
    float att[HEADS * HEAD_DIM], want[EMBD], sum[EMBD] = {0}, part[EMBD];
    for (int i = 0; i < HEADS * HEAD_DIM; i++) att[i] = sinf((float)i);
    void *scratch = malloc(matmul_scratch_size(&whole->m.w.layers[0].wo, 1) + 64);
    matmul(threads, &whole->m.w.layers[0].wo, att, 1, want, scratch);
    for (int rank = 0; rank < 2; rank++) {
        toy_model *t = toy(2);
        assert_int_equal(model_shard(&t->m, rank, 2), 0);
        matmul(threads, &t->m.w.layers[0].wo, att + rank * 2 * HEAD_DIM, 1, part, scratch);
        for (int i = 0; i < EMBD; i++) sum[i] += part[i];
        toy_free(t);
    }
    for (int i = 0; i < EMBD; i++) assert_true(fabsf(sum[i] - want[i]) <= 1e-5f * fabsf(want[i]) + 1e-6f);
    free(scratch);
    toy_free(whole);
    threadpool_free(threads);
}

/* A Q8_0 attn_output of 64 columns: 2 ranks take whole blocks of 32; 4 ranks
 * would cut blocks in half and are refused, naming the block. */
static void test_shard_splits_quantized_columns_on_blocks(void **state) {
    enum { COLS = 64, ROWS = 16 };
    const size_t row_bytes = wtype_row_size(WT_Q8_0, COLS);
    uint8_t *q = malloc(row_bytes * ROWS);
    for (size_t i = 0; i < row_bytes * ROWS; i++) q[i] = (uint8_t)(i * 7 + 1);
    float *qkv = calloc((size_t)COLS * EMBD, sizeof(float)); /* Q, K and V rows to split (unread) */
    for (int size = 2; size <= 4; size += 2) {
        toy_model *t = toy(4);
        t->m.hp.n_head = 8;
        t->m.hp.head_dim_k = t->m.hp.head_dim_v = 8; /* 8 heads x 8 = the 64 columns */
        layer_weights *l = &t->m.w.layers[0];
        l->wq = f32_weight("wq", qkv, EMBD, COLS);
        l->wk = f32_weight("wk", qkv, EMBD, 4 * 8);
        l->wv = f32_weight("wv", qkv, EMBD, 4 * 8);
        l->bq = NULL;
        t->m.w.layers[0].wo = (weight){.name = "blk.0.attn_output.weight", .data = q, .type = WT_Q8_0,
                                       .n_in = COLS, .n_out = ROWS, .row_bytes = row_bytes};
        const int rc = model_shard(&t->m, 1, size);
        if (size == 2) {
            assert_int_equal(rc, 0);
            const weight *wo = &t->m.w.layers[0].wo;
            assert_int_equal(wo->row_bytes, row_bytes / 2);
            for (int r = 0; r < ROWS; r++)
                assert_memory_equal((const uint8_t *)wo->data + r * wo->row_bytes, q + r * row_bytes + row_bytes / 2,
                                    row_bytes / 2);
        } else {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(err_get(), "16 of its 64 columns, not a multiple of the Q8_0 block of 32"));
        }
        toy_free(t);
    }
    free(qkv);
    free(q);
}

/* ---- forward messages ---- */

static kv_cache two_groups(void) {
    return (kv_cache){.block_size = 4, .n_groups = 2, .n_blocks = 64};
}

static void test_plan_round_trip(void **state) {
    const kv_cache kv = two_groups();
    /* sequence 0: positions 5..7 (a prompt chunk), sequence 1: position 9 (a decode) */
    const int32_t tokens[] = {11, 12, 13, 14}, pos[] = {5, 6, 7, 9}, seq[] = {0, 0, 0, 1}, rows[] = {2, 3};
    const int32_t t0g0[] = {3, 4, 99}, t0g1[] = {-1, 5, 98}, t1g0[] = {7, 8, 9, 97}, t1g1[] = {-1, -1, 10, 96};
    const fwd_seq seqs[] = {{.block_table = {t0g0, t0g1}}, {.block_table = {t1g0, t1g1}}};
    const fwd_batch b = {.n_tokens = 4, .tokens = tokens, .pos = pos, .seq = seq, .n_seqs = 2, .seqs = seqs,
                         .n_out = 2, .out_rows = rows};
    tp_plan out = {0}, in = {0};
    tp_msg_header h;
    assert_int_equal(tp_plan_encode(&out, &kv, &b, &h), 0);
    /* tables go up to the block of each sequence's last position: 2 and 3 blocks */
    assert_int_equal(h.payload_len, 3 * 4 + (1 + 2 * 2) + (1 + 2 * 3));
    assert_int_equal(tp_plan_reserve(&in, &h), 0);
    memcpy(in.data, out.data, out.len * sizeof *out.data);
    assert_int_equal(tp_plan_decode(&in, &h, kv.block_size), 0);
    const fwd_batch *d = &in.batch;
    assert_int_equal(d->n_tokens, 4);
    assert_int_equal(d->n_seqs, 2);
    assert_int_equal(d->n_out, 0); /* the other ranks compute no logits */
    assert_memory_equal(d->tokens, tokens, sizeof tokens);
    assert_memory_equal(d->pos, pos, sizeof pos);
    assert_memory_equal(d->seq, seq, sizeof seq);
    assert_memory_equal(d->seqs[0].block_table[0], t0g0, 2 * sizeof(int32_t));
    assert_memory_equal(d->seqs[0].block_table[1], t0g1, 2 * sizeof(int32_t));
    assert_memory_equal(d->seqs[1].block_table[0], t1g0, 3 * sizeof(int32_t));
    assert_memory_equal(d->seqs[1].block_table[1], t1g1, 3 * sizeof(int32_t));
    tp_plan_free(&out);
    tp_plan_free(&in);
}

static void test_plan_decode_refuses_malformed_messages(void **state) {
    const kv_cache kv = two_groups();
    const int32_t tokens[] = {1, 2}, pos[] = {0, 1}, seq[] = {0, 0}, t[] = {0};
    const fwd_seq seqs[] = {{.block_table = {t, t}}};
    const fwd_batch b = {.n_tokens = 2, .tokens = tokens, .pos = pos, .seq = seq, .n_seqs = 1, .seqs = seqs};
    tp_plan p = {0};
    tp_msg_header h;
    assert_int_equal(tp_plan_encode(&p, &kv, &b, &h), 0);
    tp_msg_header bad = h;
    bad.payload_len--; /* one int32 short */
    p.len--;
    assert_int_equal(tp_plan_decode(&p, &bad, kv.block_size), -1);
    p.len++;
    bad = h;
    bad.b = 2; /* a second sequence the payload does not hold */
    assert_int_equal(tp_plan_decode(&p, &bad, kv.block_size), -1);
    p.data[2 * 2 + 1] = 5; /* token 1 of sequence 5 */
    assert_int_equal(tp_plan_decode(&p, &h, kv.block_size), -1);
    assert_non_null(strstr(err_get(), "invalid sequence or position"));
    p.data[2 * 2 + 1] = 0;
    p.data[2 + 1] = 4; /* position 4: block 1, past the table of one block */
    assert_int_equal(tp_plan_decode(&p, &h, kv.block_size), -1);
    p.data[2 + 1] = 1;
    assert_int_equal(tp_plan_decode(&p, &h, kv.block_size), 0);
    tp_plan_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_takes_each_ranks_heads_and_columns),
        cmocka_unit_test(test_shard_replicates_a_kv_head_shared_by_ranks),
        cmocka_unit_test(test_shard_refuses_sizes_that_do_not_divide),
        cmocka_unit_test(test_partial_output_projections_sum_to_the_whole),
        cmocka_unit_test(test_shard_splits_quantized_columns_on_blocks),
        cmocka_unit_test(test_plan_round_trip),
        cmocka_unit_test(test_plan_decode_refuses_malformed_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
