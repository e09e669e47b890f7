/* Medusa heads without a real model: a hand-made model of an F32 (and a
 * Q8_0) output matrix. medusa_propose gives the tokens a scalar reference
 * gives (y = h + SiLU(W h + b), the argmax over the draft rows of the output
 * matrix, mapped back to token ids), the same in any batch, and with their
 * probabilities (softmax over the draft rows) as the reference's; chained (Hydra)
 * heads drafting a chain or a tree give, node by node, what a recursive
 * scalar reference gives (each node's children from its parent's state and
 * its own token's embedding), and independent heads fill a tree with each
 * depth's ranked candidates; the file keeps every parameter of both kinds
 * (F32 exactly, F16 within half precision, Q8_0 within half a step); and the loader refuses heads
 * made for another shape, a draft token outside the vocabulary and a file
 * that is not Medusa heads or holds a kind of heads cllm does not run,
 * naming each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/gguf_write.h"
#include "kernels/wtype.h"
#include "model/medusa.h"
#include "util/error.h"
#include "util/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { E = 64, V = 200, N = 48, K = 3 };

typedef struct {
    model m;
    float *out; /* [V][E] */
    void *q;    /* a Q8_0 copy */
} fake_model;

static float unif(rng_state *r) { return (float)(rng_uniform(r) * 2.0 - 1.0); }

static void fake_init(fake_model *f, uint64_t seed, bool q8) {
    memset(f, 0, sizeof *f);
    rng_state r;
    rng_seed(&r, seed);
    f->out = malloc((size_t)V * E * sizeof(float));
    for (int i = 0; i < V * E; i++) f->out[i] = unif(&r);
    f->m.name = "fake";
    f->m.hp.n_embd = E;
    f->m.hp.n_vocab = V;
    f->m.w.output = (weight){.data = f->out, .type = WT_F32, .n_in = E, .n_out = V, .row_bytes = E * sizeof(float)};
    f->m.w.tok_embd = f->m.w.output; /* tied */
    if (q8) {
        const size_t rb = wtype_row_size(WT_Q8_0, E);
        f->q = malloc((size_t)V * rb);
        for (int i = 0; i < V; i++) wtype_get(WT_Q8_0)->from_float(f->out + (size_t)i * E, (char *)f->q + i * rb, E);
        f->m.w.output = (weight){.data = f->q, .type = WT_Q8_0, .n_in = E, .n_out = V, .row_bytes = rb};
    }
}

static void fake_free(fake_model *f) {
    free(f->out);
    free(f->q);
}

static void random_kind(medusa_params *p, uint64_t seed, bool chained) {
    rng_state r;
    rng_seed(&r, seed);
    int32_t vocab[N];
    for (int i = 0; i < N; i++) vocab[i] = (i * 37 + 11) % V; /* distinct: 37 is prime to 200 */
    assert_int_equal(medusa_params_init(p, K, E, vocab, N, chained), 0);
    assert_int_equal(p->n_in, chained ? 2 * E : E);
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < E * p->n_in; i++) p->w[k][i] = 0.2f * unif(&r);
        for (int i = 0; i < E; i++) p->b[k][i] = 0.2f * unif(&r);
        p->top1[k] = 0.5f, p->top5[k] = 0.75f;
    }
}

static void random_heads(medusa_params *p, uint64_t seed) { random_kind(p, seed, false); }

/* The reference: the draft token of head k for hidden state h, with the
 * output matrix as floats (dequantized rows for a quantized one). */
static void ref_head(const medusa_params *p, const float *h, int k, float *y) {
    for (int o = 0; o < E; o++) {
        double z = p->b[k][o];
        for (int i = 0; i < E; i++) z += (double)p->w[k][(size_t)o * E + i] * h[i];
        y[o] = h[o] + (float)(z / (1.0 + exp(-z)));
    }
}

static int32_t ref_token(const medusa_params *p, const model *m, const float *h, int k) {
    float y[E], row[E];
    ref_head(p, h, k, y);
    int best = -1;
    double best_z = -INFINITY;
    for (int j = 0; j < p->n_draft_vocab; j++) {
        weight_row_to_float(&m->w.output, p->draft_vocab[j], row);
        double z = 0;
        for (int i = 0; i < E; i++) z += (double)row[i] * y[i];
        if (z > best_z) best_z = z, best = p->draft_vocab[j];
    }
    return best;
}

