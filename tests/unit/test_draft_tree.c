/* A tree of draft tokens in one forward pass (speculative decoding over a
 * tree, fwd_batch.tree): every node's logits have the bits of the path from
 * the root to it run as an ordinary chain after the same prefix, on a small
 * random Llama-shaped model (grouped-query attention, two layers, blocks of
 * 16 so the tree crosses a block boundary), with 1 and 2 threads. A node
 * that saw a sibling, or was rotated at its KV slot rather than at its
 * depth, would differ. A batch naming a node outside the tree is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/gguf_write.h"
#include "format/wtype_geom.h"
#include "kernels/wtype.h"
#include "model/runner.h"
#include "util/error.h"
#include "util/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EMBD = 64, HEADS = 4, KV_HEADS = 2, FF = 96, LAYERS = 2, VOCAB = 97, PROMPT = 21, NODES = 12 };

static char g_path[64];

static int add_random(gguf_writer *w, const char *name, int64_t n_in, int64_t n_out, float mag, rng_state *r,
                      float **keep, int *n_keep) {
    float *x = malloc((size_t)(n_in * n_out) * sizeof *x);
    if (!x) return -1;
    for (int64_t i = 0; i < n_in * n_out; i++) x[i] = (float)((rng_uniform(r) * 2 - 1) * mag);
    keep[(*n_keep)++] = x;
    const int64_t ne[2] = {n_in, n_out};
    return gguf_writer_add_tensor(w, name, WT_F32, n_out > 1 ? 2 : 1, ne, x);
}

/* A Llama-shaped GGUF of random F32 weights. */
static int write_model(const char *path) {
    gguf_writer *w = gguf_writer_new();
    rng_state r;
    rng_seed(&r, 7);
    float *keep[64];
    int n_keep = 0, rc = 0;
    rc |= gguf_writer_set_str(w, "general.architecture", "llama");
    rc |= gguf_writer_set_u32(w, "llama.context_length", 256);
    rc |= gguf_writer_set_u32(w, "llama.embedding_length", EMBD);
    rc |= gguf_writer_set_u32(w, "llama.block_count", LAYERS);
    rc |= gguf_writer_set_u32(w, "llama.feed_forward_length", FF);
    rc |= gguf_writer_set_u32(w, "llama.attention.head_count", HEADS);
    rc |= gguf_writer_set_u32(w, "llama.attention.head_count_kv", KV_HEADS);
    rc |= gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    rc |= gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    /* A tokenizer the loader accepts: distinct pieces, no merges needed. */
    char texts[VOCAB][8];
    const char *tok_ptrs[VOCAB];
    float scores[VOCAB] = {0};
    for (int i = 0; i < VOCAB; i++) {
        snprintf(texts[i], sizeof texts[i], i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "t%d", i);
        tok_ptrs[i] = texts[i];
    }
    rc |= gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    rc |= gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok_ptrs, VOCAB);
    rc |= gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, VOCAB);
    const int hd = EMBD / HEADS;
    rc |= add_random(w, "token_embd.weight", EMBD, VOCAB, 1.0f, &r, keep, &n_keep);
    rc |= add_random(w, "output_norm.weight", EMBD, 1, 1.0f, &r, keep, &n_keep);
    rc |= add_random(w, "output.weight", EMBD, VOCAB, 0.3f, &r, keep, &n_keep);
    for (int l = 0; l < LAYERS && !rc; l++) {
        char n[64];
#define ADD(NAME, IN, OUT, MAG) \
    (snprintf(n, sizeof n, "blk.%d." NAME ".weight", l), add_random(w, n, IN, OUT, MAG, &r, keep, &n_keep))
        rc |= ADD("attn_norm", EMBD, 1, 1.0f);
        rc |= ADD("attn_q", EMBD, HEADS * hd, 0.3f);
        rc |= ADD("attn_k", EMBD, KV_HEADS * hd, 0.3f);
        rc |= ADD("attn_v", EMBD, KV_HEADS * hd, 0.3f);
        rc |= ADD("attn_output", HEADS * hd, EMBD, 0.2f);
        rc |= ADD("ffn_norm", EMBD, 1, 1.0f);
        rc |= ADD("ffn_gate", EMBD, FF, 0.2f);
        rc |= ADD("ffn_up", EMBD, FF, 0.2f);
        rc |= ADD("ffn_down", FF, EMBD, 0.2f);
#undef ADD
    }
    if (!rc) rc = gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    for (int i = 0; i < n_keep; i++) free(keep[i]);
    return rc;
}

