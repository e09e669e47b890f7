/* What `cllm bench serve` sends, and when.
 *
 * Arrivals: a Poisson process (exponential gaps of mean 1/rate) from the
 * engine's seeded generator, so a seed gives the same schedule everywhere.
 *
 * Datasets:
 *   random             prompts of random tokens, as vLLM's RandomDataset: draw
 *                      token ids from the server's vocabulary and detokenize
 *                      them with the server's /detokenize, then keep the
 *                      longest prefix of the text that the server's /tokenize
 *                      counts as at most the wanted length (bisection; a text
 *                      does not tokenize back to the ids it came from). When
 *                      the server does not say its vocabulary size, random
 *                      words are cut the same way; without /tokenize at all
 *                      the prompt is words from a built-in list, one per
 *                      wanted token. Input and output lengths are drawn
 *                      uniformly from len*(1 +- --random-range-ratio).
 *   prefix-repetition  --num-prefixes random prefixes of --prefix-len tokens;
 *                      every prompt is one of them plus a random suffix of
 *                      --suffix-len tokens (prefix caching at work).
 *   jsonl              one JSON object per line: {"prompt": "..."} or
 *                      {"messages": [...]}, optionally "max_tokens" (or
 *                      "output_len") and "input_len".
 * For completions the wanted length counts the tokens the server adds itself
 * (BOS), as vLLM does; the report uses the server's own usage numbers. */
#include "loadgen/serve.h"
#include "util/buf.h"
#include "util/array.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ---- */

