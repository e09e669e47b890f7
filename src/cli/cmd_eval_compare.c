/* `cllm eval-compare BASE CANDIDATE --prompts-file FILE.jsonl`: a deployment gate
 * for a quantized (or otherwise changed) model. Every prompt runs greedy on
 * both models, and the candidate is measured against the base:
 *
 *   exact match      the fraction of prompts whose candidate output equals
 *                    the base's token for token (to EOS or --max-tokens);
 *   token agreement  teacher-forced top-1 agreement: the candidate is fed the
 *                    prompt and the base's output, and at every position of
 *                    that output its top-1 token is compared with the base's.
 *                    Counted over all base tokens of all prompts. Unlike
 *                    "agreement until the first divergence" it keeps
 *                    measuring after an early, harmless divergence;
 *   prefix agreement the tokens before the first divergence over the base's
 *                    tokens (reported, not gated);
 *   JSON validity    for prompts with "expect_json": true, whether each
 *                    model's output holds a JSON object or array: one
 *                    parses completely from the output's first '{' or '['
 *                    (so code fences and text after the value are allowed),
 *                    per model. A prompt that opens the value itself gives
 *                    the opening in "json_prefix", which is put before the
 *                    output for this check.
 *
 * Prompts file (--prompts-file, or --prompts): one JSON object per line, {"prompt": "...",
 * "expect_json": true, "json_prefix": "{", "max_tokens": N} (only "prompt"
 * required). The exit status is 1 when a metric falls below its --min-*
 * threshold, so a pipeline can gate on it. */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/utf8.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_engine_settings engine;     /* --threads */
    cli_sampling_settings sampling; /* --max-tokens */
    const char *base, *candidate, *prompts, *json_out;
    double min_exact, min_agree, min_json;
    bool verbose;
} eval_options;

static const cli_option k_eval_options[] = {
    {.name = "--prompts-file", .aliases = "--prompts", .kind = CLI_STRING, .offset = offsetof(eval_options, prompts),
     .metavar = "FILE.jsonl", .required = true,
     .help = "one JSON object per line: {\"prompt\": ..., \"expect_json\": true, \"json_prefix\": \"{\", "
             "\"max_tokens\": N} (only \"prompt\" required)"},
    {.name = "--min-exact-match", .kind = CLI_FLOAT, .offset = offsetof(eval_options, min_exact), .metavar = "X",
     .min = 0, .max = 1, .help = "fail below this fraction of identical outputs"},
    {.name = "--min-token-agreement", .kind = CLI_FLOAT, .offset = offsetof(eval_options, min_agree), .metavar = "Y",
     .min = 0, .max = 1, .help = "fail below this teacher-forced top-1 agreement"},
    {.name = "--min-json-valid", .kind = CLI_FLOAT, .offset = offsetof(eval_options, min_json), .metavar = "Z",
     .min = 0, .max = 1,
     .help = "fail below this fraction of valid JSON outputs of the candidate among prompts with "
             "\"expect_json\": true"},
    {.name = "--json-out", .kind = CLI_STRING, .offset = offsetof(eval_options, json_out), .metavar = "FILE",
     .help = "write the report, per prompt included, as JSON"},
    {.name = "--verbose", .aliases = "-v", .kind = CLI_FLAG, .offset = offsetof(eval_options, verbose),
     .help = "print each prompt's outputs and scores on stderr"},
    {0}};

static const cli_section k_eval_sections[] = {
    {.group = &(const cli_group){"eval-compare options", k_eval_options}},
    {.group = &cli_sampling_group,
     .offset = offsetof(eval_options, sampling),
     .only = "--max-tokens",
     .overrides = (const cli_override[]){
         {.name = "--max-tokens", .help = "tokens generated per prompt (greedy) unless the prompt says", .min = 1,
          .max = 1 << 16},
         {0}}},
    {.group = &cli_engine_group, .offset = offsetof(eval_options, engine), .only = "--threads"},
    {0}};

