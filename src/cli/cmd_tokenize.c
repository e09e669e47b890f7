/* cllm tokenize: text on stdin to token ids on stdout, using only the model's
 * tokenizer metadata (a vocab-only GGUF is enough). --decode goes the other
 * way. --jsonl treats stdin as one JSON value per line (a string, or
 * {"hex": "..."} for bytes that are not UTF-8; with --decode, an array of
 * ids) and prints one JSON result per line, so tests can run many cases in
 * one process. */
#include "cli/cli_groups.h"
#include "cli/commands.h"

#include "format/gguf.h"
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/time.h"
#include "util/array.h"

#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct {
    cli_model_settings model;
    bool add_special, parse_special, json, jsonl, decode, timing;
} tok_opts;

static const cli_option k_tokenize_options[] = {
    {.name = "--no-special", .kind = CLI_FLAG_OFF, .offset = offsetof(tok_opts, add_special),
     .help = "do not add BOS/EOS"},
    {.name = "--parse-special", .kind = CLI_FLAG, .offset = offsetof(tok_opts, parse_special),
     .help = "let control tokens spelled in the text become tokens (with --decode: print control tokens' text)"},
    {.name = "--json", .kind = CLI_FLAG, .offset = offsetof(tok_opts, json), .help = "print a JSON array"},
    {.name = "--jsonl", .kind = CLI_FLAG, .offset = offsetof(tok_opts, jsonl),
     .help = "one JSON string (or {\"hex\": ...}) per input line, one JSON array per output line"},
    {.name = "--decode", .kind = CLI_FLAG, .offset = offsetof(tok_opts, decode),
     .help = "read token ids, print the text (with --jsonl: one JSON array of ids per line in, one JSON string per "
             "line out)"},
    {.name = "--timing", .kind = CLI_FLAG, .offset = offsetof(tok_opts, timing),
     .help = "report load and encode times on stderr"},
    {0}};

static const cli_section k_tokenize_sections[] = {
    {.group = &(const cli_group){"tokenize options", k_tokenize_options}},
    {.group = &cli_model_group,
     .offset = offsetof(tok_opts, model),
     .only = "--model",
     .overrides = (const cli_override[]){
         {.name = "--model", .help = "a GGUF file or a Hugging Face folder; only its tokenizer is read",
          .required = true},
         {0}}},
    {0}};

static const cli_command k_tokenize = {
    .name = "tokenize",
    .synopsis = "-m MODEL [options] < text",
    .about = "Print the token ids of the text read from stdin, space separated (or, with --decode, the text of "
             "the ids). A vocabulary-only GGUF is enough.",
    .sections = k_tokenize_sections,
};

/* All of a stream (stdin), NUL-terminated; NULL on a read error or out of memory. */
static char *read_all(FILE *f, size_t *len) {
    buf b = {0};
    char chunk[1 << 16];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&b, chunk, got);
    if (ferror(f) || b.oom) {
        buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.data ? b.data : calloc(1, 1);
}

static void print_ids(FILE *f, const int32_t *ids, int n, bool json) {
    fputs(json ? "[" : "", f);
    for (int i = 0; i < n; i++) fprintf(f, i ? (json ? ",%d" : " %d") : "%d", ids[i]);
    fputs(json ? "]\n" : "\n", f);
}

/* Decodes ids to text through the streaming detokenizer. For SentencePiece
 * models that add a space prefix, the first token's leading space goes, as in
 * llama.cpp's detokenize. Returns a malloc'd buffer. */
