/* Tokenizers from a Hugging Face folder: tokenizer.json (the `tokenizers`
 * library's serialization) and tokenizer_config.json. Two kinds of BPE model
 * are understood, and mapped onto the same encoders the GGUF vocabularies use:
 *
 *  - byte-level BPE (GPT-2, Llama 3, Qwen2): a ByteLevel pre-tokenizer, alone
 *    (GPT-2's regex) or after a Split whose regex is one of the known
 *    pre-tokenizers (Llama 3's, Qwen2's); model.ignore_merges as given. A
 *    Qwen2-style NFC normalizer is accepted but not applied (llama.cpp does not
 *    apply it either): text is expected in NFC, as nearly all text is.
 *  - SentencePiece-style BPE (Llama 2, Mistral, Gemma): byte_fallback, spaces
 *    replaced by U+2581 (a Replace normalizer or a Metaspace pre-tokenizer),
 *    optionally a U+2581 prepended to every piece of text (Prepend normalizer,
 *    Metaspace prepend_scheme "always") or to the start only ("first"). The
 *    merges give the merge order (spm.c merges by rank when it has merges),
 *    which is exactly what `tokenizers` does; SentencePiece's scores are not in
 *    the file.
 *
 * added_tokens become control tokens (special: true) or user-defined ones.
 * BOS/EOS come from tokenizer_config.json (bos_token, eos_token,
 * add_bos_token, add_eos_token), else from the post-processor's template. */
#include "tokenizer/tok_internal.h"

#include "format/json_file.h"
#include "util/error.h"
#include "util/file.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define SPACE_MARK "\xe2\x96\x81" /* U+2581 */

/* Llama 3's and Qwen2's Split regexes as tokenizer.json spells them, and the
 * tokenizer.ggml.pre name bpe.c knows them by. */
static const struct {
    const char *regex, *pre;
} k_split_regexes[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*"
     "[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama3"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     "qwen2"},
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt2"},
};

typedef struct {
    const char *path; /* tokenizer.json, for messages */
    json_t *root, *model, *config;
} hf_files;

static const char *type_of(json_t *o) { return json_string_value(json_object_get(o, "type")); }

/* The list of steps of a normalizer/pre-tokenizer/processor: a Sequence's
 * items, or the single object itself (n = 1), or none. */
static size_t steps(json_t *o, const char *list_key, json_t **items) {
    if (!json_is_object(o)) return 0;
    const char *ty = type_of(o);
    if (ty && !strcmp(ty, "Sequence")) {
        *items = json_object_get(o, list_key);
        return json_is_array(*items) ? json_array_size(*items) : 0;
    }
    *items = NULL;
    return 1;
}

static json_t *step_at(json_t *o, json_t *items, size_t i) { return items ? json_array_get(items, i) : o; }

