/* `cllm info MODEL`: what a model is and what it costs to run: architecture,
 * shapes, parameter count, tensor types, weight memory, and KV cache bytes
 * per token and for a given context length. */
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: cllm info MODEL [--ctx N] [--kv-type f16|f32] [--plan [--concurrency N]]\n"
               "  --plan            weight memory at each precision plus the KV cache of --concurrency\n"
               "                    sequences (default 1) of --ctx tokens\n");
}

/* info_plan.c */
void info_print_plan(const model *m, long n_ctx, long concurrency, kv_dtype dt, double kv_per_seq);

static void print_bytes(const char *label, double bytes) {
    printf("%-16s %.1f MiB (%.0f bytes)\n", label, bytes / (1024.0 * 1024.0), bytes);
}

/* KV bytes for one sequence of n_ctx tokens: sliding layers keep at most their window. */
static double kv_bytes_for_context(const model *m, kv_dtype dt, long n_ctx) {
    const model_hparams *hp = &m->hp;
    const double per_layer_token = (double)hp->n_head_kv * (hp->head_dim_k + hp->head_dim_v) * kv_dtype_size(dt);
    double total = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        long toks = hp->is_swa[il] && hp->n_swa < n_ctx ? hp->n_swa : n_ctx;
        total += per_layer_token * toks;
    }
    return total;
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    long n_ctx = -1, concurrency = 1;
    bool plan = false;
    kv_dtype dt = KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--ctx")) {
            if (!(v = arg_value("info", argc, argv, &i)) || arg_int("info", a, v, 1, 1 << 24, &n_ctx)) return 1;
        } else if (!strcmp(a, "--plan")) {
            plan = true;
        } else if (!strcmp(a, "--concurrency")) {
            if (!(v = arg_value("info", argc, argv, &i)) || arg_int("info", a, v, 1, 1 << 20, &concurrency)) return 1;
        } else if (!strcmp(a, "--kv-type")) {
            if (!(v = arg_value("info", argc, argv, &i))) return 1;
            if (kv_dtype_parse(v, &dt)) {
                fprintf(stderr, "cllm info: %s\n", err_get());
                return 1;
            }
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(path = arg_value("info", argc, argv, &i))) return 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "cllm info: unknown option '%s'\n", a);
            return 1;
        } else {
            path = a;
        }
    }
    if (!path) {
        usage(stderr);
        return 1;
    }
    model *m = model_load(path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    const model_hparams *hp = &m->hp;
    if (n_ctx < 0) n_ctx = hp->n_ctx_train;
    printf("%-16s %s\n", "model", m->path);
    printf("%-16s %s\n", "name", m->name);
    printf("%-16s %s\n", "architecture", hp->traits->name);
    printf("%-16s %.2f M (%lld)\n", "parameters", m->n_params / 1e6, (long long)m->n_params);
    printf("%-16s %d layers, embedding %d, feed-forward %d, vocabulary %d\n", "shape", hp->n_layer,
           hp->n_embd, hp->n_ff, hp->n_vocab);
    printf("%-16s %d query heads, %d key/value heads, head dim %d (k) %d (v)\n", "attention", hp->n_head,
           hp->n_head_kv, hp->head_dim_k, hp->head_dim_v);
    int n_swa_layers = 0;
    for (int il = 0; il < hp->n_layer; il++) n_swa_layers += hp->is_swa[il];
    if (n_swa_layers)
        printf("%-16s %d tokens on %d of %d layers (rope base %g; global layers %g)\n", "sliding window",
               hp->n_swa, n_swa_layers, hp->n_layer, hp->rope_base_swa, hp->rope_base);
    else
        printf("%-16s base %g, scale %g\n", "rope", hp->rope_base, 1.0 / hp->rope_pos_scale);
    printf("%-16s %d (trained)\n", "context", hp->n_ctx_train);
    printf("%-16s %d tokens, BOS %d, EOS %d\n", "tokenizer", tokenizer_n_vocab(m->tok), tokenizer_bos(m->tok),
           tokenizer_eos(m->tok));
    printf("%-16s %s\n", "chat template", m->chat_template ? "yes" : "none (a built-in default is used)");

    /* Tensor types: count and bytes of each. */
    long count[WT_COUNT] = {0};
    double bytes[WT_COUNT] = {0};
    for (int64_t i = 0; i < m->tensors.n; i++) {
        const model_tensor *t = &m->tensors.v[i];
        if (t->type < WT_COUNT) {
            count[t->type]++;
            bytes[t->type] += (double)t->nbytes;
        }
    }
    printf("%-16s", "tensor types");
    const char *sep = " ";
    for (int t = 0; t < WT_COUNT; t++)
        if (count[t]) {
            printf("%s%s x%ld (%.1f MiB)", sep, wtype_name((uint32_t)t), count[t], bytes[t] / 1048576.0);
            sep = ", ";
        }
    printf("\n");
    print_bytes("weight memory", (double)m->weight_bytes);
    printf("%-16s %zu bytes per token over all layers (%s)\n", "KV cache", kv_bytes_per_token(&m->kv, dt),
           kv_dtype_name(dt));
    char label[64];
    snprintf(label, sizeof label, "KV @ %ld tokens", n_ctx);
    print_bytes(label, kv_bytes_for_context(m, dt, n_ctx));
    if (plan) info_print_plan(m, n_ctx, concurrency, dt, kv_bytes_for_context(m, dt, n_ctx));
    model_free(m);
    return 0;
}
