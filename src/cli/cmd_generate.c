/* `cllm generate`: continue one prompt, streaming the text to stdout as it is
 * produced (nothing else goes to stdout; speed goes to stderr), or run a file
 * of prompts through the engine together (--prompts-file: one prompt per line,
 * or JSON lines with per-prompt parameters) and print one JSON line per prompt
 * in input order, with the total throughput on stderr. --prompt-logprobs K
 * adds vLLM's prompt_logprobs (the server's shape, server/responses.h): to each
 * JSON line, or for one prompt as a JSON line on stderr. */
#include "cli/cli_common.h"
#include "cli/cli_groups.h"
#include "cli/cli_parallel.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "server/generation.h"
#include "server/completion_json.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"
#include "util/array.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_model_settings model;
    cli_engine_settings engine;
    cli_sampling_settings sampling;
    cli_spec_settings spec;
    cli_parallel_settings parallel;
    const char *prompt;
    const char *prompts_file;
    bool ignore_eos;
    long beam_width;       /* 1: no beam search */
    long prompt_logprobs;  /* -1: none */
    double length_penalty; /* beam score = cumulative logprob / length^length_penalty */
    const char *json_schema_file; /* structured output: at most one of these three */
    const char *grammar_file;
    const char *regex;
    /* derived from the settings above once they are parsed */
    constraint *constraint;
    sampling_params sp;
    engine_config ec;
} gen_options;

static const cli_option k_generate_options[] = {
    {.name = "--prompt", .aliases = "-p", .kind = CLI_STRING, .offset = offsetof(gen_options, prompt),
     .metavar = "TEXT", .help = "the prompt to continue; the text streams to stdout"},
    {.name = "--prompts-file", .aliases = "--prompts", .kind = CLI_STRING,
     .offset = offsetof(gen_options, prompts_file), .metavar = "FILE",
     .help = "offline batch mode: one prompt per line, or JSON lines {\"prompt\": ..., \"max_tokens\", "
             "\"temperature\", \"top_p\", \"top_k\", \"min_p\", \"seed\", \"stop\", \"n\", \"ignore_eos\"}, run "
             "together through the engine; prints one JSON line per prompt, in input order"},
    {.name = "--ignore-eos", .kind = CLI_FLAG, .offset = offsetof(gen_options, ignore_eos),
     .help = "keep going past end-of-generation tokens"},
    {.name = "--beam-width", .kind = CLI_INT, .offset = offsetof(gen_options, beam_width), .metavar = "N", .min = 1,
     .max = 64, .default_text = "1, no beam search",
     .help = "beam search with N beams (sampling options are then unused); the best beam is printed, at the end"},
    {.name = "--prompt-logprobs", .kind = CLI_INT, .offset = offsetof(gen_options, prompt_logprobs), .metavar = "K",
     .min = 0, .max = 20, .default_text = "none",
     .help = "each prompt token's logprob, rank and K alternatives (vLLM's prompt_logprobs): one JSON line on "
             "stderr, or a \"prompt_logprobs\" field in each --prompts-file line"},
    {.name = "--length-penalty", .kind = CLI_FLOAT, .offset = offsetof(gen_options, length_penalty), .metavar = "X",
     .min = -10, .max = 10, .default_text = "1",
     .help = "beam search ranks by cumulative logprob / length^X"},
    {.name = "--json-schema", .kind = CLI_STRING, .offset = offsetof(gen_options, json_schema_file),
     .metavar = "FILE", .help = "the output is JSON valid under the JSON Schema in FILE (the keywords: docs/tools-and-structured-output.md)"},
    {.name = "--grammar", .kind = CLI_STRING, .offset = offsetof(gen_options, grammar_file), .metavar = "FILE",
     .help = "the output matches the GBNF grammar in FILE (llama.cpp's syntax; the start rule is root)"},
    {.name = "--regex", .kind = CLI_STRING, .offset = offsetof(gen_options, regex), .metavar = "RE",
     .help = "the output matches the regular expression RE (whole output)"},
    {0}};