/* The content of a token field of tokenizer_config.json: "text" or {"content": "text"}. */
static const char *token_field(json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

static bool str_is(json_t *v, const char *s) {
    const char *x = json_string_value(v);
    return x && !strcmp(x, s);
}

/* --- the kind and its options -------------------------------------------- */

static int setup_byte_level(tokenizer *t, const hf_files *f) {
    json_t *pt = json_object_get(f->root, "pre_tokenizer"), *items;
    const char *pre = NULL;
    size_t n = steps(pt, "pretokenizers", &items);
    for (size_t i = 0; i < n; i++) {
        json_t *s = step_at(pt, items, i);
        const char *ty = type_of(s);
        if (ty && !strcmp(ty, "ByteLevel")) {
            if (json_is_true(json_object_get(s, "add_prefix_space")))
                return err_set("%s: ByteLevel add_prefix_space is not supported", f->path);
            if (!json_is_false(json_object_get(s, "use_regex"))) {
                if (pre) return err_set("%s: a Split regex and ByteLevel's own regex together", f->path);
                pre = "gpt-2"; /* llama.cpp's name for it */
            }
        } else if (ty && !strcmp(ty, "Split")) {
            const char *re = json_string_value(json_object_get(json_object_get(s, "pattern"), "Regex"));
            if (pre || !re || json_is_true(json_object_get(s, "invert")) ||
                !str_is(json_object_get(s, "behavior"), "Isolated"))
                return err_set("%s: unsupported Split pre-tokenizer (one isolated regex before ByteLevel)", f->path);
            for (size_t k = 0; k < sizeof k_split_regexes / sizeof k_split_regexes[0] && !pre; k++)
                if (!strcmp(re, k_split_regexes[k].regex)) pre = k_split_regexes[k].pre;
            if (!pre)
                return err_set("%s: unsupported pre-tokenizer regex '%.80s' (known: GPT-2's, Llama 3's, Qwen2's)",
                               f->path, re);
        } else {
            return err_set("%s: unsupported pre-tokenizer '%s' in a byte-level tokenizer", f->path, ty ? ty : "?");
        }
    }
    if (!pre) return err_set("%s: byte-level tokenizer without a pre-tokenizer regex", f->path);
    json_t *norm = json_object_get(f->root, "normalizer");
    n = steps(norm, "normalizers", &items);
    for (size_t i = 0; i < n; i++) {
        const char *ty = type_of(step_at(norm, items, i));
        if (!ty || strcmp(ty, "NFC"))
            return err_set("%s: unsupported normalizer '%s' in a byte-level tokenizer", f->path, ty ? ty : "?");
    }
    t->kind = TOK_KIND_BPE;
    if (bpe_setup(t, pre, strlen(pre))) return -1;
    t->ignore_merges = json_is_true(json_object_get(f->model, "ignore_merges"));
    t->add_bos = false; /* from the config or the post-processor below */
    return 0;
}

/* U+2581 handling of a SentencePiece-style tokenizer: spaces must be replaced
 * by it; a prefix may be added. */
static int setup_spm(tokenizer *t, const hf_files *f) {
    bool replaces_spaces = false;
    t->kind = TOK_KIND_SPM;
    t->add_space_prefix = false;
    json_t *norm = json_object_get(f->root, "normalizer"), *items;
    size_t n = steps(norm, "normalizers", &items);
    for (size_t i = 0; i < n; i++) {
        json_t *s = step_at(norm, items, i);
        const char *ty = type_of(s);
        if (ty && !strcmp(ty, "Prepend") && str_is(json_object_get(s, "prepend"), SPACE_MARK)) {
            t->add_space_prefix = true;
        } else if (ty && !strcmp(ty, "Replace") && str_is(json_object_get(json_object_get(s, "pattern"), "String"), " ") &&
                   str_is(json_object_get(s, "content"), SPACE_MARK)) {
            replaces_spaces = true;
        } else {
            return err_set("%s: unsupported normalizer '%s' in a SentencePiece-style tokenizer", f->path,
                           ty ? ty : "?");
        }
    }
    json_t *pt = json_object_get(f->root, "pre_tokenizer");
    n = steps(pt, "pretokenizers", &items);
    for (size_t i = 0; i < n; i++) {
        json_t *s = step_at(pt, items, i);
        const char *ty = type_of(s);
        if (ty && !strcmp(ty, "Metaspace")) {
            if (!str_is(json_object_get(s, "replacement"), SPACE_MARK) || json_is_true(json_object_get(s, "split")))
                return err_set("%s: unsupported Metaspace pre-tokenizer (U+2581 without split)", f->path);
            json_t *scheme = json_object_get(s, "prepend_scheme");
            replaces_spaces = true;
            t->space_prefix_not_before_space = true;
            if (scheme) {
                t->add_space_prefix = !str_is(scheme, "never");
                t->space_prefix_first = str_is(scheme, "first");
            } else {
                t->add_space_prefix = json_is_true(json_object_get(s, "add_prefix_space"));
            }
        } else if (ty && !strcmp(ty, "Split") && replaces_spaces &&
                   str_is(json_object_get(json_object_get(s, "pattern"), "String"), " ")) {
            /* Gemma: splits on spaces the normalizer has already replaced. */
        } else {
            return err_set("%s: unsupported pre-tokenizer '%s' in a SentencePiece-style tokenizer", f->path,
                           ty ? ty : "?");
        }
    }
    if (!replaces_spaces)
        return err_set("%s: SentencePiece-style tokenizer that does not replace spaces with U+2581", f->path);
    return 0;
}

/* BERT's tokenizer: a BertNormalizer (or none), a BertPreTokenizer and a
 * WordPiece model (wordpiece.c). */
static int setup_wordpiece(tokenizer *t, const hf_files *f) {
    t->kind = TOK_KIND_WORDPIECE;
    json_t *norm = json_object_get(f->root, "normalizer"), *pt = json_object_get(f->root, "pre_tokenizer");
    if (!str_is(json_object_get(pt, "type"), "BertPreTokenizer"))
        return err_set("%s: a WordPiece tokenizer needs the BertPreTokenizer", f->path);
    if (json_is_object(norm)) {
        if (!str_is(json_object_get(norm, "type"), "BertNormalizer"))
            return err_set("%s: normalizer '%.32s' is not supported with WordPiece (BertNormalizer)", f->path,
                           type_of(norm) ? type_of(norm) : "?");
        t->wp.clean_text = !json_is_false(json_object_get(norm, "clean_text"));
        t->wp.chinese_chars = !json_is_false(json_object_get(norm, "handle_chinese_chars"));
        t->wp.lowercase = !json_is_false(json_object_get(norm, "lowercase"));
        json_t *strip = json_object_get(norm, "strip_accents");
        t->wp.strip_accents = json_is_boolean(strip) ? json_is_true(strip) : t->wp.lowercase;
    }
    const char *prefix = json_string_value(json_object_get(f->model, "continuing_subword_prefix"));
    if (!prefix) prefix = "##";
    if (strlen(prefix) >= sizeof t->wp.prefix)
        return err_set("%s: continuing_subword_prefix '%.16s' is too long", f->path, prefix);
    snprintf(t->wp.prefix, sizeof t->wp.prefix, "%s", prefix);
    json_t *mc = json_object_get(f->model, "max_input_chars_per_word");
    t->wp.max_chars = json_is_integer(mc) && json_integer_value(mc) > 0 && json_integer_value(mc) < (1 << 20)
                          ? (int)json_integer_value(mc)
                          : 100;
    return 0;
}

static int check_wordpiece_unk(const tokenizer *t, const hf_files *f) {
    return t->unk < 0 ? err_set("%s: the WordPiece model's unk_token is not a token of the vocabulary", f->path) : 0;
}

/* --- vocabulary -------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len;
    uint8_t type;
} vocab_entry;

static int put_token(vocab_entry *v, int64_t n, int64_t id, const char *s, size_t len, uint8_t type,
                     const char *path) {
    if (id < 0 || id >= n || !s) return err_set("%s: invalid token id %lld", path, (long long)id);
    if (v[id].s && (v[id].len != len || memcmp(v[id].s, s, len)))
        return err_set("%s: token id %lld is both '%.40s' and '%.40s'", path, (long long)id, v[id].s, s);
    v[id] = (vocab_entry){s, len, type};
    return 0;
}

/* One past the largest token id a tokenizer.json may name (vocabularies today
 * stay under 300,000). Ids no entry names are filled with [PADn] tokens. */
#ifndef CLLM_FUZZ_LIMITS
#define HF_TOKEN_ID_LIMIT (1 << 24)
#else
/* The libFuzzer build: an input naming one id near 1 << 24 made the loader
 * write and index millions of [PAD] tokens (400 inputs a second, falling);
 * a smaller limit takes the same paths. */
#define HF_TOKEN_ID_LIMIT (1 << 16)
#endif

static bool token_id_valid(const json_t *id) {
    return json_is_integer(id) && json_integer_value(id) >= 0 &&
           json_integer_value(id) < HF_TOKEN_ID_LIMIT;
}

static int load_vocab(tokenizer *t, const hf_files *f) {
    json_t *vocab = json_object_get(f->model, "vocab"), *added = json_object_get(f->root, "added_tokens");
    if (!json_is_object(vocab) || json_object_size(vocab) == 0) return err_set("%s: model.vocab is missing", f->path);
    if (added && !json_is_array(added)) return err_set("%s: added_tokens is not a list", f->path);
    int64_t n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        if (!token_id_valid(v))
            return err_set("%s: vocab entry '%.40s' has an invalid id", f->path, key);
        if (json_integer_value(v) >= n) n = json_integer_value(v) + 1;
    }
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id");
        if (!token_id_valid(id))
            return err_set("%s: added_tokens[%zu] has an invalid id", f->path, i);
        if (json_integer_value(id) >= n) n = json_integer_value(id) + 1;
    }
    vocab_entry *e = calloc((size_t)n, sizeof *e);
    if (!e) return err_oom("tokenizer: out of memory for %lld tokens", (long long)n);
    int rc = 0;
    json_object_foreach(vocab, key, v) {
        if (rc) break;
        uint8_t ty = TOK_TYPE_NORMAL;
        if (t->kind == TOK_KIND_SPM && strlen(key) == 6 && !strncmp(key, "<0x", 3) && key[5] == '>') ty = TOK_TYPE_BYTE;
        rc = put_token(e, n, json_integer_value(v), key, strlen(key), ty, f->path);
    }
    json_array_foreach(added, i, v) {
        if (rc) break;
        uint8_t ty = json_is_true(json_object_get(v, "special")) ? TOK_TYPE_CONTROL : TOK_TYPE_USER_DEFINED;
        json_t *c = json_object_get(v, "content");
        rc = put_token(e, n, json_integer_value(json_object_get(v, "id")), json_string_value(c), json_string_length(c),
                       ty, f->path);
    }
    size_t total = 0;
    for (int64_t k = 0; k < n; k++) total += (e[k].s ? e[k].len : 24) + 1;
    t->n_vocab = (int32_t)n;
    t->text_buf = malloc(total);
    t->text = malloc((size_t)n * sizeof *t->text);
    t->text_len = malloc((size_t)n * sizeof *t->text_len);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->type = malloc((size_t)n);
    if (!rc && (!t->text_buf || !t->text || !t->text_len || !t->score || !t->type))
        rc = err_oom("tokenizer: out of memory for %lld tokens", (long long)n);
    if (!rc && strtab_init(&t->vocab, (uint32_t)n, t->text, t->text_len)) rc = err_prefix("tokenizer: ");
    char *p = t->text_buf;
    for (int64_t k = 0; k < n && !rc; k++) {
        t->text[k] = p;
        if (e[k].s) {
            memcpy(p, e[k].s, e[k].len);
            t->text_len[k] = (uint32_t)e[k].len;
            t->type[k] = e[k].type;
        } else { /* ids the file skips, as convert_hf_to_gguf.py fills them */
            t->text_len[k] = (uint32_t)sprintf(p, "[PAD%lld]", (long long)k);
            t->type[k] = TOK_TYPE_UNUSED;
        }
        p[t->text_len[k]] = 0;
        p += t->text_len[k] + 1;
    }
    free(e);
    return rc ? -1 : tok_index_vocab(t);
}

