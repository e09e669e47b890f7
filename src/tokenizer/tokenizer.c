/* Tokenizer: builds the vocabulary from GGUF metadata, cuts special tokens out
 * of the text, and hands the plain text between them to the SentencePiece
 * (spm.c) or byte-level BPE (bpe.c) encoder. The behaviour follows llama.cpp's
 * llama-vocab.cpp so that ids match it exactly:
 *  - special tokens (control, user-defined, unknown) are cut out longest text
 *    first, each from every remaining piece of raw text; control and unknown
 *    tokens only when the caller asks for it (parse_special);
 *  - tokens whose text names an end of turn are made control tokens, and a few
 *    FIM tokens likewise, as llama.cpp's loader does;
 *  - BOS and EOS come from tokenizer.ggml.add_bos_token/add_eos_token, with
 *    llama.cpp's defaults per tokenizer kind when the keys are absent. */
#include "tokenizer/tok_internal.h"

#include "format/gguf.h"
#include "util/error.h"
#include "util/array.h"

#include <stdio.h>
#include <string.h>

#define KEY(x) "tokenizer.ggml." x

/* --- accessors ----------------------------------------------------------- */

int32_t tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }

size_t tokenizer_max_token_bytes(const tokenizer *t) {
    /* A token's vocabulary text is at least as long as the input it covers:
     * U+2581 (3 bytes) stands for a space, a byte-level character (1-2 bytes)
     * for one byte, "<0x41>" for one byte. The one shrinking step is the
     * byte-level tokenizer's repair of invalid UTF-8, where a 4-byte sequence
     * past U+10FFFF becomes U+FFFD (3 bytes): hence 4/3. A byte-level
     * vocabulary without a token for some byte drops that byte (llama.cpp's
     * fallback), and then no bound holds. */
    const size_t n = t->max_text_len ? t->max_text_len : 1;
    /* WordPiece: a whole word of any length can be the unknown token. */
    if (t->kind == TOK_KIND_WORDPIECE) return SIZE_MAX;
    if (t->kind != TOK_KIND_BPE) return n;
    for (int b = 0; b < 256; b++)
        if (strtab_find(&t->vocab, t->byte_enc[b], t->byte_enc_len[b]) < 0) return SIZE_MAX;
    return (4 * n + 2) / 3;
}
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
bool tokenizer_add_bos(const tokenizer *t) { return t->add_bos; }
bool tokenizer_add_space_prefix(const tokenizer *t) { return t->add_space_prefix; }

bool tokenizer_is_eog(const tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

tok_type tokenizer_token_type(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? (tok_type)t->type[id] : TOK_TYPE_UNDEFINED;
}

const char *tokenizer_token_text(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->text[id] : NULL;
}

int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len) {
    return strtab_find(&t->vocab, text, len);
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    bpe_free(t);
    strtab_free(&t->vocab);
    free(t->text_buf);
    free(t->text);
    free(t->text_len);
    free(t->score);
    free(t->type);
    free(t->eog);
    free(t->special);
    free(t->trie);
    free(t);
}

/* --- loading ------------------------------------------------------------- */

/* Fills the text -> id table. The table is far larger than the caches, so
 * each slot is prefetched a few tokens ahead of its insert. */
int tok_index_vocab(tokenizer *t) {
    enum { AHEAD = 16 };
    uint64_t ring[AHEAD];
    int32_t n = t->n_vocab;
    for (int32_t i = 0; i < n && i < AHEAD; i++) {
        ring[i] = strtab_hash(t->text[i], t->text_len[i]);
        strtab_prefetch(&t->vocab, ring[i]);
    }
    for (int32_t i = 0; i < n; i++) {
        uint64_t h = ring[i % AHEAD];
        if (i + AHEAD < n) {
            ring[i % AHEAD] = strtab_hash(t->text[i + AHEAD], t->text_len[i + AHEAD]);
            strtab_prefetch(&t->vocab, ring[i % AHEAD]);
        }
        int32_t old = strtab_insert_hashed(&t->vocab, i, h);
        if (old != i)
            return err_set("tokenizer: duplicate token in vocabulary: '%.200s' has ids %d and %d",
                           t->text[i], old, i);
        if (t->text_len[i] > t->max_text_len) t->max_text_len = t->text_len[i];
    }
    return 0;
}

