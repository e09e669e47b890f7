/* `cllm info MODEL --plan`: the memory a model would take at each precision
 * `cllm quantize` offers, next to its KV cache for a given context and
 * concurrency, so an operator can pick a precision that fits. Weights are
 * counted tensor by tensor: the layers' linear maps in the precision of the
 * row, the token embedding and output head in Q8_0 as quantize keeps them by
 * default (F16 in the F16 row), vectors in F32; "file as is" is the model as
 * loaded. The KV table gives, for each --kv-cache-dtype, the real bytes a
 * token takes (8-bit rows with their scales) and the tokens --kv-cache-memory
 * holds, computed as the engine sizes its pool. */
#include "cli/cli_common.h"
#include "kernels/gq.h"
#include "kernels/wtype.h"
#include "kv/kv_cache.h"
#include "util/mem_size.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *label;
    int bits;  /* 0: the file as is; 16: F16 */
    int group; /* GQ group size, -1 per row */
} plan_row;

static const plan_row k_rows[] = {
    {"file as is", 0, 0},
    {"F16", 16, 0},
    {"INT8 per channel", 8, -1},
    {"INT4 g128", 4, 128},
    {"INT3 g128", 3, 128},
};

static bool is_linear(const char *name) {
    static const char *const suffix[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                         "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    if (strncmp(name, "blk.", 4)) return false;
    const char *dot = strchr(name + 4, '.');
    for (size_t i = 0; dot && i < sizeof suffix / sizeof suffix[0]; i++)
        if (!strcmp(dot + 1, suffix[i])) return true;
    return false;
}

/* Bytes of a tensor of ne0-long rows at a type; the group falls back to the
 * largest of 128, 64, 32 dividing the row (as a quantizer would have to). */
static double tensor_bytes(const model_tensor *t, const plan_row *r) {
    const double rows = (double)(t->ne[1] * t->ne[2] * t->ne[3]);
    const int64_t n = t->ne[0];
    if (r->bits == 0) return (double)t->nbytes;
    if (t->n_dims < 2 || strstr(t->name, ".perm")) return (double)wtype_row_size(WT_F32, n) * rows;
    if (r->bits == 16) return (double)wtype_row_size(WT_F16, n) * rows;
    if (!is_linear(t->name)) {
        const size_t q8 = wtype_row_size(WT_Q8_0, n);
        return (double)(q8 ? q8 : wtype_row_size(WT_F16, n)) * rows;
    }
    int group = r->group;
    while (group > 32 && n % group) group /= 2;
    size_t rb = wtype_row_size((uint32_t)gq_type(r->bits, gq_group_code(group)), n);
    if (!rb) rb = wtype_row_size((uint32_t)gq_type(r->bits, GQ_GROUP_ROW), n);
    return (double)(rb ? rb : wtype_row_size(WT_F16, n)) * rows;
}

void info_print_plan(const model *m, long n_ctx, long concurrency, kv_dtype dt, double kv_per_seq) {
    const double mib = 1024.0 * 1024.0;
    const double kv = kv_per_seq * (double)concurrency;
    const double avail = (double)mem_available_bytes();
    printf("\nmemory plan: %ld sequence%s of %ld tokens, KV cache %s: %.1f MiB\n", concurrency,
           concurrency == 1 ? "" : "s", n_ctx, kv_dtype_name(dt), kv / mib);
    printf("  %-18s %12s %12s %12s  %s\n", "precision", "weights", "KV cache", "total", avail > 0 ? "fits now" : "");
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        double w = 0;
        for (int64_t k = 0; k < m->tensors.n; k++) w += tensor_bytes(&m->tensors.v[k], &k_rows[i]);
        const double total = w + kv;
        printf("  %-18s %8.1f MiB %8.1f MiB %8.1f MiB  %s\n", k_rows[i].label, w / mib, kv / mib, total / mib,
               avail <= 0 ? "" : total <= avail ? "yes" : "no");
    }
    printf("  (quantized rows keep the embedding and output head in Q8_0, as `cllm quantize` does;\n"
           "   compute buffers come on top, a few MiB per token of batch)\n");
    if (avail > 0) printf("  memory available now: %.1f MiB\n", avail / mib);
}

void info_print_kv_capacity(const model *m, size_t kv_memory, int block_size, kv_dtype chosen) {
    printf("\nKV cache in %.1f MiB, blocks of %d tokens (as `cllm serve --kv-cache-memory` sizes it):\n",
           (double)kv_memory / 1048576.0, block_size);
    printf("  %-10s %14s %12s %8s\n", "dtype", "bytes/token", "tokens", "vs f16");
    long f16_tokens = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < KV_DTYPE_COUNT; t++) {
            kv_cache layout;
            kv_cache_layout(&m->kv, (kv_dtype)t, block_size, &layout);
            /* engine_kv_capacity_tokens: every group needs a block per block_size tokens. */
            const long tokens = (long)(kv_memory / kv_block_bytes(&layout)) * block_size / layout.n_groups;
            if (pass == 0) {
                if (t == KV_F16) f16_tokens = tokens;
                continue;
            }
            printf("  %-10s %14zu %12ld %7.2fx%s\n", kv_dtype_name((kv_dtype)t),
                   kv_bytes_per_token(&m->kv, (kv_dtype)t), tokens,
                   f16_tokens ? (double)tokens / (double)f16_tokens : 0.0, t == (int)chosen ? "  (chosen)" : "");
        }
}
