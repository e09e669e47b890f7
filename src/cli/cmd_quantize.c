/* `cllm quantize IN OUT`: options to a quant_config (quant/quantize.h). */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/commands.h"
#include "kernels/gq.h"
#include "kernels/wtype.h"
#include "quant/quantize.h"
#include "util/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    cli_engine_settings engine; /* --threads */
    const char *in, *out;
    long bits, group, calib_samples, calib_ctx, awq_grid;
    int scheme; /* index in k_schemes */
    int method; /* quant_method, the index in k_methods */
    bool per_tensor, desc_act, keep_none, quiet, verbose;
    const char *calib;
    double damp;
    cli_list keep;
    int keep_type; /* wtype, or -1: copy */
} quantize_options;

static const char *const k_schemes[] = {"sym", "asym", NULL};
static const char *const k_methods[] = {"rtn", "gptq", "awq", NULL}; /* in quant_method's order */

/* A weight type cllm can write (case-insensitive), or "copy". */
static int parse_type(const char *flag, const char *value, void *setting) {
    if (!strcmp(value, "copy")) {
        *(int *)setting = -1;
        return 0;
    }
    for (uint32_t t = 0; t < WT_COUNT; t++) {
        const char *name = wtype_name(t);
        if (strncmp(name, "type ", 5) && !strcasecmp(name, value)) {
            const wtype_traits *tr = wtype_get((wtype)t);
            if (!tr || !tr->from_float || !tr->vec_dot) break;
            *(int *)setting = (int)t;
            return 0;
        }
    }
    return err_set("%s '%s' is not a weight type cllm can write (try q8_0, f16, f32, q6_K)", flag, value);
}

static json_t *type_json(const void *setting) {
    const int t = *(const int *)setting;
    return json_string(t < 0 ? "copy" : wtype_name((uint32_t)t));
}

static const cli_option k_quantize_options[] = {
    {.name = "--bits", .kind = CLI_INT, .offset = offsetof(quantize_options, bits), .metavar = "8|4|3|2", .min = 1,
     .max = 64, .help = "bits per weight of the layers' linear maps; 16 or 32 writes every matrix as F16 / F32"},
    {.name = "--group-size", .kind = CLI_INT, .offset = offsetof(quantize_options, group), .metavar = "32|64|128|-1",
     .min = -1, .max = 1 << 20, .help = "input columns per scale; -1 = one group per output row"},
    {.name = "--per-tensor", .kind = CLI_FLAG, .offset = offsetof(quantize_options, per_tensor),
     .help = "one scale for each whole matrix"},
    {.name = "--scheme", .kind = CLI_ENUM, .offset = offsetof(quantize_options, scheme), .choices = k_schemes,
     .help = "zero point fixed at the middle (sym), or fitted per group (asym)"},
    {.name = "--method", .kind = CLI_ENUM, .offset = offsetof(quantize_options, method), .choices = k_methods,
     .help = "round to nearest, GPTQ, or AWQ"},
    {.name = "--calib", .kind = CLI_STRING, .offset = offsetof(quantize_options, calib), .metavar = "FILE",
     .help = "calibration text (GPTQ, AWQ)"},
    {.name = "--calib-samples", .kind = CLI_INT, .offset = offsetof(quantize_options, calib_samples), .metavar = "N",
     .min = 1, .max = 1 << 20, .help = "samples taken from it", .default_text = "128"},
    {.name = "--calib-ctx", .kind = CLI_INT, .offset = offsetof(quantize_options, calib_ctx), .metavar = "N",
     .min = 16, .max = 1 << 16, .help = "tokens per sample", .default_text = "512, at most the model's context"},
    {.name = "--desc-act", .kind = CLI_FLAG, .offset = offsetof(quantize_options, desc_act),
     .help = "GPTQ act-order (cllm-only output: a permutation per matrix)"},
    {.name = "--damp", .kind = CLI_FLOAT, .offset = offsetof(quantize_options, damp), .metavar = "X", .min = 1e-6,
     .max = 10, .help = "GPTQ damping, a fraction of the mean Hessian diagonal", .default_text = "0.01"},
    {.name = "--awq-grid", .kind = CLI_INT, .offset = offsetof(quantize_options, awq_grid), .metavar = "N", .min = 1,
     .max = 1000, .help = "AWQ exponents tried in [0, 1)", .default_text = "20"},
    {.name = "--keep", .kind = CLI_LIST, .offset = offsetof(quantize_options, keep), .metavar = "TENSOR",
     .help = "keep this tensor in the keep type too (repeatable); token_embd.weight and output.weight are kept by "
             "default"},
    {.name = "--keep-type", .kind = CLI_CUSTOM, .offset = offsetof(quantize_options, keep_type), .metavar = "TYPE",
     .help = "type of kept tensors: q8_0, f16, f32, q6_K, ..., or 'copy'", .parse = parse_type, .to_json = type_json},
    {.name = "--no-keep", .kind = CLI_FLAG, .offset = offsetof(quantize_options, keep_none),
     .help = "copy the embedding and output head unchanged instead"},
    {.name = "--quiet", .aliases = "-q", .kind = CLI_FLAG, .offset = offsetof(quantize_options, quiet),
     .help = "no progress bar"},
    {.name = "--verbose", .aliases = "-v", .kind = CLI_FLAG, .offset = offsetof(quantize_options, verbose),
     .help = "per layer: stage timings, AWQ exponents and errors"},
    {0}};

