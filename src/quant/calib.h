/* Calibration for GPTQ and AWQ: a text file cut into token samples, and a
 * runner that moves every sample through the model one layer at a time.
 *
 * The runner keeps each sample's residual stream between layers (the
 * forward pass's hooks, model/forward.h, start a pass at a layer from a given
 * stream and stop after it). So a quantizer can, per layer: run the layer with
 * its float weights while collecting the inputs of its linear maps, quantize
 * it, put the quantized weights into the model, and run the layer again to
 * advance the streams: the next layer then sees the outputs of the quantized
 * layers before it (sequential quantization, as GPTQ does it), at the cost of
 * two passes over the layer per layer. */
#ifndef CLLM_QUANT_CALIB_H
#define CLLM_QUANT_CALIB_H

#include "model/forward.h"
#include "model/model.h"
#include "util/threadpool.h"

#include <stdint.h>

typedef struct {
    int n_samples;
    int *len;         /* tokens of each sample, BOS first */
    int32_t **tokens;
    int64_t n_tokens; /* over all samples */
} calib_set;

/* Tokenizes the file and takes up to n_samples consecutive windows of ctx
 * tokens (BOS, then ctx - 1 tokens of text), spread evenly over the text when
 * it holds more. Fails with a clear message for a missing, unreadable or empty
 * file, or one with fewer than 16 tokens. */
int calib_load(calib_set *c, const model *m, const char *path, int n_samples, int ctx);
void calib_free(calib_set *c);

/* The inputs of one layer's linear maps over all samples: for each
 * fwd_linear_input, [n_tokens][n_in] rows. */
typedef struct {
    float *x[4];
    int64_t n_in[4];
    int64_t n_rows[4];
} calib_inputs;

void calib_inputs_free(calib_inputs *in);

typedef struct calib_runner calib_runner;

calib_runner *calib_runner_new(model *m, const calib_set *c, threadpool *threads);
void calib_runner_free(calib_runner *r);
/* Runs layer il (il = 0, 1, ... in order) over every sample with the model's
 * current weights. capture (may be NULL) receives the layer's linear inputs;
 * advance moves the residual streams past the layer. */
int calib_run_layer(calib_runner *r, int il, calib_inputs *capture, bool advance);

#endif
