/* The usage example of include/cllm.h, compiled and run by the tests:
 * api_example MODEL PROMPT N prints the greedy continuation of PROMPT. */
#include "cllm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: api_example MODEL PROMPT N\n");
        return 2;
    }
    char err[512];
    cllm_model *m = cllm_model_load(argv[1], err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    cllm_engine_params ep = cllm_engine_defaults();
    ep.kv_cache_bytes = 64u << 20;
    ep.max_model_len = 512;
    cllm_engine *e = cllm_engine_create(m, &ep, err, sizeof err);
    if (!e) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int32_t toks[512];
    int n = cllm_tokenize(m, argv[2], strlen(argv[2]), true, toks, 512);
    cllm_request_params p = cllm_request_defaults();
    p.temperature = 0;
    p.max_tokens = atoi(argv[3]);
    if (!cllm_submit(e, toks, n, &p, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    cllm_output out[16];
    int finished = 0;
    while (!finished) {
        cllm_step(e);
        for (int k = cllm_poll(e, out, 16), i = 0; i < k; i++) {
            fwrite(out[i].text, 1, out[i].text_len, stdout);
            finished |= out[i].finished;
        }
    }
    printf("\n");
    cllm_engine_free(e);
    cllm_model_free(m);
    return 0;
}
