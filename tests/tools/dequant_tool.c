/* Test helper for the quantized formats, driven by
 * tests/integration/test_dequant_gguf_py.py, which compares its output with
 * the Python gguf package:
 *
 *   dequant_tool [--ref] FILE.gguf OUT_DIR [NAME...]
 *       Dequantizes the named tensors (all when none are named) with the
 *       registry's to_float and writes each as raw little-endian f32 to
 *       OUT_DIR/<name>.f32; prints "<name> <type> <elements>" per tensor.
 *   dequant_tool [--ref] --quantize TYPE IN.f32 OUT.bin
 *       Quantizes raw f32 values (a whole number of blocks) with the
 *       registry's from_float and writes the blocks.
 *
 * --ref uses the scalar reference kernels instead of the active (AVX2) ones. */
#include "format/gguf.h"
#include "kernels/wtype.h"
#include "util/error.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const wtype_traits *traits(uint32_t type, bool ref) {
    return ref ? wtype_get_ref((wtype)type) : wtype_get((wtype)type);
}

static int write_file(const char *path, const void *data, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) return err_set("cannot create '%s'", path);
    size_t put = fwrite(data, 1, bytes, f);
    if (fclose(f) != 0 || put != bytes) return err_set("writing '%s' failed", path);
    return 0;
}

static int dequantize_tensor(const gguf_tensor_info *t, const char *out_dir, bool ref) {
    const wtype_traits *tr = traits(t->type, ref);
    if (!tr)
        return err_set("tensor '%s': no dequantizer for type %s", t->name, wtype_name(t->type));
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++)
        n *= t->ne[d];
    float *out = malloc((size_t)n * sizeof(float) + 1);
    if (!out) return err_set("tensor '%s': out of memory for %" PRId64 " floats", t->name, n);
    /* Row by row, as the engine would; rows are whole blocks by GGUF rules. */
    const int64_t row = t->ne[0];
    const size_t row_bytes = wtype_row_size(t->type, row);
    for (int64_t r = 0; r < n / row; r++)
        tr->to_float((const uint8_t *)t->data + (size_t)r * row_bytes, out + r * row, row);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f32", out_dir, t->name);
    for (char *p = path + strlen(out_dir) + 1; *p; p++)
        if (*p == '/') *p = '_';
    int rc = write_file(path, out, (size_t)n * sizeof(float));
    free(out);
    if (rc == 0) printf("%s %s %" PRId64 "\n", t->name, wtype_name(t->type), n);
    return rc;
}

static int cmd_dequantize(const char *gguf_path, const char *out_dir, char **names, int n_names,
                          bool ref) {
    gguf_ctx *ctx = gguf_open(gguf_path);
    if (!ctx) return -1;
    int rc = 0;
    if (n_names == 0) {
        for (int64_t i = 0; i < gguf_n_tensors(ctx) && rc == 0; i++)
            rc = dequantize_tensor(gguf_tensor_at(ctx, i), out_dir, ref);
    }
    for (int i = 0; i < n_names && rc == 0; i++) {
        const gguf_tensor_info *t = gguf_find_tensor(ctx, names[i]);
        rc = t ? dequantize_tensor(t, out_dir, ref) : err_set("no tensor named '%s'", names[i]);
    }
    gguf_close(ctx);
    return rc;
}

static int cmd_quantize(const char *type_name, const char *in_path, const char *out_path,
                        bool ref) {
    uint32_t type = WT_COUNT;
    for (uint32_t t = 0; t < WT_COUNT; t++)
        if (!strcmp(wtype_name(t), type_name)) type = t;
    const wtype_traits *tr = type < WT_COUNT ? traits(type, ref) : NULL;
    if (!tr || !tr->from_float) return err_set("no quantizer for type '%s'", type_name);

    FILE *f = fopen(in_path, "rb");
    if (!f) return err_set("cannot open '%s'", in_path);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    const int64_t n = bytes / (long)sizeof(float);
    if (bytes < 0 || bytes % (long)sizeof(float) || n % tr->block_size) {
        fclose(f);
        return err_set("'%s': %ld bytes is not a whole number of %s blocks of f32", in_path, bytes,
                       tr->name);
    }
    float *x = malloc((size_t)bytes + 1);
    size_t out_bytes = wtype_row_size(type, n);
    void *q = malloc(out_bytes + 1);
    int rc = x && q && fread(x, 1, (size_t)bytes, f) == (size_t)bytes
                 ? 0
                 : err_set("reading '%s' failed", in_path);
    fclose(f);
    if (rc == 0) {
        tr->from_float(x, q, n);
        rc = write_file(out_path, q, out_bytes);
    }
    free(x);
    free(q);
    return rc;
}

int main(int argc, char **argv) {
    bool ref = false;
    int a = 1;
    if (a < argc && !strcmp(argv[a], "--ref")) ref = true, a++;
    int rc;
    if (a < argc && !strcmp(argv[a], "--quantize")) {
        if (argc - a != 4) goto usage;
        rc = cmd_quantize(argv[a + 1], argv[a + 2], argv[a + 3], ref);
    } else {
        if (argc - a < 2) goto usage;
        rc = cmd_dequantize(argv[a], argv[a + 1], argv + a + 2, argc - a - 2, ref);
    }
    if (rc != 0) {
        fprintf(stderr, "dequant_tool: %s\n", err_get());
        return 1;
    }
    return 0;
usage:
    fprintf(stderr, "usage: dequant_tool [--ref] FILE.gguf OUT_DIR [NAME...]\n"
                    "       dequant_tool [--ref] --quantize TYPE IN.f32 OUT.bin\n");
    return 2;
}