/* The softmax probability over the draft rows of `token` for state y, in doubles. */
static double ref_prob(const medusa_params *p, const model *m, const float *y, int32_t token) {
    double z[N], max = -INFINITY, sum = 0, at = NAN;
    float row[E];
    for (int j = 0; j < N; j++) {
        weight_row_to_float(&m->w.output, p->draft_vocab[j], row);
        z[j] = 0;
        for (int i = 0; i < E; i++) z[j] += (double)row[i] * y[i];
        if (z[j] > max) max = z[j];
    }
    for (int j = 0; j < N; j++) {
        sum += exp(z[j] - max);
        if (p->draft_vocab[j] == token) at = z[j];
    }
    return exp(at - max) / sum;
}

static const int8_t k_chain_parent[K] = {-1, 0, 1};
static const int8_t k_chain_rank[K] = {0, 0, 0};

/* min_agree: how many of the 16 x K tokens must be the reference's. */
static void check_propose(bool q8, wtype block_type, int min_agree) {
    fake_model f;
    fake_init(&f, 3, q8);
    medusa_params p, copy;
    random_heads(&p, 5);
    random_heads(&copy, 5);
    medusa_heads *h = medusa_create(&p, &f.m, 16, K, block_type);
    assert_non_null(h);
    assert_int_equal(medusa_n_heads(h), K);
    rng_state r;
    rng_seed(&r, 9);
    float hidden[16 * E];
    for (int i = 0; i < 16 * E; i++) hidden[i] = unif(&r);
    int32_t all[16 * K], one[K];
    medusa_propose(h, NULL, hidden, 16, K, all);
    int agree = 0;
    for (int row = 0; row < 16; row++) {
        medusa_propose(h, NULL, hidden + row * E, 1, K, one);
        for (int k = 0; k < K; k++) {
            assert_int_equal(one[k], all[row * K + k]); /* the same in any batch */
            agree += one[k] == ref_token(&copy, &f.m, hidden + row * E, k);
        }
    }
    assert_true(agree >= min_agree);
    int32_t two[16 * 2];
    medusa_propose(h, NULL, hidden, 16, 2, two); /* fewer heads: the first ones' tokens */
    for (int row = 0; row < 16; row++)
        for (int k = 0; k < 2; k++) assert_int_equal(two[row * 2 + k], all[row * K + k]);
    /* A chain of K drafts: head k's best token, and the probability head k gave it. */
    int32_t chain[16 * K];
    float prob[16 * K];
    medusa_draft(h, NULL, hidden, NULL, 16, k_chain_parent, k_chain_rank, K, chain, prob);
    for (int row = 0; row < 16; row++)
        for (int k = 0; k < K; k++) {
            assert_int_equal(chain[row * K + k], all[row * K + k]);
            float y[E];
            ref_head(&copy, hidden + row * E, k, y);
            const double want = ref_prob(&copy, &f.m, y, chain[row * K + k]);
            assert_true(prob[row * K + k] > 0 && prob[row * K + k] <= 1);
            /* F32 blocks: float sums against doubles; Q8_0 blocks and rows: their rounding */
            assert_float_equal(prob[row * K + k], want, block_type == WT_F32 && !q8 ? 1e-4 : 0.05);
        }
    medusa_free(h);
    medusa_params_free(&copy);
    fake_free(&f);
}

static void test_propose_matches_reference_f32(void **state) {
    (void)state;
    check_propose(false, WT_F32, 16 * K); /* every token */
}

static void test_propose_matches_reference_q8_0(void **state) {
    (void)state;
    check_propose(true, WT_F32, 16 * K - 2); /* Q8_0 activations round, so a near tie may flip */
}

static void test_q8_0_blocks_match_reference(void **state) {
    (void)state;
    /* The engine runs the blocks in Q8_0: the weights round too, so more
     * near ties may flip, but the guesses are still the reference's almost
     * everywhere, and the same in any batch. */
    check_propose(false, WT_Q8_0, 16 * K - 4);
    check_propose(true, WT_Q8_0, 16 * K - 4);
}

