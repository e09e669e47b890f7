/* `cllm eval-compare BASE CANDIDATE --prompts FILE.jsonl`: a deployment gate
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
 * Prompts file: one JSON object per line, {"prompt": "...",
 * "expect_json": true, "json_prefix": "{", "max_tokens": N} (only "prompt"
 * required). The exit status is 1 when a metric falls below its --min-*
 * threshold, so a pipeline can gate on it. */
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/utf8.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: cllm eval-compare BASE CANDIDATE --prompts FILE.jsonl [--max-tokens N]\n"
               "                          [--min-exact-match X] [--min-token-agreement Y] [--min-json-valid Z]\n"
               "                          [--threads N] [--json-out FILE] [--verbose]\n"
               "  --max-tokens N            tokens generated per prompt (default 64)\n"
               "  --min-exact-match X       fail below this fraction of identical outputs (default 0)\n"
               "  --min-token-agreement Y   fail below this teacher-forced top-1 agreement (default 0)\n"
               "  --min-json-valid Z        fail below this fraction of valid JSON outputs of the candidate\n"
               "                            among prompts with \"expect_json\": true (default 0)\n");
}

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
            if (!g) rc = err_set("out of memory");
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
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    for (int i = 0; s && i < n; i++) {
        char piece[256];
        int k = tokenizer_token_to_piece(tok, t[i], false, piece, sizeof piece);
        if (k <= 0) continue;
        if (k > (int)sizeof piece) k = sizeof piece;
        if (len + (size_t)k + 1 > cap) {
            char *g = realloc(s, cap = 2 * (len + (size_t)k + 1));
            if (!g) {
                free(s);
                return NULL;
            }
            s = g;
        }
        memcpy(s + len, piece, (size_t)k);
        len += (size_t)k;
    }
    if (s) {
        s[len] = 0;
        sanitize_utf8(s);
    }
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