static int load_vocab(tokenizer *t, const gguf_ctx *g) {
    const gguf_value *tv = gguf_find(g, KEY("tokens"));
    if (!tv) return err_set("tokenizer: " KEY("tokens") " is missing");
    if (tv->type != GGUF_TYPE_ARRAY || tv->arr.type != GGUF_TYPE_STRING)
        return err_set("tokenizer: " KEY("tokens") " is not an array of strings");
    uint64_t n = tv->arr.n;
    if (n == 0) return err_set("tokenizer: " KEY("tokens") " is empty");
    if (n > INT32_MAX) return err_set("tokenizer: %llu tokens is too many", (unsigned long long)n);

    const gguf_value *sv = gguf_find(g, KEY("scores"));
    if (sv && (sv->type != GGUF_TYPE_ARRAY ||
               (sv->arr.type != GGUF_TYPE_FLOAT32 && sv->arr.type != GGUF_TYPE_INT32)))
        return err_set("tokenizer: " KEY("scores") " is not an array of float32 or int32");
    if (sv && sv->arr.n < n)
        return err_set("tokenizer: " KEY("scores") " has %llu entries for %llu tokens",
                       (unsigned long long)sv->arr.n, (unsigned long long)n);
    const gguf_value *yv = gguf_find(g, KEY("token_type"));
    if (yv && (yv->type != GGUF_TYPE_ARRAY || yv->arr.type != GGUF_TYPE_INT32))
        return err_set("tokenizer: " KEY("token_type") " is not an array of int32");
    if (yv && yv->arr.n < n)
        return err_set("tokenizer: " KEY("token_type") " has %llu entries for %llu tokens",
                       (unsigned long long)yv->arr.n, (unsigned long long)n);

    t->n_vocab = (int32_t)n;
    /* llama.cpp renames an empty token "[EMPTY_<id>]"; room for that too. */
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += (tv->arr.strs[i].len ? tv->arr.strs[i].len : 20) + 1;
    t->text_buf = malloc(total);
    t->text = malloc(n * sizeof *t->text);
    t->text_len = malloc(n * sizeof *t->text_len);
    t->score = malloc(n * sizeof *t->score);
    t->type = malloc(n);
    if (!t->text_buf || !t->text || !t->text_len || !t->score || !t->type)
        return err_oom("tokenizer: out of memory for %llu tokens", (unsigned long long)n);
    if (strtab_init(&t->vocab, (uint32_t)n, t->text, t->text_len)) return err_prefix("tokenizer: ");

    char *p = t->text_buf;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = tv->arr.strs[i];
        if (s.len > UINT32_MAX) return err_set("tokenizer: token %llu is too long", (unsigned long long)i);
        t->text[i] = p;
        if (s.len) {
            memcpy(p, s.ptr, s.len);
            t->text_len[i] = (uint32_t)s.len;
        } else {
            t->text_len[i] = (uint32_t)sprintf(p, "[EMPTY_%llu]", (unsigned long long)i);
        }
        p[t->text_len[i]] = 0;
        p += t->text_len[i] + 1;
        t->score[i] = sv ? (float)gguf_arr_num(sv, i) : 0.0f;
        int64_t ty = yv ? (int64_t)gguf_arr_num(yv, i) : TOK_TYPE_NORMAL;
        t->type[i] = ty >= TOK_TYPE_NORMAL && ty <= TOK_TYPE_BYTE ? (uint8_t)ty : TOK_TYPE_UNDEFINED;
    }
    return tok_index_vocab(t);
}

/* A special-token id from the metadata; an id out of range keeps the default
 * (and a default out of range becomes "none"), as llama.cpp does. */
static void read_special_id(const tokenizer *t, const gguf_ctx *g, const char *key, int32_t *id) {
    if (*id >= t->n_vocab) *id = -1;
    uint32_t v;
    if (gguf_get_u32(g, key, &v) && v < (uint32_t)t->n_vocab) *id = (int32_t)v;
}

static int32_t find_cstr(const tokenizer *t, const char *s) {
    return strtab_find(&t->vocab, s, strlen(s));
}

/* llama.cpp adds the control attribute; for cutting special tokens out of
 * text and for pieces, that makes any token behave as a control token. */
static void force_control(tokenizer *t, int32_t id) { t->type[id] = TOK_TYPE_CONTROL; }

/* When the id is not in the metadata, the first of `texts` in the vocabulary
 * becomes it, and a control token. */
static int32_t detect_special(tokenizer *t, int32_t id, const char *const *texts) {
    if (id >= 0) return id;
    for (; *texts; texts++) {
        int32_t found = find_cstr(t, *texts);
        if (found >= 0) {
            force_control(t, found);
            return found;
        }
    }
    return -1;
}

