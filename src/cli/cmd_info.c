/* `cllm info MODEL`: what a model is and what it costs to run: architecture,
 * shapes, parameter count, tensor types, weight memory, and KV cache bytes
 * per token and for a given context length. */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/commands.h"
#include "format/gguf.h"
#include "kernels/wtype.h"
#include "model/moe.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine; /* --max-model-len, --kv-cache-dtype, --kv-cache-memory, --block-size */
    bool plan;
    long concurrency;
} info_options;

static const cli_option k_info_options[] = {
    {.name = "--plan", .kind = CLI_FLAG, .offset = offsetof(info_options, plan),
     .help = "weight memory at each precision `cllm quantize` offers, next to the KV cache of --concurrency "
             "sequences of --max-model-len tokens"},
    {.name = "--concurrency", .kind = CLI_INT, .offset = offsetof(info_options, concurrency), .metavar = "N",
     .min = 1, .max = 1 << 20, .help = "sequences the --plan KV cache holds"},
    {0}};

static const cli_section k_info_sections[] = {
    {.group = &(const cli_group){"info options", k_info_options}},
    {.group = &cli_model_group, .offset = offsetof(info_options, model), .only = "--model"},
    {.group = &cli_engine_group,
     .offset = offsetof(info_options, engine),
     .only = "--max-model-len --kv-cache-dtype --kv-cache-memory --block-size",
     .overrides = (const cli_override[]){
         {.name = "--max-model-len", .help = "the context length KV cache sizes are given for",
          .default_text = "the model's trained context"},
         {.name = "--kv-cache-memory", .help = "the KV cache budget --plan gives each dtype's tokens for"},
         {0}}},
    {0}};

static const cli_command k_info = {
    .name = "info",
    .synopsis = "MODEL [options]",
    .about = "What a model is and what it costs to run: architecture, shapes, parameter count, tensor types, "
             "weight memory, and KV cache bytes per token and for a context length. MODEL is a GGUF file or a "
             "Hugging Face folder.",
    .sections = k_info_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "MODEL", .offset = offsetof(info_options, model.path), .required = true}, {0}},
};

/* info_plan.c */
void info_print_plan(const model *m, long n_ctx, long concurrency, kv_dtype dt, double kv_per_seq);
void info_print_kv_capacity(const model *m, size_t kv_memory, int block_size, kv_dtype chosen);

static void print_bytes(const char *label, double bytes) {
    printf("%-16s %.1f MiB (%.0f bytes)\n", label, bytes / (1024.0 * 1024.0), bytes);
}

/* KV bytes for one sequence of n_ctx tokens: sliding layers keep at most their window. */
static double kv_bytes_for_context(const model *m, kv_dtype dt, long n_ctx) {
    const model_hparams *hp = &m->hp;
    const double per_layer_token = (double)kv_bytes_per_layer_token(&m->kv, dt);
    double total = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        long toks = hp->is_swa[il] && hp->n_swa < n_ctx ? hp->n_swa : n_ctx;
        total += per_layer_token * toks;
    }
    return total;
}

int cmd_info(int argc, char **argv) {
    info_options o = {.engine = cli_engine_defaults(), .concurrency = 1};
    o.engine.max_model_len = 0;
    const int parsed = cli_parse(&k_info, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    const kv_dtype dt = o.engine.kv_cache_dtype;
    long n_ctx = o.engine.max_model_len;
    model *m = model_load_as_stored(o.model.path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    const model_hparams *hp = &m->hp;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train;
    printf("%-16s %s\n", "model", m->path);
    printf("%-16s %s\n", "name", m->name);
    char uses[256];
    arch_describe(hp, uses, sizeof uses);
    printf("%-16s %s (%s): %s\n", "architecture", hp->traits->family, hp->traits->name, uses);
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
    int moe_layers = 0;
    const size_t exp_bytes = moe_expert_bytes(m, &moe_layers);
    if (moe_layers > 0) {
        const double active = (double)(m->weight_bytes - exp_bytes) +
                              (double)exp_bytes * hp->n_expert_used / hp->n_expert;
        printf("%-16s %d of %d per token on %d of %d layers, %d wide%s; a token reads %.1f MiB of the %.1f MiB "
               "of weights (%.0f%%)\n",
               "experts", hp->n_expert_used, hp->n_expert, moe_layers, hp->n_layer, hp->n_ff_exp,
               hp->n_ff_shexp ? ", and a shared expert" : "", active / 1048576.0, m->weight_bytes / 1048576.0,
               100.0 * active / (double)m->weight_bytes);
    }
    printf("%-16s %s; %.1f MiB of matrices repacked to the x8 layout at load\n", "kernels", wtype_isa(),
           (double)model_repack_bytes(m) / 1048576.0);
    printf("%-16s %zu bytes per token over all layers (%s)\n", "KV cache", kv_bytes_per_token(&m->kv, dt),
           kv_dtype_name(dt));
    char label[64];
    snprintf(label, sizeof label, "KV @ %ld tokens", n_ctx);
    print_bytes(label, kv_bytes_for_context(m, dt, n_ctx));
    if (o.plan) {
        info_print_plan(m, n_ctx, o.concurrency, dt, kv_bytes_for_context(m, dt, n_ctx));
        info_print_kv_capacity(m, o.engine.kv_cache_memory, (int)o.engine.block_size, dt);
    }
    model_free(m);
    return 0;
}