static const cli_section k_quantize_sections[] = {
    {.group = &(const cli_group){"quantize options", k_quantize_options}},
    {.group = &cli_engine_group,
     .offset = offsetof(quantize_options, engine),
     .only = "--threads",
     .overrides = (const cli_override[]){{.name = "--threads", .help = "worker threads"}, {0}}},
    {0}};

static const cli_command k_quantize = {
    .name = "quantize",
    .synopsis = "IN OUT.gguf [options]",
    .about = "Rewrite a model's linear maps with round-to-nearest, GPTQ or AWQ into a new GGUF file. IN is a GGUF "
             "file or a Hugging Face model folder (plain, GPTQ or AWQ).",
    .sections = k_quantize_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "IN", .offset = offsetof(quantize_options, in), .required = true},
        {.metavar = "OUT.gguf", .offset = offsetof(quantize_options, out), .required = true},
        {0}},
    .notes = "Standard GGUF types are written where they hold the result exactly (8-bit g32 sym: Q8_0; 4-bit g32: "
             "Q4_0 sym, Q4_1 asym), so llama.cpp reads them; other choices use cllm's GQ types.",
};

static void to_quant_config(const quantize_options *o, quant_config *c) {
    quant_config_init(c);
    c->bits = (int)o->bits;
    c->group = (int)o->group;
    c->per_tensor = o->per_tensor;
    c->sym = !strcmp(k_schemes[o->scheme], "sym");
    c->method = (quant_method)o->method;
    c->calib_path = o->calib;
    c->calib_samples = (int)o->calib_samples;
    c->calib_ctx = (int)o->calib_ctx;
    c->desc_act = o->desc_act;
    c->damp = o->damp;
    c->awq_grid = (int)o->awq_grid;
    c->keep = o->keep.items;
    c->n_keep = o->keep.n;
    c->keep_type = o->keep_type;
    c->keep_none = o->keep_none;
    c->threads = (int)o->engine.threads;
    c->quiet = o->quiet;
    c->verbose = o->verbose;
}

int cmd_quantize(int argc, char **argv) {
    quant_config c;
    quant_config_init(&c);
    quantize_options o = {.engine = cli_engine_defaults(), .bits = c.bits, .group = c.group, .scheme = 1,
                          .method = (int)c.method, .keep_type = c.keep_type};
    o.engine.threads = 0;
    int rc = cli_parse(&k_quantize, argc, argv, &o);
    if (rc == 0) {
        to_quant_config(&o, &c);
        if (quantize_model(o.in, o.out, &c)) {
            fprintf(stderr, "cllm quantize: %s\n", err_get());
            rc = -1;
        }
    }
    cli_free(&k_quantize, &o);
    return rc < 0 ? 1 : 0;
}