static const cli_section k_generate_sections[] = {
    {.group = &(const cli_group){"generate options", k_generate_options}},
    {.group = &cli_model_group,
     .offset = offsetof(gen_options, model),
     .only = "--model",
     .overrides = (const cli_override[]){{.name = "--model", .required = true}, {0}}},
    {.group = &cli_sampling_group, .offset = offsetof(gen_options, sampling)},
    {.group = &cli_engine_group,
     .offset = offsetof(gen_options, engine),
     .overrides = (const cli_override[]){
         {.name = "--max-model-len", .default_text = "the longest prompt + --max-tokens, at most the trained context"},
         {.name = "--kv-cache-memory", .default_text = "room for --max-num-seqs sequences of --max-model-len (of --kv-budget with eviction)"},
         {0}}},
    {.group = &cli_spec_group, .offset = offsetof(gen_options, spec)},
    {.group = &cli_parallel_group, .offset = offsetof(gen_options, parallel)},
    {0}};

static const cli_command k_generate = {
    .name = "generate",
    .synopsis = "-m MODEL (-p PROMPT | --prompts-file FILE) [options]",
    .about = "Continue a prompt, streaming only the generated text to stdout (prompt and generation speed go to "
             "stderr); or run a file of prompts through the engine together and print one JSON line per prompt, "
             "with the throughput on stderr.",
    .sections = k_generate_sections,
};

static int parse_options(int argc, char **argv, gen_options *o) {
    *o = (gen_options){.engine = cli_engine_defaults(), .sampling = cli_sampling_defaults(), .beam_width = 1,
                       .prompt_logprobs = -1, .length_penalty = 1.0, .parallel = {.tensor_parallel_size = 1}};
    o->engine.max_model_len = 0;
    o->engine.kv_cache_memory = 0;
    const int rc = cli_parse(&k_generate, argc, argv, o);
    if (rc) return rc;
    if (!o->prompt == !o->prompts_file) return cli_usage_error(&k_generate, "give one of --prompt and --prompts-file");
    o->sp = cli_sampling_params(&o->sampling);
    o->ec = cli_engine_config(&o->engine);
    if (cli_spec_config(&o->spec, &o->ec.spec)) return cli_usage_error(&k_generate, "%s", err_get());
    if (!!o->json_schema_file + !!o->grammar_file + !!o->regex > 1)
        return cli_usage_error(&k_generate, "give at most one of --json-schema, --grammar and --regex");
    return 0;
}

/* The constraint of --json-schema, --grammar or --regex (NULL: none asked). */
static int load_constraint(gen_options *o) {
    const char *file = o->json_schema_file ? o->json_schema_file : o->grammar_file;
    if (!file && !o->regex) return 0;
    json_t *spec;
    if (o->regex) {
        spec = json_string(o->regex);
    } else {
        size_t n;
        char *text = file_read_all(file, &n);
        if (!text) return -1;
        json_error_t je;
        spec = o->json_schema_file ? json_loadb(text, n, JSON_DECODE_ANY, &je) : json_stringn(text, n);
        free(text);
        if (!spec) return err_set("%s: malformed JSON at line %d column %d: %s", file, je.line, je.column, je.text);
    }
    if (!spec) return err_oom("out of memory");
    const constraint_kind kind = o->regex ? CONSTRAINT_REGEX : o->json_schema_file ? CONSTRAINT_JSON_SCHEMA : CONSTRAINT_GBNF;
    o->constraint = constraint_compile(kind, spec, NULL);
    json_decref(spec);
    if (!o->constraint) return err_prefix("%s: ", o->regex ? "--regex" : file);
    return 0;
}

static request_params params_from_options(const gen_options *o) {
    request_params p = request_params_defaults();
    p.sampling = o->sp;
    p.max_tokens = (int)o->sampling.max_tokens;
    p.ignore_eos = o->ignore_eos;
    if (o->beam_width > 1) p.beam_width = (int)o->beam_width;
    p.prompt_logprobs = (int)o->prompt_logprobs;
    p.length_penalty = (float)o->length_penalty;
    p.constraint = o->constraint;
    p.evict = o->ec.evict;
    return p;
}

/* Acceptance of speculative drafts, on stderr beside the speed. */
static void report_spec(const gen_options *o, engine *e) {
    if (o->ec.spec.method == SPEC_NONE) return;
    engine_stats es;
    engine_get_stats(e, &es);
    print_spec_stats(stderr, "speculative decoding: ", &es);
}

/* ---- one prompt, streamed ---- */

typedef struct {
    double t_first;
    int n_out;
    bool done;
    bool failed; /* the engine ended the request with FINISH_ERROR */
    char why[200]; /* and why, when the request caused it (engine_output.error) */
    gen_prompt_lps prompt_lps;
    bool oom;
} stream_state;