static int load_merges(tokenizer *t, const hf_files *f) {
    json_t *merges = json_object_get(f->model, "merges");
    if (!json_is_array(merges)) return err_set("%s: model.merges is missing", f->path);
    size_t n = json_array_size(merges), i;
    gguf_str *ms = malloc((n ? n : 1) * sizeof *ms);
    char **owned = calloc(n ? n : 1, sizeof *owned);
    int rc = !ms || !owned ? err_oom("tokenizer: out of memory for %zu merges", n) : 0;
    json_t *m;
    json_array_foreach(merges, i, m) {
        if (rc) break;
        if (json_is_string(m)) { /* "left right" */
            ms[i] = (gguf_str){json_string_value(m), json_string_length(m)};
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) { /* ["left", "right"], tokenizers >= 0.20 */
            json_t *l = json_array_get(m, 0), *r = json_array_get(m, 1);
            size_t ll = json_string_length(l), rl = json_string_length(r);
            owned[i] = malloc(ll + rl + 2);
            if (!owned[i]) {
                rc = err_oom("tokenizer: out of memory");
                break;
            }
            memcpy(owned[i], json_string_value(l), ll);
            owned[i][ll] = ' ';
            memcpy(owned[i] + ll + 1, json_string_value(r), rl);
            ms[i] = (gguf_str){owned[i], ll + rl + 1};
        } else {
            rc = err_set("%s: merges[%zu] is not \"left right\" or [left, right]", f->path, i);
        }
    }
    if (!rc) rc = bpe_set_merges(t, ms, n);
    for (size_t k = 0; owned && k < n; k++) free(owned[k]);
    free(owned);
    free(ms);
    return rc;
}