static char *decode_ids(const tokenizer *t, const int32_t *ids, size_t n, bool special,
                        size_t *len) {
    size_t cap = 0, w = 0;
    char *out = NULL;
    detok_state st = {0};
    for (size_t i = 0; i <= n; i++) {
        int piece = i < n ? tokenizer_token_to_piece(t, ids[i], special, NULL, 0) : 0;
        size_t need = DETOK_MAX_OUT(piece > 0 ? piece : 0);
        if (array_reserve((void **)&out, &cap, w + need, 1)) break;
        if (i == n) {
            w += detok_flush(&st, out + w, cap - w);
            *len = w;
            return out;
        }
        size_t start = w;
        w += detok_push(t, &st, ids[i], special, out + w, cap - w);
        if (i == 0 && tokenizer_add_space_prefix(t) && w > start && out[start] == ' ') {
            memmove(out + start, out + start + 1, w - start - 1);
            w--;
        }
    }
    free(out);
    return NULL;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes a run of hex digits; NULL with err_set when it is not one. */
static char *hex_bytes(const char *h, size_t lineno, size_t *len) {
    size_t hl = strlen(h);
    if (hl % 2) {
        err_set("stdin line %zu: \"hex\" has an odd number of digits", lineno);
        return NULL;
    }
    char *out = malloc(hl / 2 + 1);
    if (!out) {
        err_oom("out of memory");
        return NULL;
    }
    for (size_t i = 0; i < hl / 2; i++) {
        int a = hex_val(h[2 * i]), b = hex_val(h[2 * i + 1]);
        if (a < 0 || b < 0) {
            free(out);
            err_set("stdin line %zu: \"hex\" holds a non-hex character", lineno);
            return NULL;
        }
        out[i] = (char)(a * 16 + b);
    }
    *len = hl / 2;
    return out;
}

/* The bytes a JSONL input line stands for: a JSON string, or {"hex": "..."}.
 * Returns a malloc'd buffer, or NULL with err_set. */
static char *line_text(const char *line, size_t n, size_t lineno, size_t *len) {
    json_error_t jerr;
    json_t *v = json_loadb(line, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!v) {
        err_set("stdin line %zu: not JSON: %s", lineno, jerr.text);
        return NULL;
    }
    char *out = NULL;
    json_t *hex = json_is_object(v) ? json_object_get(v, "hex") : NULL;
    if (json_is_string(v)) {
        *len = json_string_length(v);
        out = malloc(*len + 1);
        if (out) memcpy(out, json_string_value(v), *len);
        else err_oom("out of memory");
    } else if (json_is_string(hex)) {
        out = hex_bytes(json_string_value(hex), lineno, len);
    } else {
        err_set("stdin line %zu: expected a JSON string or {\"hex\": ...}", lineno);
    }
    json_decref(v);
    return out;
}

/* Reads ids from a JSON array line. Returns the count or -1. */
static int line_ids(const char *line, size_t n, size_t lineno, int32_t **ids) {
    json_error_t jerr;
    json_t *v = json_loadb(line, n, 0, &jerr);
    if (!v || !json_is_array(v)) {
        json_decref(v);
        return err_set("stdin line %zu: expected a JSON array of token ids", lineno);
    }
    size_t m = json_array_size(v);
    *ids = malloc((m ? m : 1) * sizeof **ids);
    if (!*ids) {
        json_decref(v);
        return err_oom("out of memory");
    }
    for (size_t i = 0; i < m; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
            json_decref(v);
            free(*ids);
            return err_set("stdin line %zu: element %zu is not a token id", lineno, i);
        }
        (*ids)[i] = (int32_t)json_integer_value(x);
    }
    json_decref(v);
    return (int)m;
}

static int check_ids(const tokenizer *t, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t))
            return err_set("token id %d is out of range (vocabulary of %d)", ids[i],
                           tokenizer_n_vocab(t));
    return 0;
}