/* vLLM's prompt_logprobs of one prompt, as the server writes them. */
static json_t *prompt_logprobs_json(const model *m, const gen_prompt_lps *p) {
    const resp_ctx ctx = {.kind = API_COMPLETIONS, .tok = m->tok};
    return resp_prompt_logprobs(&ctx, p);
}

static void on_stream(void *user, const engine_output *o) {
    stream_state *st = user;
    if (o->prompt_logprobs) gen_keep_prompt_logprobs(&st->prompt_lps, o->prompt_logprobs, o->n_prompt_tokens, &st->oom);
    if (o->n_new_tokens && st->t_first == 0) st->t_first = now_seconds();
    fwrite(o->text, 1, o->text_len, stdout);
    fflush(stdout);
    st->n_out = o->n_output_tokens;
    if (o->finished) st->done = true;
    if (o->finished && o->reason == FINISH_ERROR) st->failed = true;
    if (o->finished && o->error) snprintf(st->why, sizeof st->why, "%s", o->error);
}

static int run_single(gen_options *o, model *m) {
    int32_t *prompt = NULL;
    int n_prompt = tokenizer_encode(m->tok, o->prompt, strlen(o->prompt), true, true, &prompt);
    if (n_prompt < 0) return -1;
    if (n_prompt == 0) {
        free(prompt);
        return err_set("the prompt is empty and the model adds no BOS token");
    }
    long n_ctx = o->engine.max_model_len > 0 ? o->engine.max_model_len : n_prompt + o->sampling.max_tokens;
    /* An evicting sequence keeps its budget in the cache: the context must hold that much. */
    if (o->engine.max_model_len == 0 && o->ec.evict.policy != KV_EVICT_NONE && n_ctx < o->ec.evict.budget)
        n_ctx = o->ec.evict.budget;
    if (n_ctx > m->hp.n_ctx_train) n_ctx = m->hp.n_ctx_train;
    if (n_prompt >= n_ctx) {
        free(prompt);
        return err_set("the prompt has %d tokens but the context is %ld", n_prompt, n_ctx);
    }
    /* With eviction the output may run past the context: positions stay below --kv-budget. */
    if (o->ec.evict.policy == KV_EVICT_NONE && o->sampling.max_tokens > n_ctx - n_prompt)
        o->sampling.max_tokens = n_ctx - n_prompt;
    o->ec.max_model_len = (int)n_ctx;
    o->ec.max_num_seqs = (int)o->beam_width; /* every beam is a sequence */
    engine *e = engine_create(m, &o->ec);
    if (!e) {
        free(prompt);
        return -1;
    }
    request_params p = params_from_options(o);
    stream_state st = {0};
    const double t0 = now_seconds();
    int rc = engine_submit(e, prompt, n_prompt, &p, on_stream, &st, NULL);
    while (!rc && engine_step(e) > 0) {
    }
    const double t1 = now_seconds();
    printf("\n");
    fflush(stdout);
    if (!rc && st.t_first > 0) {
        fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s)\n", n_prompt, st.t_first - t0,
                n_prompt / (st.t_first - t0));
        fprintf(stderr, "generation: %d tokens in %.3f s (%.1f tok/s)\n", st.n_out, t1 - st.t_first,
                st.n_out > 1 ? (st.n_out - 1) / (t1 - st.t_first) : 0.0);
    }
    if (!rc && st.failed && st.why[0]) rc = err_set("%s", st.why);
    if (!rc && st.failed)
        rc = err_oom("the engine ended the request with an error (out of memory, or a KV cache too small for its "
                     "next step: raise --kv-cache-memory)");
    if (!rc && st.oom) rc = err_oom("out of memory for the prompt logprobs");
    if (!rc && p.prompt_logprobs >= 0) {
        json_t *j = json_pack("{s:o}", "prompt_logprobs", prompt_logprobs_json(m, &st.prompt_lps));
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (!s) rc = err_oom("out of memory for the prompt logprobs");
        else fprintf(stderr, "%s\n", s);
        free(s);
        json_decref(j);
    }
    free(st.prompt_lps.items);
    if (!rc) report_spec(o, e);
    engine_free(e);
    free(prompt);
    return rc;
}

/* ---- a file of prompts ---- */