/* --- special tokens ------------------------------------------------------------ */

static int32_t find_text(const tokenizer *t, const char *s) { return s ? strtab_find(&t->vocab, s, strlen(s)) : -1; }

/* add_bos/add_eos from the post-processor's TemplateProcessing ("single":
 * [SpecialToken?, Sequence A, SpecialToken?]), and the ids it names. */
static void read_template(tokenizer *t, const hf_files *f) {
    json_t *pp = json_object_get(f->root, "post_processor"), *items;
    size_t n = steps(pp, "processors", &items);
    for (size_t i = 0; i < n; i++) {
        json_t *s = step_at(pp, items, i);
        if (!str_is(json_object_get(s, "type"), "TemplateProcessing")) continue;
        json_t *single = json_object_get(s, "single");
        size_t k = json_array_size(single);
        if (k == 0) continue;
        const char *first = json_string_value(json_object_get(json_object_get(json_array_get(single, 0), "SpecialToken"), "id"));
        const char *last =
            json_string_value(json_object_get(json_object_get(json_array_get(single, k - 1), "SpecialToken"), "id"));
        if (first) {
            t->add_bos = true;
            if (t->bos < 0) t->bos = find_text(t, first);
        }
        if (last && k > 1) {
            t->add_eos = true;
            if (t->eos < 0) t->eos = find_text(t, last);
        }
    }
}