static void test_zero_heads_guess_the_models_own_next_token(void **state) {
    (void)state;
    /* Medusa's initialization: y = h, so every head's guess is the draft
     * row the output matrix scores highest for h. */
    fake_model f;
    fake_init(&f, 4, false);
    int32_t vocab[V];
    for (int i = 0; i < V; i++) vocab[i] = i;
    medusa_params p;
    assert_int_equal(medusa_params_init(&p, 2, E, vocab, V, false), 0);
    medusa_heads *h = medusa_create(&p, &f.m, 1, 2, WT_F32);
    assert_non_null(h);
    rng_state r;
    rng_seed(&r, 1);
    float x[E];
    for (int i = 0; i < E; i++) x[i] = unif(&r);
    int best = 0;
    double best_z = -INFINITY;
    for (int v = 0; v < V; v++) {
        double z = 0;
        for (int i = 0; i < E; i++) z += (double)f.out[(size_t)v * E + i] * x[i];
        if (z > best_z) best_z = z, best = v;
    }
    int32_t t[2];
    medusa_propose(h, NULL, x, 1, 2, t);
    assert_int_equal(t[0], best);
    assert_int_equal(t[1], best);
    medusa_free(h);
    fake_free(&f);
}

/* ---- chained (Hydra) heads ---- */

/* A tree of 7 nodes: the root's top three, the second head's best and
 * second after node 0, its best after node 1, the third's best after node 3. */
static const int8_t k_parent[7] = {-1, -1, -1, 0, 0, 1, 3};
static const int8_t k_rank[7] = {0, 1, 2, 0, 1, 0, 0};

/* Block j on state z and token x, as the header writes it, in doubles:
 * z + SiLU(W [n(z); n(e(x))] + b), e(x) the embedding row, n at unit RMS. */
static void ref_block(const medusa_params *p, const model *m, int j, const float *z, int32_t x, float *out) {
    float in[2 * E], row[E];
    weight_row_to_float(&m->w.tok_embd, x, row);
    double sz = 0, se = 0;
    for (int i = 0; i < E; i++) sz += (double)z[i] * z[i], se += (double)row[i] * row[i];
    for (int i = 0; i < E; i++) in[i] = (float)(z[i] / sqrt(sz / E)), in[E + i] = (float)(row[i] / sqrt(se / E));
    for (int o = 0; o < E; o++) {
        double a = p->b[j][o];
        for (int i = 0; i < 2 * E; i++) a += (double)p->w[j][(size_t)o * 2 * E + i] * in[i];
        out[o] = z[o] + (float)(a / (1.0 + exp(-a)));
    }
}

/* The draft token of rank `rank` for state y: draft rows by logit, highest first, the lower row among equals. */
static int32_t ref_ranked(const medusa_params *p, const model *m, const float *y, int rank) {
    double z[N];
    float row[E];
    for (int j = 0; j < N; j++) {
        weight_row_to_float(&m->w.output, p->draft_vocab[j], row);
        z[j] = 0;
        for (int i = 0; i < E; i++) z[j] += (double)row[i] * y[i];
    }
    for (int j = 0; j < N; j++) {
        int above = 0;
        for (int v = 0; v < N; v++) above += z[v] > z[j] || (z[v] == z[j] && v < j);
        if (above == rank) return p->draft_vocab[j];
    }
    return -1;
}

/* Node j's token by recursion: its parent's children come from block
 * depth(j) on (the state that made the parent, the parent's token). */
static void ref_tree(const medusa_params *p, const model *m, const float *h, int32_t last, const int8_t *parent,
                     const int8_t *rank, int n, int32_t *tok, double *prob) {
    float state[8][E]; /* state[x + 1]: what expanding x made */
    bool made[8] = {false};
    int depth[8];
    for (int j = 0; j < n; j++) {
        depth[j] = parent[j] < 0 ? 0 : depth[parent[j]] + 1;
        const int x = parent[j];
        if (!made[x + 1]) {
            ref_block(p, m, depth[j], x < 0 ? h : state[parent[x] + 1], x < 0 ? last : tok[x], state[x + 1]);
            made[x + 1] = true;
        }
        tok[j] = ref_ranked(p, m, state[x + 1], rank[j]);
        prob[j] = ref_prob(p, m, state[x + 1], tok[j]);
    }
}