static int add_eog(tokenizer *t, int32_t id) {
    if (id < 0 || tokenizer_is_eog(t, id)) return 0;
    int32_t *e = realloc(t->eog, (size_t)(t->n_eog + 1) * sizeof *e);
    if (!e) return err_oom("tokenizer: out of memory");
    t->eog = e;
    t->eog[t->n_eog++] = id;
    return 0;
}

static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<end_of_utterance>", NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
static const char *const k_fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", NULL};
static const char *const k_fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", NULL};
static const char *const k_fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>", NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};
/* Texts that end generation wherever they are in the vocabulary. */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>",
    "<|end_of_text|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<end_of_utterance>", NULL};
/* gpt-oss chat markup that llama.cpp always renders. */
static const char *const k_rendered_texts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                               "<|constrain|>", NULL};

static int load_special(tokenizer *t, const gguf_ctx *g) {
    int32_t fim[6] = {-1, -1, -1, -1, -1, -1};
    read_special_id(t, g, KEY("bos_token_id"), &t->bos);
    read_special_id(t, g, KEY("eos_token_id"), &t->eos);
    read_special_id(t, g, KEY("eot_token_id"), &t->eot);
    read_special_id(t, g, KEY("eom_token_id"), &t->eom);
    read_special_id(t, g, KEY("unknown_token_id"), &t->unk);
    read_special_id(t, g, KEY("padding_token_id"), &t->pad);
    if (t->kind == TOK_KIND_WORDPIECE) { /* BERT: [CLS] text [SEP] ("seperator": llama.cpp's spelling) */
        read_special_id(t, g, KEY("cls_token_id"), &t->bos);
        read_special_id(t, g, KEY("seperator_token_id"), &t->eos);
        if (t->unk < 0) t->unk = find_cstr(t, "[UNK]");
        if (t->unk < 0) return err_set("tokenizer: a WordPiece vocabulary needs an unknown token (" KEY("unknown_token_id") ")");
    }
    read_special_id(t, g, KEY("fim_pre_token_id"), &fim[0]);
    read_special_id(t, g, KEY("fim_suf_token_id"), &fim[1]);
    read_special_id(t, g, KEY("fim_mid_token_id"), &fim[2]);
    read_special_id(t, g, KEY("fim_pad_token_id"), &fim[3]);
    read_special_id(t, g, KEY("fim_rep_token_id"), &fim[4]);
    read_special_id(t, g, KEY("fim_sep_token_id"), &fim[5]);

    bool b;
    if (gguf_get_bool(g, KEY("add_bos_token"), &b)) t->add_bos = b;
    if (gguf_get_bool(g, KEY("add_eos_token"), &b)) t->add_eos = b;
    if (t->kind == TOK_KIND_WORDPIECE && gguf_get_bool(g, KEY("add_sep_token"), &b)) t->add_eos = b; /* [SEP] */
    if (t->add_bos && t->bos < 0)
        return err_set("tokenizer: " KEY("add_bos_token") " is true, but " KEY("bos_token_id")
                       " is not set");
    if (t->add_eos && t->eos < 0)
        return err_set("tokenizer: " KEY("add_eos_token") " is true, but " KEY("eos_token_id")
                       " is not set");
    return tok_finish_special(t, fim);
}

int tok_finish_special(tokenizer *t, const int32_t fim[6]) {
    int32_t fim_pre = fim[0], fim_suf = fim[1], fim_mid = fim[2], fim_pad = fim[3], fim_rep = fim[4],
            fim_sep = fim[5];
    t->eot = detect_special(t, t->eot, k_eot_texts);
    t->eom = detect_special(t, t->eom, k_eom_texts);
    detect_special(t, fim_pre, k_fim_pre_texts);
    detect_special(t, fim_suf, k_fim_suf_texts);
    detect_special(t, fim_mid, k_fim_mid_texts);
    fim_pad = detect_special(t, fim_pad, k_fim_pad_texts);
    fim_rep = detect_special(t, fim_rep, k_fim_rep_texts);
    fim_sep = detect_special(t, fim_sep, k_fim_sep_texts);

    if (add_eog(t, fim_pad) || add_eog(t, fim_rep) || add_eog(t, fim_sep)) return -1;
    for (const char *const *s = k_eog_texts; *s; s++) {
        int32_t id = find_cstr(t, *s);
        if (id < 0) continue;
        force_control(t, id);
        if (add_eog(t, id)) return -1;
    }
    for (const char *const *s = k_rendered_texts; *s; s++) {
        int32_t id = find_cstr(t, *s);
        if (id >= 0) t->type[id] = TOK_TYPE_USER_DEFINED;
    }
    if (add_eog(t, t->eos) || add_eog(t, t->eot) || add_eog(t, t->eom)) return -1;
    return 0;
}