static int load_special(tokenizer *t, const hf_files *f) {
    t->bos = find_text(t, token_field(f->config, "bos_token"));
    t->eos = find_text(t, token_field(f->config, "eos_token"));
    t->pad = find_text(t, token_field(f->config, "pad_token"));
    const char *unk = json_string_value(json_object_get(f->model, "unk_token"));
    t->unk = find_text(t, unk ? unk : token_field(f->config, "unk_token"));
    if (t->unk >= 0) t->type[t->unk] = TOK_TYPE_UNKNOWN;
    read_template(t, f);
    json_t *b = json_object_get(f->config, "add_bos_token");
    if (json_is_boolean(b)) t->add_bos = json_is_true(b);
    b = json_object_get(f->config, "add_eos_token");
    if (json_is_boolean(b)) t->add_eos = json_is_true(b);
    if (t->add_bos && t->bos < 0)
        return err_set("%s: BOS is added to the text, but bos_token is not a token of the vocabulary", f->path);
    if (t->add_eos && t->eos < 0)
        return err_set("%s: EOS is added to the text, but eos_token is not a token of the vocabulary", f->path);
    const int32_t fim[6] = {-1, -1, -1, -1, -1, -1};
    return tok_finish_special(t, fim);
}

/* --- the builder ------------------------------------------------------------------ */

