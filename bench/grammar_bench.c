/* grammar_bench: what structured output costs on a real vocabulary.
 *   1. indexing the vocabulary (once per model);
 *   2. compiling typical JSON schemas (each made unique, so the cache does
 *      not answer; median of --reps);
 *   3. token masks along a valid document: the first time each state is
 *      seen (a walk) and again (the cache), and applying a mask to logits;
 *   4. time per output token with and without a constraint, through the
 *      engine at batch 1 and batch --batch (default 32), alternating the two
 *      --reps times. Both sides produce exactly --tokens tokens: the
 *      unconstrained side ignores end-of-generation, the constrained one
 *      follows a grammar that cannot finish (a JSON array of short strings
 *      that never closes). Time per output token is the decode time (from each
 *      request's first token to its last) over the tokens decoded.
 *   --replay FILE instead times only the first mask of each new state along
 *      real outputs (JSON lines {"schema", "text"}, as bench/structured_corpus.py
 *      --save-outputs writes them): every schema compiled and its output's
 *      tokens followed, once walking the whole vocabulary for each new state
 *      and once from the vocabulary's token classes (token_mask_class.h),
 *      each side on a fresh vocabulary index, so neither inherits the
 *      other's caches. --slow MS names each state whose mask from the
 *      classes took longer than MS.
 * usage: grammar_bench MODEL.gguf [--reps N] [--tokens N] [--batch N] [--threads N] [--replay FILE]
 *        [--slow MS]
 */
#include "engine/seq_constraint.h"
#include "engine/engine.h"
#include "grammar/constraint.h"
#include "grammar/token_mask.h"
#include "grammar/token_mask_class.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SCHEMAS[] = {
    "{\"type\": \"object\", \"properties\": {\"name%d\": {\"type\": \"string\"}, \"age\": "
    "{\"type\": \"integer\", "
    "\"minimum\": 0, \"maximum\": 150}, \"email\": {\"type\": \"string\", \"format\": \"email\"}}, "
    "\"required\": [\"name%d\", \"age\"]}",
    "{\"type\": \"object\", \"properties\": {\"id%d\": {\"type\": \"string\", \"format\": "
    "\"uuid\"}, \"items\": "
    "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"sku\": {\"type\": "
    "\"string\", "
    "\"pattern\": \"^[A-Z]{3}-[0-9]{4}$\"}, \"qty\": {\"type\": \"integer\", \"minimum\": 1}, "
    "\"price\": "
    "{\"type\": \"number\"}}, \"required\": [\"sku\", \"qty\"]}, \"maxItems\": 20}, \"status\": "
    "{\"enum\": "
    "[\"new\", \"paid\", \"shipped\"]}, \"created\": {\"type\": \"string\", \"format\": "
    "\"date-time\"}, "
    "\"note\": {\"type\": \"string\"}}, \"required\": [\"id%d\", \"items\", \"status\"]}",
    "{\"$defs\": {\"node%d\": {\"type\": \"object\", \"properties\": {\"value\": {\"anyOf\": "
    "[{\"type\": "
    "\"string\"}, {\"type\": \"number\"}, {\"type\": \"null\"}]}, \"children\": {\"type\": "
    "\"array\", \"items\": "
    "{\"$ref\": \"#/$defs/node%d\"}}}, \"required\": [\"value\"]}}, \"$ref\": \"#/$defs/node%d\"}",
};

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

static json_t *schema_n(int which, int k) {
    char text[2048];
    snprintf(text, sizeof text, SCHEMAS[which], k, k, k);
    return json_loads(text, 0, NULL);
}

static void bench_compile(int reps) {
    printf("| schema | compile, median ms | max ms |\n|---|---:|---:|\n");
    static const char *names[] = {"person (string, integer range, email)", "order (uuid, array of objects, pattern, "
                                  "enum, date-time, free text)", "recursive tree ($ref, anyOf)"};
    for (int s = 0; s < 3; s++) {
        double t[256], worst = 0;
        for (int r = 0; r < reps; r++) {
            json_t *j = schema_n(s, 100000 + r * 7 + s);
            const double t0 = now_seconds();
            constraint *c = constraint_compile(CONSTRAINT_JSON_SCHEMA, j, NULL);
            t[r] = (now_seconds() - t0) * 1e3;
            if (!c) fprintf(stderr, "compile: %s\n", err_get());
            worst = t[r] > worst ? t[r] : worst;
            constraint_release(c);
            json_decref(j);
        }
        printf("| %s | %.2f | %.2f |\n", names[s], median(t, reps), worst);
    }
}