static int run_jsonl(const tokenizer *t, const tok_opts *o) {
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int rc = 0;
    double t_enc = 0;
    while (rc == 0 && (got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        size_t n = (size_t)got;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (n == 0) continue;
        if (o->decode) {
            int32_t *ids = NULL;
            int m = line_ids(line, n, lineno, &ids);
            if (m < 0 || check_ids(t, ids, m)) {
                if (m >= 0) free(ids);
                rc = -1;
                break;
            }
            size_t len;
            char *text = decode_ids(t, ids, (size_t)m, o->parse_special, &len);
            free(ids);
            json_t *s = text ? json_stringn(text, len) : NULL;
            char *js = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
            if (js) printf("%s\n", js);
            else rc = err_set("stdin line %zu: cannot encode the decoded text as JSON", lineno);
            free(js);
            json_decref(s);
            free(text);
        } else {
            size_t len;
            char *text = line_text(line, n, lineno, &len);
            if (!text) {
                rc = -1;
                break;
            }
            int32_t *ids;
            double t0 = (1e3 * now_seconds());
            int m = tokenizer_encode(t, text, len, o->add_special, o->parse_special, &ids);
            t_enc += (1e3 * now_seconds()) - t0;
            free(text);
            if (m < 0) {
                rc = err_prefix("stdin line %zu: ", lineno);
                break;
            }
            print_ids(stdout, ids, m, true);
            free(ids);
        }
    }
    free(line);
    if (o->timing) fprintf(stderr, "tokenize: encoded %zu lines in %.2f ms\n", lineno, t_enc);
    return rc;
}

static int run_plain(const tokenizer *t, const tok_opts *o) {
    size_t len;
    char *text = read_all(stdin, &len);
    if (!text) return err_set("cannot read stdin: %s", strerror(errno));
    int rc = 0;
    if (o->decode) {
        size_t n = 0, cap = 0;
        int32_t *ids = NULL;
        char *p = text, *end = text + len;
        while (rc == 0 && p < end) {
            if (*p < '0' || *p > '9') {
                if (!strchr(" \t\r\n,[]", *p)) rc = err_set("stdin: '%c' is not part of a token id", *p);
                p++;
                continue;
            }
            long v = 0;
            while (p < end && *p >= '0' && *p <= '9' && v <= INT32_MAX) v = v * 10 + (*p++ - '0');
            if ((rc = array_reserve((void **)&ids, &cap, n + 1, sizeof *ids))) break;
            ids[n++] = v > INT32_MAX ? -1 : (int32_t)v;
        }
        if (rc == 0) rc = check_ids(t, ids, (int)n);
        size_t out_len = 0;
        char *out = rc == 0 ? decode_ids(t, ids, n, o->parse_special, &out_len) : NULL;
        if (rc == 0 && !out) rc = err_oom("out of memory");
        if (out) fwrite(out, 1, out_len, stdout);
        free(out);
        free(ids);
    } else {
        int32_t *ids;
        double t0 = (1e3 * now_seconds());
        int m = tokenizer_encode(t, text, len, o->add_special, o->parse_special, &ids);
        if (o->timing)
            fprintf(stderr, "tokenize: encoded %zu bytes into %d tokens in %.2f ms\n", len, m,
                    (1e3 * now_seconds()) - t0);
        if (m < 0) {
            rc = -1;
        } else {
            print_ids(stdout, ids, m, o->json);
            free(ids);
        }
    }
    free(text);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    tok_opts o = {.add_special = true};
    const int parsed = cli_parse(&k_tokenize, argc, argv, &o);
    if (parsed) return parsed < 0 ? 1 : 0;
    double t0 = (1e3 * now_seconds());
    struct stat st;
    const bool hf_dir = stat(o.model.path, &st) == 0 && S_ISDIR(st.st_mode); /* a Hugging Face folder */
    gguf_ctx *g = hf_dir ? NULL : gguf_open(o.model.path);
    if (!hf_dir && !g) {
        fprintf(stderr, "cllm tokenize: %s\n", err_get());
        return 1;
    }
    double t1 = (1e3 * now_seconds());
    tokenizer *t = hf_dir ? tokenizer_from_hf(o.model.path) : tokenizer_from_gguf(g);
    double t2 = (1e3 * now_seconds());
    if (!t) {
        fprintf(stderr, "cllm tokenize: %s: %s\n", o.model.path, err_get());
        gguf_close(g);
        return 1;
    }
    if (o.timing)
        fprintf(stderr, "tokenize: gguf opened in %.2f ms, tokenizer (%d tokens) built in %.2f ms\n",
                t1 - t0, tokenizer_n_vocab(t), t2 - t1);
    int rc = o.jsonl ? run_jsonl(t, &o) : run_plain(t, &o);
    if (rc) fprintf(stderr, "cllm tokenize: %s\n", err_get());
    if (fflush(stdout) && rc == 0) {
        fprintf(stderr, "cllm tokenize: cannot write stdout: %s\n", strerror(errno));
        rc = -1;
    }
    tokenizer_free(t);
    gguf_close(g);
    return rc ? 1 : 0;
}
