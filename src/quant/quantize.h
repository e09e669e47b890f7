/* `cllm quantize`: reads a model cllm loads (GGUF), quantizes the linear maps
 * of every layer (q, k, v, output, gate, up, down) with round-to-nearest,
 * GPTQ or AWQ onto a qformat (quant/qformat.h), keeps the token embedding and
 * output head (and any tensor named with keep) in a higher-precision type,
 * copies every other tensor and all metadata (tokenizer included), and
 * writes a GGUF file through the writer (format/gguf_write.h): nothing is
 * left at the output path unless the whole file was written.
 *
 * Work goes layer by layer, so memory holds one layer's float weights (and,
 * for GPTQ/AWQ, its calibration inputs) at a time. GPTQ and AWQ are
 * sequential: layer l is calibrated on the outputs of the already quantized
 * layers before it (quant/calib.h). */
#ifndef CLLM_QUANT_QUANTIZE_H
#define CLLM_QUANT_QUANTIZE_H

#include <stdbool.h>

typedef enum { QUANT_RTN, QUANT_GPTQ, QUANT_AWQ } quant_method;

typedef struct {
    int bits;        /* 8, 4, 3, 2; or 16 / 32: every matrix as F16 / F32 (no quantization) */
    int group;       /* 32, 64, 128, or -1 for one group per output row */
    bool per_tensor; /* one scale for the whole matrix */
    bool sym;
    quant_method method;
    const char *calib_path; /* GPTQ and AWQ */
    int calib_samples;      /* 0: 128 */
    int calib_ctx;          /* tokens per sample; 0: 512 (at most the model's context) */
    bool desc_act;          /* GPTQ act-order */
    double damp;            /* GPTQ damping; 0: 0.01 */
    int awq_grid;           /* 0: 20 */
    const char *const *keep; /* more tensors to keep, by name */
    int n_keep;
    bool keep_none;  /* do not keep token_embd/output by default */
    int keep_type;   /* wtype of kept tensors (default Q8_0); -1 copies them as they are */
    int threads;     /* 0: all CPUs */
    bool quiet;      /* no progress bar */
    bool verbose;    /* per layer: stage timings, AWQ exponents */
} quant_config;

/* The defaults above. */
void quant_config_init(quant_config *c);

/* Returns 0, or -1 with err_get(); on failure no file is left at out_path. */
int quantize_model(const char *in_path, const char *out_path, const quant_config *c);

#endif