static void bench_masks(const tokenizer *tok, const token_vocab *v) {
    json_t *j = schema_n(1, 7);
    constraint *c = constraint_compile(CONSTRAINT_JSON_SCHEMA, j, NULL);
    json_decref(j);
    const char *doc = "{\"id7\": \"123e4567-e89b-12d3-a456-426614174000\", \"items\": [{\"sku\": \"ABC-1234\", "
                      "\"qty\": 2, \"price\": 9.5}, {\"sku\": \"XYZ-0001\", \"qty\": 10}], \"status\": \"paid\", "
                      "\"created\": \"2024-05-01T12:30:00Z\", \"note\": \"Leave the parcel at the back door, "
                      "next to the blue bins; ring twice.\"}";
    int32_t *ids;
    const int n = tokenizer_encode(tok, doc, strlen(doc), false, false, &ids);
    uint32_t *mask = malloc((size_t)(v->n_vocab + 31) / 32 * sizeof *mask);
    float *logits = malloc((size_t)v->n_vocab * sizeof *logits);
    double cold[512], warm[512], apply[512];
    int nc = 0;
    for (int pass = 0; pass < 2; pass++) {
        constraint_state st;
        constraint_state_init(&st, c);
        for (int i = 0; i < n && i < 512; i++) {
            double t0 = now_seconds();
            if (constraint_mask(&st, v, mask)) fprintf(stderr, "mask: %s\n", err_get());
            const double dt = (now_seconds() - t0) * 1e3;
            if (pass == 0) cold[nc++] = dt;
            else warm[i] = dt;
            if (!(mask[ids[i] / 32] >> (ids[i] % 32) & 1)) fprintf(stderr, "token %d refused at %d\n", ids[i], i);
            for (int k = 0; k < v->n_vocab; k++) logits[k] = (float)k;
            constrainer cr = {.tok = tok, .vocab = (token_vocab *)v, .mask = mask};
            t0 = now_seconds();
            constrain_logits(&cr, &st, logits, v->n_vocab);
            apply[i] = (now_seconds() - t0) * 1e3;
            constraint_accept(&st, v, ids[i]);
        }
        constraint_state_free(&st);
    }
    double worst = 0, sum = 0;
    for (int i = 0; i < nc; i++) worst = cold[i] > worst ? cold[i] : worst, sum += cold[i];
    printf("\nMasks along a %d-token order document (schema 2), gemma vocabulary:\n\n", n);
    printf("| first pass (new states walked), mean ms | worst ms | second pass (cached), median ms | "
           "mask + apply to logits, median ms |\n|---:|---:|---:|---:|\n");
    printf("| %.2f | %.2f | %.3f | %.3f |\n", sum / nc, worst, median(warm, nc), median(apply, nc));
    free(ids), free(mask), free(logits);
    constraint_release(c);
}

typedef struct {
    double t_first, t_last;
    int n_out;
    bool done;
} req_time;

static void on_out(void *user, const engine_output *o) {
    req_time *t = user;
    if (o->n_new_tokens) {
        if (t->t_first == 0) t->t_first = now_seconds();
        t->t_last = now_seconds();
    }
    t->n_out = o->n_output_tokens;
    if (o->finished) t->done = true;
}

/* Seconds per output token over `batch` requests decoding `tokens` each. */
static double tpot(engine *e, model *m, int batch, int tokens, constraint *c) {
    req_time *t = calloc((size_t)batch, sizeof *t);
    const char *prompt = "Here is a list of things:";
    int32_t *ids;
    const int n = tokenizer_encode(m->tok, prompt, strlen(prompt), true, false, &ids);
    for (int b = 0; b < batch; b++) {
        request_params p = request_params_defaults();
        p.max_tokens = tokens;
        p.ignore_eos = c == NULL;
        p.sampling.temperature = 0.8f;
        p.sampling.seed = (uint64_t)b + 1;
        p.constraint = c;
        engine_submit(e, ids, n, &p, on_out, &t[b], NULL);
    }
    while (engine_step(e) > 0) {
    }
    double sum = 0;
    int counted = 0;
    for (int b = 0; b < batch; b++)
        if (t[b].n_out > 1) sum += (t[b].t_last - t[b].t_first) / (t[b].n_out - 1), counted++;
    free(ids);
    free(t);
    return counted ? sum / counted : NAN;
}

