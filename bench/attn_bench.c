/* attn_bench: paged attention over one long sequence, per KV cache dtype, on
 * one thread: a decode step (one token, the GQA group's query heads as one
 * tile, as forward.c cuts decode) and a prefill tile (ATTN_TILE_ROWS rows),
 * over --ctx cached tokens of one kv head. Prints the best of --reps passes:
 * microseconds, KV bytes read and GB/s, and the time against f16. The shape
 * defaults to a gemma-3-270m global layer (head_dim 256, 4 query heads per
 * kv head, blocks of 16). With --mass the tiles also add each key's
 * attention mass (attn_tile.key_mass), as they do for an h2o sequence.
 *
 * usage: attn_bench [--ctx N] [--head-dim D] [--group G] [--reps R] [--mass] */
#include "kernels/attention.h"
#include "kv/kv_cache.h"
#include "util/time.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * 0x1.0p-53) * 2.0f - 1.0f;
}

/* Best seconds of `reps` passes of the tile of n_tok tokens x group heads at the end of the context. */
static double time_tile(const paged_kv *kv, const int32_t *table, int ctx, int n_tok, int group, int reps,
                        const float *q, float *out, int64_t *mass) {
    int32_t lo[ATTN_TILE_ROWS], hi[ATTN_TILE_ROWS];
    for (int i = 0; i < n_tok; i++) lo[i] = 0, hi[i] = ctx - n_tok + i;
    const attn_tile t = {.q = q, .out = out, .q_stride = (size_t)group * kv->head_dim_k,
                         .out_stride = (size_t)group * kv->head_dim_v, .lo = lo, .hi = hi, .n_tok = n_tok,
                         .n_head = group, .key_mass = mass};
    const attn_tile_fn fn = attn_tile_best();
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_seconds();
        fn(kv, table, 0, &t, 1.0f / sqrtf((float)kv->head_dim_k));
        const double dt = now_seconds() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    int ctx = 4000, dim = 256, group = 4, reps = 20;
    bool with_mass = false;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--mass")) with_mass = true, i--;
        else if (i + 1 >= argc) ctx = 0; /* a flag without its value: the usage below */
        else if (!strcmp(argv[i], "--ctx")) ctx = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--head-dim")) dim = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--group")) group = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: attn_bench [--ctx N] [--head-dim D] [--group G] [--reps R] [--mass]\n");
            return 2;
        }
    }
    if (ctx < ATTN_TILE_ROWS || dim < 1 || group < 1 || group > ATTN_TILE_ROWS || reps < 1) {
        fprintf(stderr, "attn_bench: need --ctx >= %d, --head-dim >= 1, 1 <= --group <= %d\n", ATTN_TILE_ROWS,
                ATTN_TILE_ROWS);
        return 2;
    }
    const int bs = 16, n_blocks = (ctx + bs - 1) / bs;
    int32_t *table = malloc(sizeof(int32_t) * n_blocks);
    for (int b = 0; b < n_blocks; b++) table[b] = b; /* contiguous */
    const int prefill_tok = ATTN_TILE_ROWS / group;
    float *q = malloc(sizeof(float) * ATTN_TILE_ROWS * dim), *out = malloc(sizeof(float) * ATTN_TILE_ROWS * dim);
    float *x = malloc(sizeof(float) * dim);
    int64_t *mass = with_mass ? calloc((size_t)ctx, sizeof *mass) : NULL;
    for (int i = 0; i < ATTN_TILE_ROWS * dim; i++) q[i] = frand();
    printf("context %d, head_dim %d, %d query heads per kv head, blocks of %d, 1 thread%s\n", ctx, dim, group, bs,
           with_mass ? ", with key mass" : "");
    printf("%-10s %12s %10s %9s %8s %14s %8s\n", "dtype", "KV bytes", "decode us", "GB/s", "vs f16",
           "prefill us", "vs f16");
    double f16_decode = 0, f16_prefill = 0;
    const kv_dtype order[] = {KV_F16, KV_F32, KV_BF16, KV_INT8, KV_FP8_E4M3, KV_FP8_E5M2};
    for (int o = 0; o < 6; o++) {
        const kv_dtype t = order[o];
        const size_t row = kv_row_bytes(t, dim), rows = (size_t)n_blocks * bs;
        uint8_t *k = malloc(rows * row), *v = malloc(rows * row);
        for (size_t r = 0; r < rows; r++) {
            for (int d = 0; d < dim; d++) x[d] = frand();
            kv_row_store(t, x, k + r * row, dim);
            for (int d = 0; d < dim; d++) x[d] = frand();
            kv_row_store(t, x, v + r * row, dim);
        }
        const paged_kv kv = {.k = k, .v = v, .k_block_stride = bs * row, .v_block_stride = bs * row, .dtype = t,
                             .block_size = bs, .n_kv_heads = 1, .head_dim_k = dim, .head_dim_v = dim};
        const double dec = time_tile(&kv, table, ctx, 1, group, reps, q, out, mass);
        const double pre = time_tile(&kv, table, ctx, prefill_tok, group, reps, q, out, mass);
        if (t == KV_F16) f16_decode = dec, f16_prefill = pre;
        const double bytes = 2.0 * ctx * row;
        printf("%-10s %12.0f %10.1f %9.2f %7.2fx %14.1f %7.2fx\n", kv_dtype_name(t), bytes, dec * 1e6,
               bytes / dec / 1e9, f16_decode / dec, pre * 1e6, f16_prefill / pre);
        free(k), free(v);
    }
    free(table), free(q), free(out), free(x), free(mass);
    return 0;
}