static json_t *load_json(const char *dir, const char *file, bool required, char *path, size_t cap, int *rc) {
    snprintf(path, cap, "%s/%s", dir, file);
    bool absent;
    json_t *j = json_file_load(path, JSON_ALLOW_NUL, &absent);
    if (!j) {
        if (!absent) *rc = -1;
        else if (required) *rc = err_set("%s: missing", path);
    } else if (!json_is_object(j)) *rc = err_set("%s: not a JSON object", path);
    return j;
}

tokenizer *tokenizer_from_hf(const char *dir) {
    char path[4096], cfg_path[4096];
    int rc = 0;
    hf_files f = {.path = path};
    f.root = load_json(dir, "tokenizer.json", true, path, sizeof path, &rc);
    f.config = rc ? NULL : load_json(dir, "tokenizer_config.json", false, cfg_path, sizeof cfg_path, &rc);
    tokenizer *t = rc ? NULL : calloc(1, sizeof *t);
    if (!rc && !t) rc = err_oom("tokenizer: out of memory");
    if (!rc) {
        t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
        f.model = json_object_get(f.root, "model");
        const char *ty = type_of(f.model);
        if (!json_is_object(f.model) || !ty) {
            rc = err_set("%s: no tokenizer model", path);
        } else if (!strcmp(ty, "WordPiece")) {
            rc = setup_wordpiece(t, &f);
        } else if (strcmp(ty, "BPE")) {
            rc = err_set("%s: tokenizer model '%.32s' is not supported (BPE, WordPiece)", path, ty);
        } else if (json_string_value(json_object_get(f.model, "continuing_subword_prefix")) ||
                   json_string_value(json_object_get(f.model, "end_of_word_suffix"))) {
            rc = err_set("%s: BPE with subword prefixes or suffixes is not supported", path);
        } else {
            json_t *pt = json_object_get(f.root, "pre_tokenizer"), *dec = json_object_get(f.root, "decoder");
            bool byte_level = false;
            json_t *items;
            size_t n = steps(pt, "pretokenizers", &items);
            for (size_t i = 0; i < n; i++) byte_level |= str_is(json_object_get(step_at(pt, items, i), "type"), "ByteLevel");
            n = steps(dec, "decoders", &items);
            for (size_t i = 0; i < n; i++) byte_level |= str_is(json_object_get(step_at(dec, items, i), "type"), "ByteLevel");
            if (byte_level) rc = setup_byte_level(t, &f);
            else if (json_is_true(json_object_get(f.model, "byte_fallback"))) rc = setup_spm(t, &f);
            else rc = err_set("%s: neither a byte-level nor a byte-fallback BPE tokenizer", path);
        }
    }
    if (!rc)
        rc = load_vocab(t, &f) || (t->kind != TOK_KIND_WORDPIECE && load_merges(t, &f)) || load_special(t, &f) ||
                     tok_build_special(t) || (t->kind == TOK_KIND_WORDPIECE && check_wordpiece_unk(t, &f))
                 ? -1
                 : 0;
    if (!rc && t->kind == TOK_KIND_SPM) tok_load_byte_tokens(t);
    json_decref(f.root);
    json_decref(f.config);
    if (rc) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

int tokenizer_hf_chat_template(const char *dir, char **out) {
    *out = NULL;
    char path[4096];
    int rc = 0;
    json_t *cfg = load_json(dir, "tokenizer_config.json", false, path, sizeof path, &rc);
    if (rc) {
        json_decref(cfg);
        return -1;
    }
    json_t *ct = json_object_get(cfg, "chat_template");
    const char *src = json_string_value(ct);
    if (json_is_array(ct)) { /* [{"name": ..., "template": ...}]: the default one */
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e)
            if (str_is(json_object_get(e, "name"), "default")) src = json_string_value(json_object_get(e, "template"));
    }
    if (src) {
        *out = strdup(src);
        json_decref(cfg);
        return *out ? 0 : err_oom("out of memory");
    }
    json_decref(cfg);
    /* Newer transformers save the template beside the config. */
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    *out = file_read_all(path, NULL);
    if (*out) return 0;
    if (errno != ENOENT) return -1;
    err_clear(); /* none: not an error */
    return 0;
}
