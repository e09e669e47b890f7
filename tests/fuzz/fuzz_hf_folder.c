/* libFuzzer harness: a Hugging Face model folder from fuzz bytes. The input
 * is up to four parts separated by FUZZ_PART_SEP (fuzz_common.h):
 * config.json, tokenizer.json, tokenizer_config.json, model.safetensors; a
 * part that is not there is a file that is not there. They are written into
 * a private temporary folder and read the way `cllm serve DIR` reads them:
 * hf_config_load, hf_source_open (safetensors header, tensor renaming and
 * conversion), tokenizer_from_hf (then used), tokenizer_hf_chat_template.
 * Every malformed file must give an error message, never a crash or a leak. */
#include "model/hf_config.h"
#include "model/hf_source.h"
#include "model/tensors.h"
#include "tokenizer/tokenizer.h"

#include "fuzz_common.h"

static const char *const k_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                      "model.safetensors"};
enum { N_FILES = sizeof k_files / sizeof k_files[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_tmpdir();
    fuzz_part parts[N_FILES];
    const int n_parts = fuzz_split(data, size, parts, N_FILES);
    for (int i = 0; i < N_FILES; i++)
        fuzz_write_file(dir, k_files[i], i < n_parts ? parts[i].p : NULL, i < n_parts ? parts[i].n : 0);

    model_hparams hp;
    hf_config cfg;
    if (hf_config_load(dir, &hp, &cfg) == 0) {
        tensor_table tt = {0};
        hf_source *src = hf_source_open(dir, &hp, &cfg, &tt);
        hf_source_close(src);
        tensors_free(&tt);
    }
    tokenizer *t = tokenizer_from_hf(dir);
    if (t) {
        fuzz_use_tokenizer(t);
        tokenizer_free(t);
    }
    char *tmpl = NULL;
    tokenizer_hf_chat_template(dir, &tmpl);
    free(tmpl);
    return 0;
}