/* SentencePiece byte fallback: "<0xXX>", else the byte itself as a token. */
void tok_load_byte_tokens(tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = find_cstr(t, hex);
        if (id < 0) {
            char c = (char)b;
            id = strtab_find(&t->vocab, &c, 1);
        }
        t->byte_tok[b] = id;
    }
}

typedef struct {
    uint32_t len;
    int32_t id;
} len_id;

static int cmp_longest_first(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int32_t trie_node_new(tokenizer *t, uint8_t byte) {
    if (array_reserve((void **)&t->trie, &t->cap_trie, (size_t)t->n_trie + 1, sizeof *t->trie))
        return -1;
    tok_trie_node *n = &t->trie[t->n_trie];
    n->child = n->sibling = n->special = -1;
    n->byte = byte;
    return t->n_trie++;
}

/* The root's children are trie_root[byte]; deeper children are sibling lists. */
static int trie_insert(tokenizer *t, const char *s, uint32_t len, int32_t special) {
    int32_t node = -1; /* the root */
    for (uint32_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        int32_t ch = node < 0 ? t->trie_root[c] : t->trie[node].child;
        if (node >= 0)
            while (ch >= 0 && t->trie[ch].byte != c) ch = t->trie[ch].sibling;
        if (ch < 0) {
            ch = trie_node_new(t, c);
            if (ch < 0) return -1;
            if (node < 0) {
                t->trie_root[c] = ch;
            } else {
                t->trie[ch].sibling = t->trie[node].child;
                t->trie[node].child = ch;
            }
        }
        node = ch;
    }
    t->trie[node].special = special;
    return 0;
}

int tok_build_special(tokenizer *t) {
    for (int i = 0; i < 256; i++) t->trie_root[i] = -1;
    int n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->type[id];
        n += ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN;
    }
    if (n == 0) return 0;
    len_id *order = malloc((size_t)n * sizeof *order);
    t->special = malloc((size_t)n * sizeof *t->special);
    if (!order || !t->special) {
        free(order);
        return err_oom("tokenizer: out of memory for %d special tokens", n);
    }
    n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->type[id];
        if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN)
            order[n++] = (len_id){t->text_len[id], id};
    }
    qsort(order, (size_t)n, sizeof *order, cmp_longest_first);
    for (int i = 0; i < n; i++) t->special[i] = order[i].id;
    free(order);
    t->n_special = n;
    for (int i = 0; i < n; i++)
        if (trie_insert(t, t->text[t->special[i]], t->text_len[t->special[i]], i)) return -1;
    return 0;
}

tokenizer *tokenizer_from_gguf(const gguf_ctx *g) {
    gguf_str model;
    if (!gguf_get_str(g, KEY("model"), &model)) {
        err_set("tokenizer: no tokenizer in the model (" KEY("model") " is missing)");
        return NULL;
    }
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        err_oom("tokenizer: out of memory");
        return NULL;
    }
    t->eot = t->eom = t->pad = -1;
    if (gguf_str_eq(model, "llama")) {
        t->kind = TOK_KIND_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true, t->add_space_prefix = true;
    } else if (gguf_str_eq(model, "gpt2")) {
        t->kind = TOK_KIND_BPE;
        t->bos = 11, t->eos = 11, t->unk = -1;
    } else if (gguf_str_eq(model, "bert")) {
        /* llama.cpp's WPM: [CLS] text [SEP], BERT's uncased normalizer. */
        t->kind = TOK_KIND_WORDPIECE;
        t->bos = t->eos = t->unk = -1;
        t->add_bos = t->add_eos = true;
        t->wp.clean_text = t->wp.chinese_chars = t->wp.strip_accents = t->wp.lowercase = true;
        t->wp.max_chars = 100;
        snprintf(t->wp.first, sizeof t->wp.first, "\xe2\x96\x81");
    } else {
        err_set("tokenizer: unsupported tokenizer model '%.*s' (" KEY("model")
                "; supported: llama, gpt2, bert)", (int)(model.len > 64 ? 64 : model.len), model.ptr);
        free(t);
        return NULL;
    }
    if (t->kind == TOK_KIND_BPE && bpe_init(t, g)) goto fail;
    bool b;
    if (gguf_get_bool(g, KEY("add_space_prefix"), &b)) t->add_space_prefix = b;
    /* Hugging Face Metaspace details GGUF has no key for, in files cllm wrote
     * from a folder (tok_export.c); llama.cpp ignores them. */
    if (gguf_get_bool(g, "cllm.tokenizer.space_prefix_first", &b)) t->space_prefix_first = b;
    if (gguf_get_bool(g, "cllm.tokenizer.space_prefix_not_before_space", &b)) t->space_prefix_not_before_space = b;
    if (load_vocab(t, g) || load_special(t, g) || tok_build_special(t)) goto fail;
    if (t->kind == TOK_KIND_SPM) tok_load_byte_tokens(t);
    return t;
