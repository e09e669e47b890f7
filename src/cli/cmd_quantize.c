/* `cllm quantize IN OUT`: options to a quant_config (quant/quantize.h). */
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "kernels/gq.h"
#include "kernels/wtype.h"
#include "quant/quantize.h"
#include "util/error.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: cllm quantize IN OUT.gguf [options]\n"
            "  IN: a GGUF file or a Hugging Face model folder (plain, GPTQ or AWQ)\n"
            "  --bits 8|4|3|2          bits per weight of the layers' linear maps (default 4);\n"
            "                          16 or 32 writes every matrix as F16 / F32 instead\n"
            "  --group-size 32|64|128|-1  input columns per scale (default 128; -1: one per output row)\n"
            "  --per-tensor            one scale for each whole matrix\n"
            "  --scheme sym|asym       zero point fixed at the middle, or fitted per group (default asym)\n"
            "  --method rtn|gptq|awq   round to nearest (default), GPTQ, or AWQ\n"
            "  --calib FILE            calibration text (GPTQ, AWQ)\n"
            "  --calib-samples N       samples taken from it (default 128)\n"
            "  --calib-ctx N           tokens per sample (default 512)\n"
            "  --desc-act              GPTQ act-order (cllm-only output: a permutation per matrix)\n"
            "  --damp X                GPTQ damping, a fraction of the mean Hessian diagonal (default 0.01)\n"
            "  --awq-grid N            AWQ exponents tried in [0, 1) (default 20)\n"
            "  --keep TENSOR           keep this tensor in the keep type too (repeatable);\n"
            "                          token_embd.weight and output.weight are kept by default\n"
            "  --keep-type TYPE        type of kept tensors: q8_0 (default), f16, f32, q6_K, ..., or 'copy'\n"
            "  --no-keep               copy the embedding and output head unchanged instead\n"
            "  --threads N             worker threads (default: all CPUs)\n"
            "  --quiet                 no progress bar\n"
            "  --verbose               per layer: stage timings, AWQ exponents and errors\n"
            "Standard GGUF types are written where they hold the result exactly (8-bit g32 sym: Q8_0;\n"
            "4-bit g32: Q4_0 sym, Q4_1 asym), so llama.cpp reads them; other choices use cllm's GQ types.\n");
}

static int parse_type(const char *s, int *out) {
    if (!strcmp(s, "copy")) {
        *out = -1;
        return 0;
    }
    for (uint32_t t = 0; t < WT_COUNT; t++) {
        const char *name = wtype_name(t);
        if (strncmp(name, "type ", 5) && !strcasecmp(name, s)) {
            const wtype_traits *tr = wtype_get((wtype)t);
            if (!tr || !tr->from_float || !tr->vec_dot) break;
            *out = (int)t;
            return 0;
        }
    }
    fprintf(stderr, "cllm quantize: --keep-type '%s' is not a weight type cllm can write (try q8_0, f16, f32, q6_K)\n",
            s);
    return -1;
}

int cmd_quantize(int argc, char **argv) {
    quant_config c;
    quant_config_init(&c);
    const char *paths[2] = {NULL, NULL};
    int n_paths = 0;
    const char **keep = calloc((size_t)argc + 1, sizeof *keep);
    if (!keep) return 1;
    int rc = 1;
    bool scheme_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long l;
        double d;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--bits")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_int("quantize", a, v, 1, 64, &l)) goto done;
            c.bits = (int)l;
        } else if (!strcmp(a, "--group-size")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_int("quantize", a, v, -1, 1 << 20, &l)) goto done;
            c.group = (int)l;
        } else if (!strcmp(a, "--per-tensor")) {
            c.per_tensor = true;
        } else if (!strcmp(a, "--scheme")) {
            if (!(v = arg_value("quantize", argc, argv, &i))) goto done;
            if (strcmp(v, "sym") && strcmp(v, "asym")) {
                fprintf(stderr, "cllm quantize: --scheme expects sym or asym, got '%s'\n", v);
                goto done;
            }
            c.sym = !strcmp(v, "sym");
            scheme_set = true;
        } else if (!strcmp(a, "--method")) {
            if (!(v = arg_value("quantize", argc, argv, &i))) goto done;
            if (!strcmp(v, "rtn")) c.method = QUANT_RTN;
            else if (!strcmp(v, "gptq")) c.method = QUANT_GPTQ;
            else if (!strcmp(v, "awq")) c.method = QUANT_AWQ;
            else {
                fprintf(stderr, "cllm quantize: --method expects rtn, gptq or awq, got '%s'\n", v);
                goto done;
            }
        } else if (!strcmp(a, "--calib")) {
            if (!(c.calib_path = arg_value("quantize", argc, argv, &i))) goto done;
        } else if (!strcmp(a, "--calib-samples")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_int("quantize", a, v, 1, 1 << 20, &l)) goto done;
            c.calib_samples = (int)l;
        } else if (!strcmp(a, "--calib-ctx")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_int("quantize", a, v, 16, 1 << 16, &l)) goto done;
            c.calib_ctx = (int)l;
        } else if (!strcmp(a, "--desc-act")) {
            c.desc_act = true;
        } else if (!strcmp(a, "--damp")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_float("quantize", a, v, 1e-6, 10, &d)) goto done;
            c.damp = d;
        } else if (!strcmp(a, "--awq-grid")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_int("quantize", a, v, 1, 1000, &l)) goto done;
            c.awq_grid = (int)l;
        } else if (!strcmp(a, "--keep")) {
            if (!(v = arg_value("quantize", argc, argv, &i))) goto done;
            keep[c.n_keep++] = v;
        } else if (!strcmp(a, "--keep-type")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || parse_type(v, &c.keep_type)) goto done;
        } else if (!strcmp(a, "--no-keep")) {
            c.keep_none = true;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (!(v = arg_value("quantize", argc, argv, &i)) || arg_int("quantize", a, v, 1, 1024, &l)) goto done;
            c.threads = (int)l;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            c.quiet = true;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            c.verbose = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cllm quantize: unknown option '%s' (try --help)\n", a);
            goto done;
        } else if (n_paths < 2) {
            paths[n_paths++] = a;
        } else {
            fprintf(stderr, "cllm quantize: unexpected argument '%s'\n", a);
            goto done;
        }
    }
    if (n_paths != 2) {
        usage(stderr);
        goto done;
    }
    if (!scheme_set) c.sym = false;
    c.keep = keep;
    if (quantize_model(paths[0], paths[1], &c)) {
        fprintf(stderr, "cllm quantize: %s\n", err_get());
        goto done;
    }
    rc = 0;
done:
    free(keep);
    return rc;
}
