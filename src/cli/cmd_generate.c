/* `cllm generate`: continue a prompt, streaming the text to stdout as it is
 * produced (nothing else goes to stdout) and the speed to stderr. */
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/sampler.h"
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *model_path;
    const char *prompt;
    long n_predict;
    long threads;
    long n_ctx;
    bool ignore_eos;
    kv_dtype kv_type;
    sampling_params sp;
    bool seed_given;
} gen_options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: cllm generate -m MODEL -p PROMPT [-n N] [options]\n"
            "  -n, --n-predict N        tokens to generate (default 128)\n"
            "  --temperature T          0 = greedy (default 0.8)\n"
            "  --top-k K                (default 40; 0 = off)\n"
            "  --top-p P                (default 0.95; 1 = off)\n"
            "  --min-p P                (default 0.05; 0 = off)\n"
            "  --repeat-penalty R       (default 1 = off)\n"
            "  --presence-penalty P     (default 0)\n"
            "  --frequency-penalty P    (default 0)\n"
            "  --seed S                 (default: random)\n"
            "  -t, --threads N          (default: all cores)\n"
            "  -c, --ctx-size N         context length (default: prompt + N)\n"
            "  --kv-type f16|f32        KV cache precision (default f16)\n"
            "  --ignore-eos             keep going past end-of-generation tokens\n");
}

static int parse_options(int argc, char **argv, gen_options *o) {
    *o = (gen_options){.n_predict = 128, .kv_type = KV_F16, .sp = sampling_defaults()};
    o->sp.temperature = 0.8f;
    o->sp.top_k = 40;
    o->sp.top_p = 0.95f;
    o->sp.min_p = 0.05f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        double d;
        long l;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = true;
            continue;
        }
        if (!(v = arg_value("generate", argc, argv, &i))) return -1;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model_path = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (arg_int("generate", a, v, 0, 1 << 24, &o->n_predict)) return -1;
        } else if (!strcmp(a, "--temperature") || !strcmp(a, "--temp")) {
            if (arg_float("generate", a, v, 0, 100, &d)) return -1;
            o->sp.temperature = (float)d;
        } else if (!strcmp(a, "--top-k")) {
            if (arg_int("generate", a, v, 0, 1 << 24, &l)) return -1;
            o->sp.top_k = (int)l;
        } else if (!strcmp(a, "--top-p")) {
            if (arg_float("generate", a, v, 0, 1, &d)) return -1;
            o->sp.top_p = (float)d;
        } else if (!strcmp(a, "--min-p")) {
            if (arg_float("generate", a, v, 0, 1, &d)) return -1;
            o->sp.min_p = (float)d;
        } else if (!strcmp(a, "--repeat-penalty")) {
            if (arg_float("generate", a, v, 0.01, 100, &d)) return -1;
            o->sp.repetition_penalty = (float)d;
        } else if (!strcmp(a, "--presence-penalty")) {
            if (arg_float("generate", a, v, -2, 2, &d)) return -1;
            o->sp.presence_penalty = (float)d;
        } else if (!strcmp(a, "--frequency-penalty")) {
            if (arg_float("generate", a, v, -2, 2, &d)) return -1;
            o->sp.frequency_penalty = (float)d;
        } else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) {
            if (arg_int("generate", a, v, 0, 0x7fffffffffffffffL, &l)) return -1;
            o->sp.seed = (uint64_t)l;
            o->seed_given = true;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (arg_int("generate", a, v, 1, 1024, &o->threads)) return -1;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (arg_int("generate", a, v, 1, 1 << 24, &o->n_ctx)) return -1;
        } else if (!strcmp(a, "--kv-type")) {
            if (kv_dtype_parse(v, &o->kv_type)) {
                fprintf(stderr, "cllm generate: %s\n", err_get());
                return -1;
            }
        } else {
            fprintf(stderr, "cllm generate: unknown option '%s'\n", a);
            return -1;
        }
    }
    if (!o->model_path || !o->prompt) {
        usage(stderr);
        return -1;
    }
    if (!o->seed_given) o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return 0;
}

static int run(const gen_options *o, model *m) {
    int32_t *prompt = NULL;
    int n_prompt = tokenizer_encode(m->tok, o->prompt, strlen(o->prompt), true, true, &prompt);
    if (n_prompt < 0) return -1;
    if (n_prompt == 0) {
        free(prompt);
        return err_set("the prompt is empty and the model adds no BOS token");
    }
    long n_ctx = o->n_ctx > 0 ? o->n_ctx : n_prompt + o->n_predict;
    if (n_ctx > m->hp.n_ctx_train) n_ctx = m->hp.n_ctx_train;
    if (n_prompt + 1 > n_ctx) {
        free(prompt);
        return err_set("the prompt has %d tokens but the context is %ld", n_prompt, n_ctx);
    }
    long n_predict = o->n_predict < n_ctx - n_prompt ? o->n_predict : n_ctx - n_prompt;

    seq_runner r;
    if (seq_runner_init(&r, m, (int)n_ctx, 512, o->kv_type, (int)o->threads)) {
        free(prompt);
        return -1;
    }
    const int nv = m->hp.n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    int32_t *out = malloc((size_t)(n_predict + 1) * sizeof *out);
    sampler *smp = sampler_create(nv);
    char *text = malloc(4096);
    int rc = 0;
    if (!logits || !out || !smp || !text) rc = err_set("out of memory");
    rng_state rng;
    rng_seed(&rng, o->sp.seed);
    detok_state ds = {0};

    double t0 = now_seconds();
    if (!rc) rc = seq_runner_feed(&r, prompt, n_prompt, 0, logits, false);
    double t1 = now_seconds();
    int n_gen = 0;
    while (!rc && n_gen < n_predict) {
        int32_t tok = sampler_sample(smp, &o->sp, &rng, logits, prompt, n_prompt, out, n_gen);
        out[n_gen++] = tok;
        if (!o->ignore_eos && tokenizer_is_eog(m->tok, tok)) break;
        size_t nb = detok_push(m->tok, &ds, tok, false, text, 4096);
        fwrite(text, 1, nb, stdout);
        fflush(stdout);
        if (n_gen < n_predict) rc = seq_runner_feed(&r, &tok, 1, n_prompt + n_gen - 1, logits, false);
    }
    size_t nb = detok_flush(&ds, text, 4096);
    if (text) fwrite(text, 1, nb, stdout);
    printf("\n");
    fflush(stdout);
    double t2 = now_seconds();
    if (!rc) {
        fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s)\n", n_prompt, t1 - t0, n_prompt / (t1 - t0));
        fprintf(stderr, "generation: %d tokens in %.3f s (%.1f tok/s)\n", n_gen, t2 - t1,
                n_gen > 0 ? n_gen / (t2 - t1) : 0.0);
    }
    free(text);
    sampler_free(smp);
    free(out);
    free(logits);
    free(prompt);
    seq_runner_free(&r);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gen_options o;
    if (parse_options(argc, argv, &o)) return 1;
    model *m = model_load(o.model_path);
    if (!m) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    int rc = run(&o, m);
    if (rc) fprintf(stderr, "cllm: %s\n", err_get());
    model_free(m);
    return rc ? 1 : 0;
}