long bench_rng_range(bench_rng *r, long lo, long hi) {
    if (hi <= lo) return lo;
    return lo + (long)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

void bench_arrivals(bench_rng *r, double rate, int n, double *out) {
    double t = 0;
    for (int i = 0; i < n; i++) {
        if (!(rate > 0) || isinf(rate)) {
            out[i] = 0;
            continue;
        }
        out[i] = t;
        t += -log(1.0 - rng_uniform(r)) / rate;
    }
}

long bench_jitter_len(bench_rng *r, long len, double ratio) {
    if (ratio <= 0) return len < 1 ? 1 : len;
    long lo = (long)floor(len * (1 - ratio)), hi = (long)ceil(len * (1 + ratio));
    if (lo < 1) lo = 1;
    if (hi < lo) hi = lo;
    return bench_rng_range(r, lo, hi);
}

/* ---- prompt text ---- */

static const char *const WORDS[] = {
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "as", "with", "by", "he", "at", "from", "his",
    "an", "were", "are", "which", "this", "be", "or", "has", "had", "first", "one", "their", "its", "new",
    "after", "but", "who", "not", "they", "have", "her", "she", "two", "been", "other", "when", "there", "all",
    "during", "into", "school", "time", "may", "years", "more", "most", "only", "over", "city", "some", "world",
    "would", "where", "later", "up", "such", "used", "many", "can", "state", "about", "national", "out", "known",
    "university", "united", "then", "made", "also", "three", "states", "team", "river", "between", "both",
    "under", "year", "while", "north", "south", "house", "water", "music", "church", "family", "history",
    "small", "great", "light", "road", "place", "number", "people", "system", "market", "paper", "garden",
    "window", "morning", "evening", "village", "mountain", "island", "forest", "bridge", "station", "library",
    "question", "answer", "story", "letter", "summer", "winter", "autumn", "spring", "color", "simple",
    "ancient", "modern", "quiet", "bright", "strong", "gentle", "careful", "famous", "open", "closed",
    "lake", "ocean", "valley", "field", "stone", "silver", "golden", "table", "chair", "kitchen", "doctor",
    "teacher", "student", "engine", "machine", "energy", "signal", "network", "memory", "value", "measure",
    "harbor", "canal"
};
#define N_WORDS ((long)(sizeof WORDS / sizeof *WORDS))

static char *random_words(bench_rng *r, long n) {
    buf b = {0};
    buf_append(&b, "", 0);
    for (long i = 0; i < n; i++) {
        if (i) buf_puts(&b, " ");
        buf_puts(&b, WORDS[bench_rng_range(r, 0, N_WORDS - 1)]);
    }
    if (b.oom) buf_free(&b);
    return b.data;
}

/* Raw text of roughly n tokens: random ids from the vocabulary (skipping the
 * low ids where vocabularies keep control and byte tokens) detokenized by the
 * server, or random words when the vocabulary size is unknown. */
static char *raw_text(bench_tok *t, bench_rng *r, long n) {
    if (t->n_vocab <= 0) return random_words(r, n);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return NULL;
    const long lo = t->n_vocab > 20000 ? 1000 : t->n_vocab / 20;
    for (long i = 0; i < n; i++) ids[i] = (int32_t)bench_rng_range(r, lo, t->n_vocab - 1);
    char *text = bench_tok_decode(t, ids, (int)n);
    free(ids);
    return text;
}

static long count_tokens(bench_tok *t, const char *text, size_t len) {
    char *s = strndup(text, len);
    if (!s) return -1;
    int32_t *ids = NULL;
    const int n = bench_tok_encode(t, s, false, &ids);
    free(s);
    free(ids);
    return n;
}

/* A text of `want` tokens as the server counts it (without special tokens).
 * Tokenizers do not give back the ids a text was decoded from, so rather than
 * cutting ids this makes a text somewhat longer than wanted and keeps its
 * longest prefix (at a UTF-8 boundary) of at most `want` tokens, found by
 * bisection with the server's /tokenize. *got receives the count of the
 * returned text (-1 when unknown: no tokenizer). */
static char *random_text(bench_tok *t, bench_rng *r, long want, long *got) {
    if (want < 1) want = 1;
    *got = -1;
    if (t->style == TOK_NONE) return random_words(r, want);
    char *text = raw_text(t, r, want + want / 4 + 8);
    long m = text ? count_tokens(t, text, strlen(text)) : -1;
    for (int round = 0; text && m >= 0 && m < want && round < 8; round++) { /* too short: add more */
        char *more = raw_text(t, r, (want - m) * 2 + 8);
        if (!more) break;
        buf b = {0};
        buf_puts(&b, text);
        if (t->n_vocab <= 0) buf_puts(&b, " ");
        buf_puts(&b, more);
        free(more);
        if (b.oom) {
            buf_free(&b);
            break;
        }
        free(text);
        text = b.data;
        m = count_tokens(t, text, strlen(text));
    }
    if (!text || m < 0) {
        free(text);
        return NULL;
    }
    if (m <= want) {
        *got = m;
        return text;
    }
    size_t lo = 0, hi = strlen(text); /* count(lo) <= want < count(hi) */
    long lo_count = 0;
    for (;;) {
        size_t mid = lo + (hi - lo) / 2;
        while (mid > lo && ((unsigned char)text[mid] & 0xC0) == 0x80) mid--;
        if (mid == lo) break;
        const long c = count_tokens(t, text, mid);
        if (c < 0) {
            free(text);
            return NULL;
        }
        if (c <= want) lo = mid, lo_count = c;
        else hi = mid;
    }
    if (lo == 0) { /* even one character is too many tokens: keep it anyway */
        lo = 1;
        while (lo < hi && ((unsigned char)text[lo] & 0xC0) == 0x80) lo++;
        lo_count = count_tokens(t, text, lo);
    }
    text[lo] = '\0';
    *got = lo_count;
    return text;
}

static int random_dataset(const bench_dataset_opts *o, bench_tok *t, bench_rng *r, bench_item *items) {
    const int special = o->chat ? 0 : t->n_special;
    for (long i = 0; i < o->num_prompts; i++) {
        const long in = bench_jitter_len(r, o->input_len, o->range_ratio);
        long got;
        items[i].prompt = random_text(t, r, in - special > 0 ? in - special : 1, &got);
        if (!items[i].prompt) return -1;
        items[i].input_len = got >= 0 ? got + special : -1;
        items[i].output_len = bench_jitter_len(r, o->output_len, o->range_ratio);
    }
    return 0;
}

static int prefix_dataset(const bench_dataset_opts *o, bench_tok *t, bench_rng *r, bench_item *items) {
    const int special = o->chat ? 0 : t->n_special;
    const long np = o->num_prefixes > 0 ? o->num_prefixes : 1;
    char **prefix = calloc((size_t)np, sizeof *prefix);
    long *plen = calloc((size_t)np, sizeof *plen);
    int rc = prefix && plen ? 0 : -1;
    for (long k = 0; !rc && k < np; k++) {
        prefix[k] = random_text(t, r, o->prefix_len - special > 0 ? o->prefix_len - special : 1, &plen[k]);
        if (!prefix[k]) rc = -1;
    }
    /* Requests go to the prefixes in turn, then in a shuffled order (vLLM). */
    for (long i = 0; !rc && i < o->num_prompts; i++) {
        const long k = i % np;
        long slen;
        char *suffix = random_text(t, r, o->suffix_len, &slen);
        buf b = {0};
        buf_puts(&b, prefix[k]);
        if (suffix && (t->style == TOK_NONE || (b.len && b.data[b.len - 1] != ' ' && suffix[0] != ' ')))
            buf_puts(&b, " ");
        if (suffix) buf_puts(&b, suffix);
        free(suffix);
        if (!suffix || b.oom) {
            buf_free(&b);
            rc = -1;
            break;
        }
        items[i].prompt = b.data;
        items[i].input_len = plen[k] >= 0 && slen >= 0 ? plen[k] + slen + special : -1;
        items[i].output_len = o->output_len;
    }
    for (long i = o->num_prompts - 1; !rc && i > 0; i--) {
        const long j = bench_rng_range(r, 0, i);
        const bench_item tmp = items[i];
        items[i] = items[j];
        items[j] = tmp;
    }
    for (long k = 0; prefix && k < np; k++) free(prefix[k]);
    free(prefix);
    free(plen);
    return rc;
}

static int jsonl_dataset(const bench_dataset_opts *o, bench_item **items) {
    FILE *f = fopen(o->path, "r");
    if (!f) {
        fprintf(stderr, "cllm bench serve: cannot open dataset '%s'\n", o->path);
        return -1;
    }
    int n = 0, lineno = 0;
    size_t cap = 0;
    bench_item *it = NULL;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = 0;
        if (len == 0) continue;
        json_error_t jerr;
        json_t *j = json_loadb(line, (size_t)len, 0, &jerr);
        json_t *p = j ? json_object_get(j, "prompt") : NULL, *m = j ? json_object_get(j, "messages") : NULL;
        if (!json_is_object(j) || !(json_is_string(p) || json_is_array(m))) {
            fprintf(stderr, "cllm bench serve: %s:%d: %s\n", o->path, lineno,
                    !j ? jerr.text : "expected an object with \"prompt\" (a string) or \"messages\" (a list)");
            json_decref(j);
            rc = -1;
            break;
        }
        if (json_is_array(m) && !o->chat) {
            fprintf(stderr,
                    "cllm bench serve: %s:%d: \"messages\" needs --endpoint /v1/chat/completions\n",
                    o->path, lineno);
            json_decref(j);
            rc = -1;
            break;
        }
        if (array_reserve((void **)&it, &cap, (size_t)n + 1, sizeof *it)) {
            json_decref(j);
            rc = -1;
            break;
        }
        bench_item *x = &it[n++];
        *x = (bench_item){.input_len = -1, .output_len = o->output_len};
        if (json_is_string(p)) x->prompt = strdup(json_string_value(p));
        else x->messages = json_incref(m);
        const json_t *ol = json_object_get(j, "max_tokens");
        if (!json_is_integer(ol)) ol = json_object_get(j, "output_len");
        if (json_is_integer(ol) && json_integer_value(ol) > 0) x->output_len = (long)json_integer_value(ol);
        const json_t *il = json_object_get(j, "input_len");
        if (json_is_integer(il)) x->input_len = (long)json_integer_value(il);
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (!rc && n == 0) {
        fprintf(stderr, "cllm bench serve: dataset '%s' holds no prompts\n", o->path);
        rc = -1;
    }
    if (rc) {
        bench_items_free(it, n);
        return -1;
    }
    /* --num-prompts takes the first lines, going round the file when it is short. */
    const int want = o->num_prompts > 0 ? (int)o->num_prompts : n;
    bench_item *out = calloc((size_t)want, sizeof *out);
    if (!out) {
        bench_items_free(it, n);
        return -1;
    }
    for (int i = 0; i < want; i++) {
        const bench_item *s = &it[i % n];
        out[i] = *s;
        out[i].prompt = s->prompt ? strdup(s->prompt) : NULL;
        out[i].messages = s->messages ? json_incref(s->messages) : NULL;
    }
    bench_items_free(it, n);
    *items = out;
    return want;
}

int bench_dataset_build(const bench_dataset_opts *o, bench_tok *tok, bench_rng *rng, bench_item **items) {
    *items = NULL;
    if (!strcmp(o->name, "jsonl")) {
        if (!o->path) {
            fprintf(stderr, "cllm bench serve: the jsonl dataset needs --dataset-path FILE\n");
            return -1;
        }
        return jsonl_dataset(o, items);
    }
    const bool random = !strcmp(o->name, "random"), prefix = !strcmp(o->name, "prefix-repetition");
    if (!random && !prefix) {
        fprintf(stderr, "cllm bench serve: unknown dataset '%s' (random, prefix-repetition, jsonl)\n", o->name);
        return -1;
    }
    bench_item *it = calloc((size_t)o->num_prompts, sizeof *it);
    if (!it) return -1;
    const int rc = random ? random_dataset(o, tok, rng, it) : prefix_dataset(o, tok, rng, it);
    if (rc) {
        fprintf(stderr, "cllm bench serve: could not build the %s dataset (tokenizer calls failed or out of memory)\n",
                o->name);
        bench_items_free(it, (int)o->num_prompts);
        return -1;
    }
    *items = it;
    return (int)o->num_prompts;
}

void bench_items_free(bench_item *items, int n) {
    for (int i = 0; items && i < n; i++) {
        free(items[i].prompt);
        json_decref(items[i].messages);
    }
    free(items);
}

int bench_dataset_save(const char *path, const bench_item *items, int n) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cllm bench serve: cannot write '%s'\n", path);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        json_t *j = json_object();
        if (items[i].messages) json_object_set(j, "messages", items[i].messages);
        else json_object_set_new(j, "prompt", json_string(items[i].prompt ? items[i].prompt : ""));
        json_object_set_new(j, "max_tokens", json_integer(items[i].output_len));
        if (items[i].input_len >= 0) json_object_set_new(j, "input_len", json_integer(items[i].input_len));
        char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(j);
        if (!s || fprintf(f, "%s\n", s) < 0) rc = -1;
        free(s);
    }
    if (fclose(f)) rc = -1;
    if (rc) fprintf(stderr, "cllm bench serve: writing '%s' failed\n", path);
    return rc;
}