typedef struct {
    double *ms;
    int n, cap;
} samples;

static void add_sample(samples *s, double v) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->ms = realloc(s->ms, (size_t)s->cap * sizeof *s->ms);
    }
    s->ms[s->n++] = v;
}

static double quantile(samples *s, double q) {
    if (!s->n) return 0;
    qsort(s->ms, (size_t)s->n, sizeof *s->ms, cmp_double);
    const int i = (int)(q * (s->n - 1) + 0.5);
    return s->ms[i];
}

/* Follows every output of the file, timing the masks of new states. */
/* --slow MS: each new state's mask slower than MS with token classes is printed. */
static double slow_ms;

static int replay_pass(const model *m, const token_vocab *v, const char *path, bool classes,
                       samples *out, int *docs, int *tokens) {
    FILE *f = fopen(path, "r");
    if (!f) return fprintf(stderr, "%s: cannot open\n", path), -1;
    constraint_use_token_classes(classes);
    if (classes) { /* as a server does once per model, at its first constrained request */
        const double t0 = now_seconds();
        if (constraint_warm_token_classes(v)) fprintf(stderr, "warm: %s\n", err_get());
        printf(
            "Warming the token classes (the inside of a JSON string): %.1f ms, once per model.\n",
            (now_seconds() - t0) * 1e3);
    }
    uint32_t *mask = malloc((size_t)(v->n_vocab + 31) / 32 * sizeof *mask);
    char *line = NULL;
    size_t cap = 0;
    *docs = *tokens = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *row = json_loads(line, 0, NULL);
        json_t *schema = json_object_get(row, "schema");
        const char *text = json_string_value(json_object_get(row, "text"));
        constraint *c =
            schema && text ? constraint_compile(CONSTRAINT_JSON_SCHEMA, schema, NULL) : NULL;
        constraint_state st;
        if (c && constraint_state_init(&st, c) == 0) {
            int32_t *ids;
            const int n = tokenizer_encode(m->tok, text, strlen(text), false, false, &ids);
            for (int i = 0; i < n; i++) {
                const uint64_t before = constraint_masks_computed();
                const double t0 = now_seconds();
                if (constraint_mask(&st, v, mask)) {
                    fprintf(stderr, "mask: %s\n", err_get());
                    break;
                }
                const double dt = (now_seconds() - t0) * 1e3;
                if (constraint_masks_computed() != before) add_sample(out, dt);
                if (constraint_masks_computed() != before && slow_ms > 0 && dt > slow_ms && classes)
                    fprintf(stderr, "slow: %.2f ms, output %d at token %d of %d, after: %.*s\n", dt,
                            *docs, i, n, 160, text);
                /* The text tokenized anew may split where the model did not; stop where it leaves
                 * the grammar. */
                if (!(mask[ids[i] / 32] >> (ids[i] % 32) & 1) ||
                    constraint_accept(&st, v, ids[i]) != 1)
                    break;
                ++*tokens;
            }
            free(ids);
            constraint_state_free(&st);
            ++*docs;
        }
        constraint_release(c);
        json_decref(row);
    }
    token_class_stats cs;
    token_class_stats_get(v, &cs);
    if (classes)
        printf("Token classes: %llu suffixes classified (a whole walk each), %llu found "
               "classified, %llu states "
               "walked whole; the longest token has %d bytes.\n\n",
               (unsigned long long)cs.walks, (unsigned long long)cs.hits,
               (unsigned long long)cs.unused, v->max_len);
    free(line), free(mask);
    fclose(f);
    constraint_use_token_classes(true);
    return 0;
}