static const cli_command k_eval_compare = {
    .name = "eval-compare",
    .synopsis = "BASE CANDIDATE --prompts-file FILE.jsonl [options]",
    .about = "A deployment gate for a quantized or otherwise changed model: every prompt runs greedy on both "
             "models, and the candidate is measured against the base: exact-match rate, teacher-forced top-1 token "
             "agreement, agreement before the first divergence, and JSON validity. The exit status is 1 when a "
             "metric falls below its --min-* threshold.",
    .sections = k_eval_sections,
    .positionals = (const cli_positional[]){
        {.metavar = "BASE", .offset = offsetof(eval_options, base), .required = true},
        {.metavar = "CANDIDATE", .offset = offsetof(eval_options, candidate), .required = true},
        {0}},
};

typedef struct {
    char *prompt;
    bool expect_json;
    char *json_prefix; /* put before the output when checking JSON (prompts that open the value) */
    int max_tokens;
} prompt_item;

static int load_prompts(const char *path, int default_max, prompt_item **out, int *n_out) {
    FILE *f = fopen(path, "r");
    if (!f) return err_set("cannot open prompts file %s", path);
    prompt_item *v = NULL;
    int n = 0, line_no = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while (!rc && (len = getline(&line, &cap, f)) >= 0) {
        line_no++;
        size_t i = 0;
        while (i < (size_t)len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n' || line[i] == '\r')) i++;
        if (i == (size_t)len) continue;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        const char *p = o ? json_string_value(json_object_get(o, "prompt")) : NULL;
        if (!p) {
            rc = err_set("%s:%d: %s", path, line_no, o ? "expected an object with a string \"prompt\"" : je.text);
        } else {
            prompt_item *g = realloc(v, (size_t)(n + 1) * sizeof *g);
            if (!g) rc = err_oom("out of memory");
            else {
                v = g;
                v[n].prompt = strdup(p);
                v[n].expect_json = json_is_true(json_object_get(o, "expect_json"));
                const char *jp = json_string_value(json_object_get(o, "json_prefix"));
                v[n].json_prefix = strdup(jp ? jp : "");
                json_t *mt = json_object_get(o, "max_tokens");
                v[n].max_tokens = json_is_integer(mt) && json_integer_value(mt) > 0 ? (int)json_integer_value(mt)
                                                                                     : default_max;
                n++;
            }
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (!rc && !n) rc = err_set("prompts file %s holds no prompts", path);
    if (rc) {
        for (int i = 0; i < n; i++) free(v[i].prompt), free(v[i].json_prefix);
        free(v);
        return -1;
    }
    *out = v;
    *n_out = n;
    return 0;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Greedy continuation of `prompt` (n_prompt tokens): up to max tokens, the
 * end-of-generation token included when one comes. Returns the count. */
static int greedy(seq_runner *r, const int32_t *prompt, int n_prompt, int max, int32_t *out, float *logits) {
    if (seq_runner_feed(r, prompt, n_prompt, 0, logits, false)) return -1;
    int n = 0;
    while (n < max) {
        const int32_t t = argmax(logits, r->m->hp.n_vocab);
        out[n++] = t;
        if (tokenizer_is_eog(r->m->tok, t) || n == max) break;
        if (seq_runner_feed(r, &t, 1, n_prompt + n - 1, logits, false)) return -1;
    }
    return n;
}

/* Teacher-forced: positions of ref[0..n) where the model's top-1 is ref[k]. */
static int forced_agreement(seq_runner *r, const int32_t *prompt, int n_prompt, const int32_t *ref, int n,
                            float *logits, int *agree) {
    const int nv = r->m->hp.n_vocab;
    if (seq_runner_feed(r, prompt, n_prompt, 0, logits, false)) return -1;
    *agree = argmax(logits, nv) == ref[0];
    if (n > 1) {
        if (seq_runner_feed(r, ref, n - 1, n_prompt, logits, true)) return -1;
        for (int k = 1; k < n; k++) *agree += argmax(logits + (size_t)(k - 1) * nv, nv) == ref[k];
    }
    return 0;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF), or 0. */
static int utf8_seq(const unsigned char *p) {
    return utf8_seq_len((const char *)p, strnlen((const char *)p, 4));
}

/* Replaces invalid UTF-8 (a model may stop inside a character, or emit raw
 * byte tokens) with '?' so the text can go into the JSON report. */
static void sanitize_utf8(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        const int len = utf8_seq(p);
        if (len) p += len;
        else *p++ = '?';
    }
}

static char *detokenize(const tokenizer *tok, const int32_t *t, int n) {
    buf text = {0};
    for (int i = 0; i < n; i++) {
        char piece[256];
        int k = tokenizer_token_to_piece(tok, t[i], false, piece, sizeof piece);
        if (k <= 0) continue;
        if (k > (int)sizeof piece) k = sizeof piece;
        buf_append(&text, piece, (size_t)k);
    }
    char *s = text.oom ? NULL : text.data ? text.data : calloc(1, 1);
    if (!s) buf_free(&text);
    else sanitize_utf8(s);
    return s;
}

/* Whether the text holds a JSON object or array: one parses completely from
 * its first '{' or '[' (text after it, such as a code fence or more
 * generated lines, is ignored). */
static bool holds_json(const char *text) {
    const char *a = strpbrk(text, "{[");
    if (!a) return false;
    json_error_t je;
    json_t *v = json_loads(a, JSON_DISABLE_EOF_CHECK, &je);
    const bool ok = v != NULL;
    json_decref(v);
    return ok;
}

typedef struct {
    int prompts, exact, json_prompts, json_base, json_cand;
    long base_tokens, agree, prefix;
} totals;

/* Everything one comparison holds; [0] is the base, [1] the candidate. */
typedef struct {
    prompt_item *items;
    int n_items;
    model *m[2];
    seq_runner r[2];
    bool runner_ok[2];
    int32_t **ptok; /* [n_items] the prompts' tokens, by the base's tokenizer */
    int *np;
    int max_ctx, max_gen;
    float *logits;  /* [max_gen][n_vocab] */
    int32_t *out[2];
    json_t *report; /* per prompt */
    totals tot;
} comparison;

/* One prompt's outcome. */
typedef struct {
    int n[2]; /* tokens out of each model */
    int agree, prefix;
    bool exact;
    char *text[2];
    bool json_valid[2];
} prompt_result;

static int load_models(comparison *c, const eval_options *o) {
    const char *paths[2] = {o->base, o->candidate};
    for (int k = 0; k < 2; k++)
        if (!(c->m[k] = model_load(paths[k]))) return -1;
    if (c->m[0]->hp.n_vocab != c->m[1]->hp.n_vocab)
        return err_set("the models have different vocabularies (%d and %d tokens)", c->m[0]->hp.n_vocab,
                       c->m[1]->hp.n_vocab);
    return 0;
}

/* Tokenizes every prompt and sizes the runs: the longest prompt + output,
 * the longest output. */
static int tokenize_prompts(comparison *c) {
    c->ptok = calloc((size_t)c->n_items, sizeof *c->ptok);
    c->np = calloc((size_t)c->n_items, sizeof *c->np);
    if (!c->ptok || !c->np) return err_oom("out of memory");
    for (int i = 0; i < c->n_items; i++) {
        const prompt_item *it = &c->items[i];
        c->np[i] = tokenizer_encode(c->m[0]->tok, it->prompt, strlen(it->prompt), true, false, &c->ptok[i]);
        if (c->np[i] < 1) return c->np[i] < 0 ? err_prefix("prompt %d: ", i + 1) : err_set("prompt %d: empty", i + 1);
        if (c->np[i] + it->max_tokens > c->max_ctx) c->max_ctx = c->np[i] + it->max_tokens;
        if (it->max_tokens > c->max_gen) c->max_gen = it->max_tokens;
    }
    return 0;
}

/* One single-sequence runner per model (f32 KV: the comparison should see
 * the weights' differences, not the cache's), and the output buffers. */
static int start_runners(comparison *c, int threads) {
    for (int k = 0; k < 2; k++) {
        if (seq_runner_init(&c->r[k], c->m[k], c->max_ctx, c->max_ctx < 512 ? c->max_ctx : 512, KV_F32, threads))
            return -1;
        c->runner_ok[k] = true;
    }
    c->logits = malloc((size_t)c->max_gen * c->m[0]->hp.n_vocab * sizeof *c->logits);
    c->out[0] = malloc((size_t)c->max_gen * sizeof(int32_t));
    c->out[1] = malloc((size_t)c->max_gen * sizeof(int32_t));
    c->report = json_array();
    if (!c->logits || !c->out[0] || !c->out[1] || !c->report) return err_oom("out of memory");
    return 0;
}

/* Whether each model's text holds JSON, after the prompt's json_prefix. */
static int check_json(const prompt_item *it, prompt_result *pr) {
    for (int k = 0; k < 2; k++) {
        char *full = malloc(strlen(it->json_prefix) + strlen(pr->text[k]) + 1);
        if (!full) return err_oom("out of memory");
        strcat(strcpy(full, it->json_prefix), pr->text[k]);
        pr->json_valid[k] = holds_json(full);
        free(full);
    }
    return 0;
}

/* Runs prompt i on both models and measures the candidate against the base. */
static int compare_prompt(comparison *c, int i, prompt_result *pr) {
    const prompt_item *it = &c->items[i];
    for (int k = 0; k < 2; k++)
        if ((pr->n[k] = greedy(&c->r[k], c->ptok[i], c->np[i], it->max_tokens, c->out[k], c->logits)) < 0) return -1;
    if (forced_agreement(&c->r[1], c->ptok[i], c->np[i], c->out[0], pr->n[0], c->logits, &pr->agree)) return -1;
    while (pr->prefix < pr->n[0] && pr->prefix < pr->n[1] && c->out[0][pr->prefix] == c->out[1][pr->prefix])
        pr->prefix++;
    pr->exact = pr->n[0] == pr->n[1] && pr->prefix == pr->n[0];
    for (int k = 0; k < 2; k++)
        if (!(pr->text[k] = detokenize(c->m[k]->tok, c->out[k], pr->n[k]))) return err_oom("out of memory");
    return it->expect_json ? check_json(it, pr) : 0;
}

/* Adds a prompt's outcome to the totals, the per-prompt report and (with
 * --verbose) stderr. */
static void record_prompt(comparison *c, int i, const prompt_result *pr, bool verbose) {
    const bool expect_json = c->items[i].expect_json;
    totals *t = &c->tot;
    if (expect_json) {
        t->json_prompts++;
        t->json_base += pr->json_valid[0];
        t->json_cand += pr->json_valid[1];
    }
    t->prompts++;
    t->exact += pr->exact;
    t->base_tokens += pr->n[0];
    t->agree += pr->agree;
    t->prefix += pr->prefix;
    if (verbose)
        fprintf(stderr, "prompt %d: %s, agreement %d/%d, prefix %d%s%s%s\n  base:      %s\n  candidate: %s\n", i + 1,
                pr->exact ? "exact" : "differs", pr->agree, pr->n[0], pr->prefix, expect_json ? ", json " : "",
                expect_json ? (pr->json_valid[0] ? "base ok" : "base bad") : "",
                expect_json ? (pr->json_valid[1] ? " / candidate ok" : " / candidate bad") : "", pr->text[0],
                pr->text[1]);
    json_t *entry = json_pack("{s:i, s:b, s:i, s:i, s:i, s:i, s:s, s:s}", "prompt", i + 1, "exact", pr->exact,
                              "base_tokens", pr->n[0], "candidate_tokens", pr->n[1], "agree", pr->agree, "prefix",
                              pr->prefix, "base", pr->text[0], "candidate", pr->text[1]);
    if (expect_json) {
        json_object_set_new(entry, "json_base", json_boolean(pr->json_valid[0]));
        json_object_set_new(entry, "json_candidate", json_boolean(pr->json_valid[1]));
    }
    json_array_append_new(c->report, entry);
}

typedef struct {
    double exact, agree, prefix, json;
} rates;

static rates rates_of(const totals *t) {
    return (rates){.exact = (double)t->exact / t->prompts,
                   .agree = t->base_tokens ? (double)t->agree / t->base_tokens : 1,
                   .prefix = t->base_tokens ? (double)t->prefix / t->base_tokens : 1,
                   .json = t->json_prompts ? (double)t->json_cand / t->json_prompts : 1};
}

static void print_summary(const totals *t, const rates *r) {
    printf("prompts            %d\n", t->prompts);
    printf("exact match        %.4f (%d/%d)\n", r->exact, t->exact, t->prompts);
    printf("token agreement    %.4f (teacher-forced top-1, %ld/%ld base tokens)\n", r->agree, t->agree,
           t->base_tokens);
    printf("prefix agreement   %.4f (tokens before the first divergence)\n", r->prefix);
    if (t->json_prompts)
        printf("json valid         base %d/%d, candidate %d/%d\n", t->json_base, t->json_prompts, t->json_cand,
               t->json_prompts);
}

/* Prints FAIL for each metric under its threshold, else PASS. Returns whether it passed. */
static bool gate(const eval_options *o, const totals *t, const rates *r) {
    bool pass = true;
    if (r->exact < o->min_exact) {
        printf("FAIL: exact match %.4f < %.4f\n", r->exact, o->min_exact);
        pass = false;
    }
    if (r->agree < o->min_agree) {
        printf("FAIL: token agreement %.4f < %.4f\n", r->agree, o->min_agree);
        pass = false;
    }
    if (t->json_prompts && r->json < o->min_json) {
        printf("FAIL: candidate JSON validity %.4f < %.4f\n", r->json, o->min_json);
        pass = false;
    }
    if (pass) printf("PASS\n");
    return pass;
}

static int write_report(const eval_options *o, const comparison *c, const rates *r, bool pass) {
    const totals *t = &c->tot;
    json_t *doc = json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:i, s:i, s:i, s:b, s:O}", "base", o->base, "candidate",
                            o->candidate, "prompts", t->prompts, "exact_match", r->exact, "token_agreement", r->agree,
                            "prefix_agreement", r->prefix, "json_prompts", t->json_prompts, "json_valid_base",
                            t->json_base, "json_valid_candidate", t->json_cand, "pass", pass, "per_prompt",
                            c->report);
    const int rc = !doc || json_dump_file(doc, o->json_out, JSON_INDENT(2)) ? err_set("cannot write %s", o->json_out)
                                                                             : 0;
    json_decref(doc);
    return rc;
}

static void comparison_free(comparison *c) {
    json_decref(c->report);
    for (int k = 0; k < 2; k++) {
        if (c->runner_ok[k]) seq_runner_free(&c->r[k]);
        model_free(c->m[k]);
        free(c->out[k]);
    }
    free(c->logits);
    for (int i = 0; i < c->n_items; i++) {
        free(c->ptok ? c->ptok[i] : NULL);
        free(c->items[i].prompt);
        free(c->items[i].json_prefix);
    }
    free(c->ptok);
    free(c->np);
    free(c->items);
}

/* Every prompt on both models. Returns 0 (pass), 1 (a threshold failed) or -1. */
static int run_comparison(comparison *c, const eval_options *o) {
    if (load_prompts(o->prompts, (int)o->sampling.max_tokens, &c->items, &c->n_items) || load_models(c, o) ||
        tokenize_prompts(c) || start_runners(c, (int)o->engine.threads))
        return -1;
    for (int i = 0; i < c->n_items; i++) {
        prompt_result pr = {0};
        const int rc = compare_prompt(c, i, &pr);
        if (!rc) record_prompt(c, i, &pr, o->verbose);
        free(pr.text[0]);
        free(pr.text[1]);
        if (rc) return -1;
    }
    const rates r = rates_of(&c->tot);
    print_summary(&c->tot, &r);
    const bool pass = gate(o, &c->tot, &r);
    if (o->json_out && write_report(o, c, &r, pass)) return -1;
    return pass ? 0 : 1;
}

int cmd_eval_compare(int argc, char **argv) {
    eval_options o = {.engine = cli_engine_defaults(), .sampling = cli_sampling_defaults()};
    o.sampling.max_tokens = 64;
    const int parsed = cli_parse(&k_eval_compare, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    comparison c = {0};
    const int rc = run_comparison(&c, &o);
    if (rc < 0) fprintf(stderr, "cllm eval-compare: %s\n", err_get());
    comparison_free(&c);
    return rc ? 1 : 0;
}