static void check_chained(const int8_t *parent, const int8_t *rank, int n_nodes, wtype block_type, int max_miss) {
    fake_model f;
    fake_init(&f, 3, false);
    medusa_params p, copy;
    random_kind(&p, 5, true);
    random_kind(&copy, 5, true);
    medusa_heads *h = medusa_create(&p, &f.m, 8, n_nodes, block_type);
    assert_non_null(h);
    assert_true(medusa_chained(h));
    rng_state r;
    rng_seed(&r, 9);
    float hidden[8 * E];
    int32_t last[8];
    for (int i = 0; i < 8 * E; i++) hidden[i] = unif(&r);
    for (int i = 0; i < 8; i++) last[i] = (int32_t)(rng_next(&r) % V);
    int32_t all[8 * 8], one[8], want[8];
    float all_prob[8 * 8], one_prob[8];
    double want_prob[8];
    medusa_draft(h, NULL, hidden, last, 8, parent, rank, n_nodes, all, all_prob);
    int agree = 0;
    for (int row = 0; row < 8; row++) {
        medusa_draft(h, NULL, hidden + row * E, last + row, 1, parent, rank, n_nodes, one, one_prob);
        ref_tree(&copy, &f.m, hidden + row * E, last[row], parent, rank, n_nodes, want, want_prob);
        bool same_path = true; /* a node's probability is the reference's while its ancestors and it agree */
        for (int j = 0; j < n_nodes; j++) {
            assert_int_equal(one[j], all[row * n_nodes + j]); /* the same in any batch */
            assert_float_equal(one_prob[j], all_prob[row * n_nodes + j], 0);
            agree += one[j] == want[j];
            same_path = same_path && one[j] == want[j];
            /* Q8_0 blocks: their rounding, carried through the chained states, moves a probability a few hundredths */
            if (same_path) assert_float_equal(one_prob[j], want_prob[j], block_type == WT_F32 ? 1e-4 : 0.08);
        }
    }
    /* The kernels sum in float, the reference in double: a near tie may flip one node (and its subtree). */
    assert_true(agree >= 8 * n_nodes - max_miss);
    medusa_free(h);
    medusa_params_free(&copy);
    fake_free(&f);
}

static void test_chained_chain_matches_reference(void **state) {
    (void)state;
    check_chained(k_chain_parent, k_chain_rank, K, WT_F32, 3);
}

static void test_chained_tree_matches_reference(void **state) {
    (void)state;
    check_chained(k_parent, k_rank, 7, WT_F32, 3);
}

static void test_chained_q8_0_blocks_match_reference(void **state) {
    (void)state;
    /* A flip high in a tree takes its subtree with it: up to two such per 8 rows. */
    check_chained(k_chain_parent, k_chain_rank, K, WT_Q8_0, 6);
    check_chained(k_parent, k_rank, 7, WT_Q8_0, 10);
}

static void test_chained_heads_read_the_token(void **state) {
    (void)state;
    /* The same hidden state after two different tokens: chained heads' guesses differ for most rows. */
    fake_model f;
    fake_init(&f, 3, false);
    medusa_params p;
    random_kind(&p, 6, true);
    medusa_heads *h = medusa_create(&p, &f.m, 16, K, WT_F32);
    assert_non_null(h);
    rng_state r;
    rng_seed(&r, 2);
    float hidden[16 * E];
    int32_t a[16], b[16], ta[16 * K], tb[16 * K];
    for (int i = 0; i < 16 * E; i++) hidden[i] = unif(&r);
    for (int i = 0; i < 16; i++) a[i] = 7, b[i] = 150;
    medusa_draft(h, NULL, hidden, a, 16, k_chain_parent, k_chain_rank, K, ta, NULL);
    medusa_draft(h, NULL, hidden, b, 16, k_chain_parent, k_chain_rank, K, tb, NULL);
    int differ = 0;
    for (int i = 0; i < 16; i++) differ += ta[i * K] != tb[i * K];
    assert_true(differ >= 8);
    medusa_free(h);
    fake_free(&f);
}