static int setup(void **state) {
    (void)state;
    wtype_init();
    snprintf(g_path, sizeof g_path, "/tmp/cllm-test-tree-%d.gguf", (int)getpid());
    if (write_model(g_path)) {
        fprintf(stderr, "write_model: %s\n", err_get());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(g_path);
    return 0;
}

/* One batch of n tokens of the runner's one sequence at positions pos
 * (rotated at rope_pos, NULL: pos), logits of every row into out. */
static int run(runner *rn, const int32_t *tokens, const int32_t *pos, const int32_t *rope_pos,
               const uint32_t *tree, int tree_base, int n, float *out) {
    int32_t seq[64], rows[64];
    for (int i = 0; i < n; i++) seq[i] = 0, rows[i] = i;
    fwd_seq s = runner_identity_seq(rn);
    s.tree_base = tree_base;
    const fwd_batch b = {.n_tokens = n, .tokens = tokens, .pos = pos, .seq = seq, .n_seqs = 1, .seqs = &s,
                         .n_out = n, .out_rows = rows, .tree = tree, .rope_pos = rope_pos};
    return runner_run(rn, &b, out);
}

static void check_tree(int n_threads) {
    model *m = model_load(g_path);
    if (!m) fail_msg("model_load: %s", err_get());
    runner rn;
    const runner_config rc = {.kv_type = KV_F32, .block_size = 16, .n_blocks = 8, .max_tokens = 64,
                              .max_out = 64, .n_threads = n_threads, .identity_blocks = 8};
    if (runner_init(&rn, m, &rc)) fail_msg("runner_init: %s", err_get());
    const int parent[NODES] = {-1, 0, 0, 1, 1, 2, 3, 3, 0, 5, 8, 9};
    int32_t prompt[PROMPT], pos[64], tok[NODES], rope[NODES], depth[NODES];
    uint32_t anc[NODES];
    for (int i = 0; i < PROMPT; i++) prompt[i] = (i * 37 + 11) % VOCAB, pos[i] = i;
    float *tree_logits = malloc(sizeof(float) * NODES * VOCAB), *chain = malloc(sizeof(float) * 64 * VOCAB);
    assert_int_equal(run(&rn, prompt, pos, NULL, NULL, 0, PROMPT, chain), 0);
    for (int i = 0; i < NODES; i++) {
        tok[i] = (i * 53 + 5) % VOCAB;
        depth[i] = i ? depth[parent[i]] + 1 : 0;
        anc[i] = (i ? anc[parent[i]] : 0) | 1u << i;
        pos[i] = PROMPT + i, rope[i] = PROMPT + depth[i];
    }
    assert_int_equal(run(&rn, tok, pos, rope, anc, PROMPT, NODES, tree_logits), 0);
    for (int i = 0; i < NODES; i++) {
        int32_t path[NODES], n = 0, cpos[NODES];
        for (int v = i; v >= 0; v = parent[v]) path[n++] = tok[v];
        for (int a = 0, b = n - 1; a < b; a++, b--) {
            const int32_t t = path[a];
            path[a] = path[b], path[b] = t;
        }
        for (int j = 0; j < n; j++) cpos[j] = PROMPT + j;
        assert_int_equal(run(&rn, path, cpos, NULL, NULL, 0, n, chain), 0);
        const float *want = chain + (size_t)(n - 1) * VOCAB, *got = tree_logits + (size_t)i * VOCAB;
        if (memcmp(got, want, sizeof(float) * VOCAB)) {
            double diff = 0;
            for (int v = 0; v < VOCAB; v++) diff = fmax(diff, fabs((double)got[v] - want[v]));
            fail_msg("threads %d node %d (depth %d): logits up to %g from its path's", n_threads, i, depth[i], diff);
        }
    }
    /* A node whose own bit is clear, and one past the tree's 32 slots. */
    uint32_t bad[NODES];
    memcpy(bad, anc, sizeof bad);
    bad[4] &= ~(1u << 4);
    assert_int_equal(run(&rn, tok, pos, rope, bad, PROMPT, NODES, tree_logits), -1);
    assert_non_null(strstr(err_get(), "draft tree"));
    assert_int_equal(run(&rn, tok, pos, rope, anc, PROMPT - 40, NODES, tree_logits), -1);
    free(tree_logits), free(chain);
    runner_destroy(&rn);
    model_free(m);
}

static void test_tree_nodes_match_their_paths(void **state) {
    (void)state;
    check_tree(1);
    check_tree(2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_nodes_match_their_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