static int replay(const model *m, const char *path) {
    samples whole = {0}, classes = {0};
    int docs = 0, tokens = 0;
    /* Two indexes alive at once: a constraint keeps its masks while the vocabulary it saw is the
     * same pointer. */
    token_vocab *va = token_vocab_from_tokenizer(m->tok), *vb = token_vocab_from_tokenizer(m->tok);
    const int rc = replay_pass(m, va, path, false, &whole, &docs, &tokens) ||
                   replay_pass(m, vb, path, true, &classes, &docs, &tokens);
    token_vocab_free(va), token_vocab_free(vb);
    if (rc) return 1;
    printf("First mask of each new state along %d outputs (%d tokens), gemma vocabulary:\n\n", docs,
           tokens);
    printf("| masks of new states from | states | median ms | p90 ms | p99 ms | worst ms | total "
           "ms |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    samples *side[] = {&whole, &classes};
    const char *names[] = {"a walk of the whole vocabulary", "token classes"};
    for (int k = 0; k < 2; k++) {
        double total = 0;
        for (int i = 0; i < side[k]->n; i++)
            total += side[k]->ms[i];
        printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.1f |\n", names[k], side[k]->n,
               quantile(side[k], 0.5), quantile(side[k], 0.9), quantile(side[k], 0.99),
               quantile(side[k], 1.0), total);
    }
    free(whole.ms), free(classes.ms);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr,
                "usage: grammar_bench MODEL.gguf [--reps N] [--tokens N] [--batch N] [--threads N] "
                "[--replay FILE] [--slow MS]\n");
        return 1;
    }
    int reps = 20, tokens = 64, batch = 32, threads = 0;
    const char *replay_file = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--replay")) replay_file = argv[i + 1];
        else if (!strcmp(argv[i], "--slow")) slow_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    }
    if (reps > 256) reps = 256;
    model *m = model_load(argv[1]);
    if (!m) return fprintf(stderr, "%s\n", err_get()), 1;
    if (replay_file) {
        const int rc = replay(m, replay_file);
        model_free(m);
        return rc;
    }
    double t0 = now_seconds();
    token_vocab *v = token_vocab_from_tokenizer(m->tok);
    printf("Vocabulary: %d tokens indexed in %.1f ms (once per model, at the first constrained "
           "request).\n\n",
           v->n_vocab, (now_seconds() - t0) * 1e3);
    bench_compile(reps);
    bench_masks(m->tok, v);
    /* A JSON array of short strings that never closes: both sides decode exactly --tokens tokens,
     * and the states repeat from item to item as in a schema's steady state. (A schema with
     * minItems N would make every item position a new state: N times the walks.) */
    json_t *j =
        json_string("root ::= \"[\" item (\", \" item)*\nitem ::= \"\\\"\" [a-z ]{1,6} \"\\\"\"\n");
    constraint *c = constraint_compile(CONSTRAINT_GBNF, j, NULL);
    json_decref(j);
    if (!c) return fprintf(stderr, "%s\n", err_get()), 1;
    printf("\nTime per output token through the engine (one engine per batch size, as a server "
           "keeps it), %d "
           "tokens per request, %d threads; the first constrained run meets every state for the "
           "first time, then "
           "the two alternate %d times (median):\n\n| batch | unconstrained ms | constrained, "
           "first run ms | "
           "constrained ms | ratio |\n|---:|---:|---:|---:|---:|\n",
           tokens, threads, reps < 5 ? reps : 5);
    const int sizes[] = {1, batch};
    for (int s = 0; s < 2; s++) {
        engine_config cfg = engine_config_defaults();
        cfg.max_num_seqs = sizes[s];
        cfg.max_model_len = 64 + tokens;
        cfg.n_threads = threads;
        cfg.prefix_caching = false;
        engine *e = engine_create(m, &cfg);
        double a[8], b[8];
        const int n = reps < 5 ? reps : 5;
        const double first = tpot(e, m, sizes[s], tokens, c);
        for (int r = 0; r < n; r++) {
            a[r] = tpot(e, m, sizes[s], tokens, NULL);
            b[r] = tpot(e, m, sizes[s], tokens, c);
        }
        const double ma = median(a, n), mb = median(b, n);
        printf("| %d | %.2f | %.2f | %.2f | %.3f |\n", sizes[s], ma * 1e3, first * 1e3, mb * 1e3, mb / ma);
        fflush(stdout);
        engine_free(e);
    }
    constraint_release(c);
    token_vocab_free(v);
    model_free(m);
    return 0;
}