static void test_independent_heads_fill_a_tree_by_depth_and_rank(void **state) {
    (void)state;
    fake_model f;
    fake_init(&f, 3, false);
    medusa_params p;
    random_heads(&p, 5);
    medusa_heads *h = medusa_create(&p, &f.m, 8, 7, WT_F32);
    assert_non_null(h);
    assert_false(medusa_chained(h));
    rng_state r;
    rng_seed(&r, 4);
    float hidden[8 * E];
    int32_t last[8] = {0}, tree[8 * 7], cand[8 * 3 * 3];
    for (int i = 0; i < 8 * E; i++) hidden[i] = unif(&r);
    medusa_draft(h, NULL, hidden, last, 8, k_parent, k_rank, 7, tree, NULL);
    medusa_propose_top(h, NULL, hidden, 8, 3, 3, cand);
    const int depth[7] = {0, 0, 0, 1, 1, 1, 2};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 7; j++) assert_int_equal(tree[i * 7 + j], cand[(i * 3 + depth[j]) * 3 + k_rank[j]]);
    medusa_free(h);
    fake_free(&f);
}

static char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "/tmp/cllm_test_medusa_%d_%s", (int)getpid(), name);
    return buf;
}

static void test_file_round_trip(void **state) {
    (void)state;
    fake_model f;
    fake_init(&f, 3, false);
    for (int chained = 0; chained < 2; chained++) {
        medusa_params p, back;
        random_kind(&p, 7, chained);
        const wtype types[] = {WT_F32, WT_F16, WT_Q8_0};
        for (int ti = 0; ti < 3; ti++) {
            const wtype type = types[ti];
            const char *path = tmp_path(wtype_name(type));
            assert_int_equal(medusa_save(&p, &f.m, path, type), 0);
            assert_int_equal(medusa_load(&back, &f.m, path), 0);
            assert_int_equal(back.n_heads, K);
            assert_int_equal(back.n_embd, E);
            assert_int_equal(back.chained, chained);
            assert_int_equal(back.n_in, p.n_in);
            assert_int_equal(back.n_draft_vocab, N);
            assert_memory_equal(back.draft_vocab, p.draft_vocab, N * sizeof(int32_t));
            for (int k = 0; k < K; k++) {
                for (int i = 0; i < E * p.n_in; i++) {
                    const float d = fabsf(back.w[k][i] - p.w[k][i]);
                    if (type == WT_F32) {
                        assert_true(back.w[k][i] == p.w[k][i]);
                    } else if (type == WT_F16) {
                        assert_true(d <= 1e-3f * fabsf(p.w[k][i]) + 1e-7f);
                    } else { /* Q8_0: half a step of its block's scale (amax / 127, itself an F16) */
                        float amax = 0;
                        for (int j = i - i % 32; j < i - i % 32 + 32; j++) amax = fmaxf(amax, fabsf(p.w[k][j]));
                        assert_true(d <= amax * (0.5f / 127 + 1e-3f) + 1e-7f);
                    }
                }
                assert_memory_equal(back.b[k], p.b[k], E * sizeof(float));
                assert_true(back.top1[k] == 0.5f && back.top5[k] == 0.75f);
            }
            medusa_params_free(&back);
            unlink(path);
        }
        medusa_params_free(&p);
    }
    fake_free(&f);
}

/* An exit adapter (one block, medusa.kind "exit") keeps its layer through the file, and a model with fewer
 * layers than that is refused. */