typedef struct {
    json_t *texts;  /* array of strings, one per sample */
    json_t *finish; /* array */
    int n_prompt;
    int n_out;
    gen_prompt_lps prompt_lps;
    bool oom;
} batch_result;

static void on_batch(void *user, const engine_output *o) {
    batch_result *r = user;
    if (o->prompt_logprobs) gen_keep_prompt_logprobs(&r->prompt_lps, o->prompt_logprobs, o->n_prompt_tokens, &r->oom);
    json_t *t = json_array_get(r->texts, (size_t)o->index);
    const char *old = json_string_value(t);
    size_t ol = strlen(old);
    char *cat = malloc(ol + o->text_len + 1);
    if (!cat) return;
    memcpy(cat, old, ol);
    memcpy(cat + ol, o->text, o->text_len);
    cat[ol + o->text_len] = 0;
    json_array_set_new(r->texts, (size_t)o->index, json_stringn(cat, ol + o->text_len));
    free(cat);
    r->n_prompt = o->n_prompt_tokens;
    if (o->finished) {
        json_array_set_new(r->finish, (size_t)o->index, json_string(finish_reason_name(o->reason)));
        r->n_out += o->n_output_tokens;
    }
}

typedef struct {
    int32_t *tokens;
    int n_tokens;
    request_params p;
    char *stop_store[8];
    const char *stops[8];
} batch_item;

static int parse_item(const gen_options *o, const model *m, const char *line, int lineno, batch_item *it) {
    it->p = params_from_options(o);
    json_t *obj = NULL;
    const char *text = line;
    if (line[0] == '{') {
        json_error_t je;
        obj = json_loads(line, 0, &je);
        if (!obj || !json_is_string(json_object_get(obj, "prompt"))) {
            json_decref(obj);
            return err_set("line %d: expected a JSON object with a string \"prompt\" (%s)", lineno,
                           obj ? "no prompt" : je.text);
        }
        text = json_string_value(json_object_get(obj, "prompt"));
        json_t *v;
        if ((v = json_object_get(obj, "max_tokens"))) it->p.max_tokens = (int)json_integer_value(v);
        if ((v = json_object_get(obj, "temperature"))) it->p.sampling.temperature = (float)json_number_value(v);
        if ((v = json_object_get(obj, "top_p"))) it->p.sampling.top_p = (float)json_number_value(v);
        if ((v = json_object_get(obj, "top_k"))) it->p.sampling.top_k = (int)json_integer_value(v);
        if ((v = json_object_get(obj, "min_p"))) it->p.sampling.min_p = (float)json_number_value(v);
        if ((v = json_object_get(obj, "seed"))) it->p.sampling.seed = (uint64_t)json_integer_value(v);
        if ((v = json_object_get(obj, "n"))) it->p.n = (int)json_integer_value(v);
        if ((v = json_object_get(obj, "ignore_eos"))) it->p.ignore_eos = json_is_true(v);
        json_t *stop = json_object_get(obj, "stop");
        if (json_is_string(stop)) stop = json_pack("[O]", stop);
        else json_incref(stop);
        for (size_t k = 0; k < json_array_size(stop) && k < 8; k++) {
            const char *s = json_string_value(json_array_get(stop, k));
            if (s && *s) it->stops[it->p.n_stop] = it->stop_store[it->p.n_stop] = strdup(s), it->p.n_stop++;
        }
        json_decref(stop);
        it->p.stop = it->stops;
        if (it->p.max_tokens < 0 || it->p.n < 1) {
            json_decref(obj);
            return err_set("line %d: max_tokens must be >= 0 and n >= 1", lineno);
        }
    }
    it->n_tokens = tokenizer_encode(m->tok, text, strlen(text), true, true, &it->tokens);
    json_decref(obj);
    if (it->n_tokens < 0) return err_prefix("line %d: ", lineno);
    return 0;
}