fail:
    tokenizer_free(t);
    return NULL;
}

/* --- encoding ------------------------------------------------------------ */

typedef struct {
    int32_t id; /* -1: raw text */
    size_t off, len;
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} fragvec;

static int frag_push(fragvec *f, int32_t id, size_t off, size_t len) {
    if (array_reserve((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) return -1;
    f->v[f->n++] = (fragment){id, off, len};
    return 0;
}

static bool special_allowed(const tokenizer *t, int32_t id, bool parse_special) {
    return parse_special || t->type[id] == TOK_TYPE_USER_DEFINED;
}

/* Marks in `seen` (one flag per special token) every special token that occurs
 * somewhere in the text; returns how many. */
static int find_special_candidates(const tokenizer *t, const char *text, size_t len,
                                   bool parse_special, uint8_t *seen) {
    int count = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t node = t->trie_root[(uint8_t)text[i]];
        for (size_t j = i + 1; node >= 0; j++) {
            int32_t sp = t->trie[node].special;
            if (sp >= 0 && !seen[sp] && special_allowed(t, t->special[sp], parse_special)) {
                seen[sp] = 1;
                count++;
            }
            if (j >= len) break;
            uint8_t c = (uint8_t)text[j];
            node = t->trie[node].child;
            while (node >= 0 && t->trie[node].byte != c) node = t->trie[node].sibling;
        }
    }
    return count;
}

/* Whether [at, at + n) overlaps one of the sorted, disjoint ranges. */
static bool overlaps(const tok_range *ranges, size_t nranges, size_t at, size_t n) {
    size_t lo = 0, hi = nranges; /* first range that ends after `at` */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].off + ranges[mid].len <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nranges && ranges[lo].off < at + n;
}

/* Splits text into raw pieces and special tokens. Each special token, longest
 * first, is cut out of every raw piece that is left, leftmost occurrence first
 * (llama.cpp's tokenizer_st_partition). A control token that overlaps one of
 * the `plain` ranges stays text, as it would without parse_special. */
static int partition(const tokenizer *t, const char *text, size_t len, bool parse_special,
                     const tok_range *plain, size_t nplain, fragvec *out) {
    out->n = 0;
    if (len == 0) return 0;
    if (frag_push(out, -1, 0, len)) return -1;
    if (t->n_special == 0) return 0;
    uint8_t *seen = calloc((size_t)t->n_special, 1);
    if (!seen) return err_oom("tokenizer: out of memory");
    int rc = 0;
    fragvec next = {0};
    if (find_special_candidates(t, text, len, parse_special, seen) > 0) {
        for (int sp = 0; sp < t->n_special && rc == 0; sp++) {
            if (!seen[sp]) continue;
            int32_t id = t->special[sp];
            const char *tok = t->text[id];
            size_t tlen = t->text_len[id];
            const bool guarded = nplain > 0 && !special_allowed(t, id, false);
            next.n = 0;
            for (size_t k = 0; k < out->n && rc == 0; k++) {
                fragment f = out->v[k];
                if (f.id >= 0) {
                    rc = frag_push(&next, f.id, f.off, f.len);
                    continue;
                }
                size_t pos = f.off, from = f.off, end = f.off + f.len;
                const char *m;
                while (rc == 0 && end - from >= tlen && (m = memmem(text + from, end - from, tok, tlen))) {
                    size_t at = (size_t)(m - text);
                    if (guarded && overlaps(plain, nplain, at, tlen)) {
                        from = at + 1;
                        continue;
                    }
                    if (at > pos) rc = frag_push(&next, -1, pos, at - pos);
                    if (rc == 0) rc = frag_push(&next, id, at, tlen);
                    pos = from = at + tlen;
                }
                if (rc == 0 && pos < end) rc = frag_push(&next, -1, pos, end - pos);
            }
            fragvec tmp = *out;
            *out = next;
            next = tmp;
        }
    }
    free(next.v);
    free(seen);
    return rc;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t **out) {
    return tokenizer_encode_guarded(t, text, len, add_special, parse_special, NULL, 0, out);
}