static void test_exit_adapter_round_trip(void **state) {
    (void)state;
    fake_model f;
    fake_init(&f, 3, false);
    f.m.hp.n_layer = 4;
    medusa_params p, back;
    random_kind(&p, 7, false);
    p.n_heads = 1;
    p.exit_layer = 3;
    const char *path = tmp_path("exit.gguf");
    assert_int_equal(medusa_save(&p, &f.m, path, WT_F16), 0);
    assert_int_equal(medusa_load(&back, &f.m, path), 0);
    assert_int_equal(back.exit_layer, 3);
    assert_int_equal(back.n_heads, 1);
    assert_false(back.chained);
    medusa_params_free(&back);
    f.m.hp.n_layer = 2;
    assert_int_equal(medusa_load(&back, &f.m, path), -1);
    assert_non_null(strstr(err_get(), "medusa.exit_layer in 1..2"));
    f.m.hp.n_layer = 4;
    p.exit_layer = 0; /* the same block as a Medusa head */
    assert_int_equal(medusa_save(&p, &f.m, path, WT_F16), 0);
    assert_int_equal(medusa_load(&back, &f.m, path), 0);
    assert_int_equal(back.exit_layer, 0);
    medusa_params_free(&back);
    unlink(path);
    medusa_params_free(&p);
    fake_free(&f);
}

static void test_loader_refuses_what_does_not_fit(void **state) {
    (void)state;
    fake_model f, wide;
    fake_init(&f, 3, false);
    fake_init(&wide, 3, false);
    medusa_params p, back;
    random_heads(&p, 7);
    const char *path = tmp_path("refuse.gguf");
    assert_int_equal(medusa_save(&p, &f.m, path, WT_F16), 0);
    wide.m.hp.n_embd = 2 * E; /* another model's shape */
    assert_int_equal(medusa_load(&back, &wide.m, path), -1);
    assert_non_null(strstr(err_get(), "hidden size 64"));
    assert_non_null(strstr(err_get(), "cllm medusa train"));
    wide.m.hp.n_embd = E;
    wide.m.hp.n_vocab = 40; /* draft tokens past its vocabulary, and another vocabulary size */
    assert_int_equal(medusa_load(&back, &wide.m, path), -1);
    assert_non_null(strstr(err_get(), "200 tokens"));
    unlink(path);

    /* A kind of heads cllm does not run: the file's "medusa" value of medusa.kind rewritten in place. */
    assert_int_equal(medusa_save(&p, &f.m, path, WT_F16), 0);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    rewind(fp);
    char *bytes = malloc((size_t)size);
    assert_int_equal(fread(bytes, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    const char key[] = "medusa.kind";
    char *at = memmem(bytes, (size_t)size, key, sizeof key - 1);
    assert_non_null(at);
    at += sizeof key - 1 + 4 + 8; /* the value's type (u32) and length (u64) */
    assert_memory_equal(at, "medusa", 6);
    memcpy(at, "eagle3", 6);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    free(bytes);
    assert_int_equal(medusa_load(&back, &f.m, path), -1);
    assert_non_null(strstr(err_get(), "medusa.kind is \"eagle3\""));
    assert_non_null(strstr(err_get(), "\"hydra\""));
    unlink(path);

    gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "llama"), 0);
    assert_int_equal(gguf_writer_write_file(w, path), 0);
    gguf_writer_free(w);
    assert_int_equal(medusa_load(&back, &f.m, path), -1);
    assert_non_null(strstr(err_get(), "not a Medusa heads file"));
    unlink(path);
    assert_int_equal(medusa_load(&back, &f.m, "/nonexistent/heads.gguf"), -1);
    assert_non_null(strstr(err_get(), "/nonexistent/heads.gguf"));
    medusa_params_free(&p);
    fake_free(&f);
    fake_free(&wide);
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_propose_matches_reference_f32),
        cmocka_unit_test(test_propose_matches_reference_q8_0),
        cmocka_unit_test(test_q8_0_blocks_match_reference),
        cmocka_unit_test(test_zero_heads_guess_the_models_own_next_token),
        cmocka_unit_test(test_chained_chain_matches_reference),
        cmocka_unit_test(test_chained_tree_matches_reference),
        cmocka_unit_test(test_chained_q8_0_blocks_match_reference),
        cmocka_unit_test(test_chained_heads_read_the_token),
        cmocka_unit_test(test_independent_heads_fill_a_tree_by_depth_and_rank),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_exit_adapter_round_trip),
        cmocka_unit_test(test_loader_refuses_what_does_not_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