int cmd_eval_compare(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL}, *prompts_path = NULL, *json_out = NULL;
    long max_tokens = 64, threads = 0;
    double min_exact = 0, min_agree = 0, min_json = 0;
    bool verbose = false;
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--prompts")) {
            if (!(prompts_path = arg_value("eval-compare", argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--max-tokens") || !strcmp(a, "-n")) {
            if (!(v = arg_value("eval-compare", argc, argv, &i)) ||
                arg_int("eval-compare", a, v, 1, 1 << 16, &max_tokens))
                return 1;
        } else if (!strcmp(a, "--min-exact-match")) {
            if (!(v = arg_value("eval-compare", argc, argv, &i)) || arg_float("eval-compare", a, v, 0, 1, &min_exact))
                return 1;
        } else if (!strcmp(a, "--min-token-agreement")) {
            if (!(v = arg_value("eval-compare", argc, argv, &i)) || arg_float("eval-compare", a, v, 0, 1, &min_agree))
                return 1;
        } else if (!strcmp(a, "--min-json-valid")) {
            if (!(v = arg_value("eval-compare", argc, argv, &i)) || arg_float("eval-compare", a, v, 0, 1, &min_json))
                return 1;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (!(v = arg_value("eval-compare", argc, argv, &i)) || arg_int("eval-compare", a, v, 1, 1024, &threads))
                return 1;
        } else if (!strcmp(a, "--json-out")) {
            if (!(json_out = arg_value("eval-compare", argc, argv, &i))) return 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            verbose = true;
        } else if (a[0] == '-') {
            fprintf(stderr, "cllm eval-compare: unknown option '%s'\n", a);
            return 1;
        } else if (n_paths < 2) {
            paths[n_paths++] = a;
        } else {
            fprintf(stderr, "cllm eval-compare: unexpected argument '%s'\n", a);
            return 1;
        }
    }
    if (n_paths != 2 || !prompts_path) {
        usage(stderr);
        return 1;
    }
    prompt_item *items = NULL;
    int n_items = 0;
    if (load_prompts(prompts_path, (int)max_tokens, &items, &n_items)) {
        fprintf(stderr, "cllm eval-compare: %s\n", err_get());
        return 1;
    }
    int rc = 1;
    model *m[2] = {NULL, NULL};
    seq_runner r[2];
    bool runner_ok[2] = {false, false};
    int32_t **ptok = calloc((size_t)n_items, sizeof *ptok);
    int *np = calloc((size_t)n_items, sizeof *np);
    float *logits = NULL;
    int32_t *out[2] = {NULL, NULL};
    json_t *report = json_array();
    totals tot = {0};
    if (!ptok || !np) goto oom;
    for (int k = 0; k < 2; k++) {
        if (!(m[k] = model_load(paths[k]))) {
            fprintf(stderr, "cllm: %s\n", err_get());
            goto done;
        }
    }
    if (m[0]->hp.n_vocab != m[1]->hp.n_vocab) {
        fprintf(stderr, "cllm eval-compare: the models have different vocabularies (%d and %d tokens)\n",
                m[0]->hp.n_vocab, m[1]->hp.n_vocab);
        goto done;
    }
    int max_ctx = 0, max_gen = 0;
    for (int i = 0; i < n_items; i++) {
        np[i] = tokenizer_encode(m[0]->tok, items[i].prompt, strlen(items[i].prompt), true, false, &ptok[i]);
        if (np[i] < 1) {
            fprintf(stderr, "cllm eval-compare: prompt %d: %s\n", i + 1, np[i] < 0 ? err_get() : "empty");
            goto done;
        }
        if (np[i] + items[i].max_tokens > max_ctx) max_ctx = np[i] + items[i].max_tokens;
        if (items[i].max_tokens > max_gen) max_gen = items[i].max_tokens;
    }
    for (int k = 0; k < 2; k++) {
        if (seq_runner_init(&r[k], m[k], max_ctx, max_ctx < 512 ? max_ctx : 512, KV_F32, (int)threads)) {
            fprintf(stderr, "cllm: %s\n", err_get());
            goto done;
        }
        runner_ok[k] = true;
    }
    logits = malloc((size_t)max_gen * m[0]->hp.n_vocab * sizeof *logits);
    out[0] = malloc((size_t)max_gen * sizeof(int32_t));
    out[1] = malloc((size_t)max_gen * sizeof(int32_t));
    if (!logits || !out[0] || !out[1] || !report) goto oom;
    for (int i = 0; i < n_items; i++) {
        int n[2];
        for (int k = 0; k < 2; k++)
            if ((n[k] = greedy(&r[k], ptok[i], np[i], items[i].max_tokens, out[k], logits)) < 0) goto fail;
        int agree = 0;
        if (forced_agreement(&r[1], ptok[i], np[i], out[0], n[0], logits, &agree)) goto fail;
        int prefix = 0;
        while (prefix < n[0] && prefix < n[1] && out[0][prefix] == out[1][prefix]) prefix++;
        const bool exact = n[0] == n[1] && prefix == n[0];
        char *text[2] = {detokenize(m[0]->tok, out[0], n[0]), detokenize(m[1]->tok, out[1], n[1])};
        if (!text[0] || !text[1]) {
            free(text[0]);
            free(text[1]);
            goto oom;
        }
        bool jv[2] = {false, false};
        if (items[i].expect_json) {
            for (int k = 0; k < 2; k++) {
                char *full = malloc(strlen(items[i].json_prefix) + strlen(text[k]) + 1);
                if (!full) {
                    free(text[0]);
                    free(text[1]);
                    goto oom;
                }
                strcat(strcpy(full, items[i].json_prefix), text[k]);
                jv[k] = holds_json(full);
                free(full);
            }
            tot.json_prompts++;
            tot.json_base += jv[0];
            tot.json_cand += jv[1];
        }
        tot.prompts++;
        tot.exact += exact;
        tot.base_tokens += n[0];
        tot.agree += agree;
        tot.prefix += prefix;
        if (verbose)
            fprintf(stderr, "prompt %d: %s, agreement %d/%d, prefix %d%s%s%s\n  base:      %s\n  candidate: %s\n",
                    i + 1, exact ? "exact" : "differs", agree, n[0], prefix,
                    items[i].expect_json ? ", json " : "", items[i].expect_json ? (jv[0] ? "base ok" : "base bad") : "",
                    items[i].expect_json ? (jv[1] ? " / candidate ok" : " / candidate bad") : "", text[0], text[1]);
        json_array_append_new(report, json_pack("{s:i, s:b, s:i, s:i, s:i, s:i, s:s, s:s}", "prompt", i + 1, "exact",
                                                exact, "base_tokens", n[0], "candidate_tokens", n[1], "agree", agree,
                                                "prefix", prefix, "base", text[0], "candidate", text[1]));
        if (items[i].expect_json) {
            json_t *last = json_array_get(report, json_array_size(report) - 1);
            json_object_set_new(last, "json_base", json_boolean(jv[0]));
            json_object_set_new(last, "json_candidate", json_boolean(jv[1]));
        }
        free(text[0]);
        free(text[1]);
    }
    const double exact_rate = (double)tot.exact / tot.prompts;
    const double agree_rate = tot.base_tokens ? (double)tot.agree / tot.base_tokens : 1;
    const double prefix_rate = tot.base_tokens ? (double)tot.prefix / tot.base_tokens : 1;
    const double json_rate = tot.json_prompts ? (double)tot.json_cand / tot.json_prompts : 1;
    printf("prompts            %d\n", tot.prompts);
    printf("exact match        %.4f (%d/%d)\n", exact_rate, tot.exact, tot.prompts);
    printf("token agreement    %.4f (teacher-forced top-1, %ld/%ld base tokens)\n", agree_rate, tot.agree,
           tot.base_tokens);
    printf("prefix agreement   %.4f (tokens before the first divergence)\n", prefix_rate);
    if (tot.json_prompts)
        printf("json valid         base %d/%d, candidate %d/%d\n", tot.json_base, tot.json_prompts, tot.json_cand,
               tot.json_prompts);
    rc = 0;
    if (exact_rate < min_exact) {
        printf("FAIL: exact match %.4f < %.4f\n", exact_rate, min_exact);
        rc = 1;
    }
    if (agree_rate < min_agree) {
        printf("FAIL: token agreement %.4f < %.4f\n", agree_rate, min_agree);
        rc = 1;
    }
    if (tot.json_prompts && json_rate < min_json) {
        printf("FAIL: candidate JSON validity %.4f < %.4f\n", json_rate, min_json);
        rc = 1;
    }
    if (!rc) printf("PASS\n");
    if (json_out) {
        json_t *doc = json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:i, s:i, s:i, s:b, s:O}", "base", paths[0],
                                "candidate", paths[1], "prompts", tot.prompts, "exact_match", exact_rate,
                                "token_agreement", agree_rate, "prefix_agreement", prefix_rate, "json_prompts",
                                tot.json_prompts, "json_valid_base", tot.json_base, "json_valid_candidate",
                                tot.json_cand, "pass", !rc, "per_prompt", report);
        if (!doc || json_dump_file(doc, json_out, JSON_INDENT(2))) {
            fprintf(stderr, "cllm eval-compare: cannot write %s\n", json_out);
            rc = 1;
        }
        json_decref(doc);
    }
    goto done;
oom:
    fprintf(stderr, "cllm: out of memory\n");
    goto done;
fail:
    fprintf(stderr, "cllm: %s\n", err_get());
    rc = 1;
done:
    json_decref(report);
    for (int k = 0; k < 2; k++) {
        if (runner_ok[k]) seq_runner_free(&r[k]);
        model_free(m[k]);
        free(out[k]);
    }
    free(logits);
    for (int i = 0; i < n_items; i++) {
        free(ptok ? ptok[i] : NULL);
        free(items[i].prompt);
        free(items[i].json_prefix);
    }
    free(ptok);
    free(np);
    free(items);
    return rc;
}