int tokenizer_encode_guarded(const tokenizer *t, const char *text, size_t len, bool add_special,
                             bool parse_special, const tok_range *plain, size_t nplain, int32_t **out) {
    *out = NULL;
    fragvec frags = {0};
    tokvec v = {0};
    int rc = partition(t, text, len, parse_special, plain, nplain, &frags);
    if (rc == 0 && add_special && t->add_bos) rc = tokvec_push(&v, t->bos);
    bool prev_special = true; /* the text's start counts as after a special token */
    for (size_t i = 0; i < frags.n && rc == 0; i++) {
        fragment f = frags.v[i];
        if (f.id >= 0) {
            rc = tokvec_push(&v, f.id);
            prev_special = true;
        } else if (t->kind == TOK_KIND_SPM) {
            bool prefix = t->add_space_prefix && prev_special && (!t->space_prefix_first || f.off == 0) &&
                          !(t->space_prefix_not_before_space &&
                            (text[f.off] == ' ' || (f.len >= 3 && !memcmp(text + f.off, "\xe2\x96\x81", 3))));
            rc = spm_encode(t, text + f.off, f.len, prefix, &v);
            prev_special = false;
        } else if (t->kind == TOK_KIND_WORDPIECE) {
            rc = wordpiece_encode(t, text + f.off, f.len, &v);
        } else {
            rc = bpe_encode(t, text + f.off, f.len, &v);
            prev_special = false;
        }
    }
    if (rc == 0 && add_special && t->add_eos) rc = tokvec_push(&v, t->eos);
    if (rc == 0 && v.n > INT32_MAX) rc = err_set("tokenizer: %zu tokens is too many", v.n);
    if (rc == 0 && !v.v) rc = tokvec_grow(&v, 1); /* a valid pointer even for no tokens */
    free(frags.v);
    if (rc) {
        free(v.v);
        return -1;
    }
    *out = v.v;
    return (int)v.n;
}

/* --- decoding ------------------------------------------------------------ */

static int copy_out(char *buf, int cap, const char *s, size_t n) {
    if (n > INT32_MAX) return -1;
    if (cap > 0) memcpy(buf, s, n < (size_t)cap ? n : (size_t)cap);
    return (int)n;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* SentencePiece text with U+2581 turned back into spaces. */
static int spm_unescape(const char *s, size_t n, char *buf, int cap) {
    int w = 0;
    for (size_t i = 0; i < n;) {
        char c;
        if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
            c = ' ';
            i += 3;
        } else {
            c = s[i++];
        }
        if (w < cap) buf[w] = c;
        w++;
    }
    return w;
}

int tokenizer_token_to_piece(const tokenizer *t, int32_t id, bool special, char *buf, int cap) {
    if (id < 0 || id >= t->n_vocab) return -1;
    if (cap < 0) cap = 0;
    const char *s = t->text[id];
    size_t n = t->text_len[id];
    switch (t->type[id]) {
    case TOK_TYPE_CONTROL:
    case TOK_TYPE_UNKNOWN:
        return special ? copy_out(buf, cap, s, n) : 0;
    case TOK_TYPE_USER_DEFINED:
        return copy_out(buf, cap, s, n);
    case TOK_TYPE_NORMAL:
        if (t->kind == TOK_KIND_WORDPIECE) return wordpiece_piece(t, s, n, buf, cap);
        return t->kind == TOK_KIND_SPM ? spm_unescape(s, n, buf, cap)
                                       : bpe_decode_text(t, s, n, buf, cap);
    case TOK_TYPE_BYTE: {
        if (n < 6 || hex_digit(s[3]) < 0 || hex_digit(s[4]) < 0) return 0;
        char c = (char)(hex_digit(s[3]) * 16 + hex_digit(s[4]));
        return copy_out(buf, cap, &c, 1);
    }
    default: /* unused and undefined tokens have no text */
        return 0;
    }
}
