/* Test helper for Hugging Face folders (tests/integration/test_hf_quant.py):
 * loads a model the way cllm does and writes chosen tensors of its table back
 * as f32, so the tests can compare what the loader made of a GPTQ/AWQ
 * checkpoint with the fixture's own dequantization, bit for bit.
 *
 *   hf_dequant MODEL OUT_DIR NAME...
 *       NAME is llama.cpp's name (blk.0.attn_q.weight). Each tensor is
 *       dequantized row by row with the registry's to_float, act-order
 *       columns put back in their original order, and written as raw
 *       little-endian f32 [n_out][n_in] to OUT_DIR/NAME.f32; prints
 *       "NAME TYPE n_in n_out permuted|plain" per tensor.
 *   hf_dequant --chat-template MODEL
 *       Prints the model's chat template as loaded (nothing when it has none). */
#include "kernels/wtype.h"
#include "model/model.h"
#include "util/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dump(const model *m, const char *name, const char *out_dir) {
    const model_tensor *t = tensors_find(&m->tensors, name);
    if (!t) return err_set("no tensor '%s' in the model", name);
    const wtype_traits *tr = wtype_get((wtype)t->type);
    if (!tr) return err_set("tensor '%s': no dequantizer for type %s", name, wtype_name(t->type));
    const int64_t n_in = t->ne[0], n_out = t->n_dims > 1 ? t->ne[1] : 1;
    const size_t row_bytes = wtype_row_size(t->type, n_in);
    if (!row_bytes || row_bytes * (size_t)n_out > t->nbytes) return err_set("tensor '%s': bad geometry", name);
    float *row = malloc((size_t)n_in * sizeof *row), *out = malloc((size_t)(n_in * n_out) * sizeof *out);
    if (!row || !out) {
        free(row);
        free(out);
        return err_set("out of memory");
    }
    for (int64_t r = 0; r < n_out; r++) {
        tr->to_float((const uint8_t *)t->data + (size_t)r * row_bytes, row, n_in);
        for (int64_t k = 0; k < n_in; k++) out[r * n_in + (t->perm ? t->perm[k] : k)] = row[k];
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f32", out_dir, name);
    FILE *f = fopen(path, "wb");
    size_t put = f ? fwrite(out, sizeof *out, (size_t)(n_in * n_out), f) : 0;
    int rc = !f || fclose(f) != 0 || put != (size_t)(n_in * n_out) ? err_set("cannot write '%s'", path) : 0;
    if (!rc)
        printf("%s %s %" PRId64 " %" PRId64 " %s\n", name, wtype_name(t->type), n_in, n_out,
               t->perm ? "permuted" : "plain");
    free(row);
    free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--chat-template")) {
        model *m = model_load(argv[2]);
        if (!m) {
            fprintf(stderr, "hf_dequant: %s\n", err_get());
            return 1;
        }
        if (m->chat_template) fputs(m->chat_template, stdout);
        model_free(m);
        return 0;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: hf_dequant MODEL OUT_DIR NAME... | hf_dequant --chat-template MODEL\n");
        return 1;
    }
    model *m = model_load(argv[1]);
    if (!m) {
        fprintf(stderr, "hf_dequant: %s\n", err_get());
        return 1;
    }
    int rc = 0;
    for (int i = 3; i < argc && !rc; i++) rc = dump(m, argv[i], argv[2]);
    if (rc) fprintf(stderr, "hf_dequant: %s\n", err_get());
    model_free(m);
    return rc ? 1 : 0;
}