static int read_items(const gen_options *o, const model *m, batch_item **items_out, int *n_out) {
    FILE *f = fopen(o->prompts_file, "r");
    if (!f) return err_set("cannot open %s", o->prompts_file);
    batch_item *items = NULL;
    int n = 0, lineno = 0, rc = 0;
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (!rc && (len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        if ((rc = array_reserve((void **)&items, &cap, (size_t)n + 1, sizeof *items))) break;
        memset(&items[n], 0, sizeof items[n]);
        rc = parse_item(o, m, line, lineno, &items[n]);
        n++;
    }
    free(line);
    fclose(f);
    if (!rc && n == 0) rc = err_set("%s has no prompts", o->prompts_file);
    *items_out = items;
    *n_out = n;
    return rc;
}

static void free_items(batch_item *items, int n) {
    for (int i = 0; i < n; i++) {
        free(items[i].tokens);
        for (int k = 0; k < items[i].p.n_stop; k++) free(items[i].stop_store[k]);
    }
    free(items);
}

static int run_batch(gen_options *o, model *m) {
    batch_item *items = NULL;
    int n = 0;
    int rc = read_items(o, m, &items, &n);
    engine *e = NULL;
    batch_result *res = NULL;
    if (rc) goto done;
    int max_len = 1;
    for (int i = 0; i < n; i++)
        if (items[i].n_tokens + items[i].p.max_tokens > max_len) max_len = items[i].n_tokens + items[i].p.max_tokens;
    o->ec.max_model_len = o->engine.max_model_len > 0 ? (int)o->engine.max_model_len : max_len;
    if (!(e = engine_create(m, &o->ec))) {
        rc = -1;
        goto done;
    }
    res = calloc((size_t)n, sizeof *res);
    long prompt_tokens = 0;
    const double t0 = now_seconds();
    for (int i = 0; i < n && !rc; i++) {
        res[i].texts = json_array();
        res[i].finish = json_array();
        for (int k = 0; k < items[i].p.n; k++) {
            json_array_append_new(res[i].texts, json_string(""));
            json_array_append_new(res[i].finish, json_null());
        }
        prompt_tokens += items[i].n_tokens;
        if (engine_submit(e, items[i].tokens, items[i].n_tokens, &items[i].p, on_batch, &res[i], NULL)) {
            rc = err_prefix("prompt %d: ", i + 1);
        }
    }
    while (!rc && engine_step(e) > 0) {
    }
    const double dt = now_seconds() - t0;
    long out_tokens = 0;
    for (int i = 0; i < n && !rc; i++)
        if (res[i].oom) rc = err_oom("out of memory for the prompt logprobs of prompt %d", i + 1);
    for (int i = 0; i < n && !rc; i++) {
        out_tokens += res[i].n_out;
        json_t *line = json_pack("{s:i,s:O,s:O,s:i,s:i}", "index", i, "text", json_array_get(res[i].texts, 0),
                                 "finish_reason", json_array_get(res[i].finish, 0), "prompt_tokens",
                                 res[i].n_prompt, "completion_tokens", res[i].n_out);
        if (items[i].p.n > 1) {
            json_object_set(line, "texts", res[i].texts);
            json_object_set(line, "finish_reasons", res[i].finish);
        }
        if (items[i].p.prompt_logprobs >= 0)
            json_object_set_new(line, "prompt_logprobs", prompt_logprobs_json(m, &res[i].prompt_lps));
        char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(line);
    }
    if (!rc)
        fprintf(stderr, "%d prompts: %ld prompt + %ld generated tokens in %.3f s: %.1f output tok/s, %.1f total tok/s\n",
                n, prompt_tokens, out_tokens, dt, out_tokens / dt, (prompt_tokens + out_tokens) / dt);
    if (!rc) report_spec(o, e);
done:
    for (int i = 0; res && i < n; i++) {
        json_decref(res[i].texts);
        json_decref(res[i].finish);
        free(res[i].prompt_lps.items);
    }
    free(res);
    engine_free(e);
    free_items(items, n);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    gen_options o;
    const int parsed = parse_options(argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    cli_tp tp;
    if (cli_tp_join(&tp, o.parallel.tensor_parallel_size)) {
        fprintf(stderr, "cllm: %s\n", err_get());
        return 1;
    }
    if (cli_tp_is_follower(&tp)) return cli_tp_follow(&tp, o.model.path, o.engine.threads);
    model *m = cli_tp_load(&tp, o.model.path);
    int rc = m ? load_constraint(&o) : -1;
    if (!rc) rc = o.prompts_file ? run_batch(&o, m) : run_single(&o, m);
    if (rc) fprintf(stderr, "cllm: %s\n", err_get());
    constraint_release(o.constraint);
    model_free(m);
    cli_tp_leave(&tp);
    return rc ? 1 : 0;
}
