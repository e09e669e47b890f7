/* Byte-level BPE (GPT-2, Llama 3, Qwen2, GPT-4o's o200k; `gpt2` in GGUF), following llama.cpp's
 * llm_tokenizer_bpe. A piece of raw text is
 *  1. decoded leniently as llama.cpp does (an invalid byte becomes U+FFFD);
 *  2. split into words by the pre-tokenizer regexes of tokenizer.ggml.pre,
 *     applied in turn (matches and the gaps between them both become words);
 *  3. each word's bytes are mapped to GPT-2's printable characters, and the
 *     adjacent pair with the lowest merge rank is merged, leftmost first on
 *     ties, until no pair has a merge.
 * The regexes are PCRE2 with Unicode properties. \s is spelled out as the
 * Unicode White_Space set, which is what llama.cpp and Hugging Face's
 * tokenizers (Oniguruma) use; PCRE2's own \s also takes U+180E. */
#include "tokenizer/tok_internal.h"

#include "format/gguf.h"
#include "util/error.h"
#include "util/utf8.h"
#include "util/array.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#define WS "\\x{09}-\\x{0D} \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define WS_TAIL "|[" WS "]+(?![^" WS "])|[" WS "]+"

static const char k_re_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+" WS_TAIL;
static const char k_re_llama3[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" WS "]*[\\r\\n]+" WS_TAIL;
static const char k_re_qwen2[] =
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" WS "]*[\\r\\n]+" WS_TAIL;
/* o200k (GPT-4o, gpt-oss): case-aware words with an optional contraction
 * after them, digits in threes, and '/' kept with trailing newlines. */
#define UPPERISH "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWERISH "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
static const char k_re_gpt4o[] =
    "[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+" CONTRACTIONS "?"
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH "*" CONTRACTIONS "?"
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+" WS_TAIL;

typedef struct {
    const char *names; /* space separated tokenizer.ggml.pre values */
    const char *re[TOK_MAX_PRE_REGEX];
    bool ignore_merges, add_bos;
} pre_tokenizer;

static const pre_tokenizer k_pre[] = {
    /* llama.cpp's fallback for a missing or "default" pre-tokenizer */
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", k_re_gpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
    {"gpt2 gpt-2 phi-2 mpt olmo jais exaone4 jina-es jina-de jina-v1-en jina-v2-es jina-v2-de "
     "jina-v2-code roberta-bpe gigachat a.x-4.0 mellum trillion granite-docling",
     {k_re_gpt2}, false, false},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano",
     {k_re_llama3}, true, true},
    {"dbrx smaug-bpe", {k_re_llama3}, false, false},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open", {k_re_qwen2}, false,
     false},
    {"gpt-4o llama4", {k_re_gpt4o}, false, false},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2",
     {"\\p{N}", k_re_gpt2}, false, false},
};

static bool name_in_list(const char *list, const char *name, size_t len) {
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && !memcmp(p, name, len)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * rest take the code points from 256 on, in byte order. */
static void init_byte_map(tokenizer *t) {
    int next = 256;
    for (int i = 0; i < 324; i++) t->byte_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = printable ? b : next++;
        t->byte_enc_len[b] = (uint8_t)utf8_encode(t->byte_enc[b], (uint32_t)cp);
        t->byte_dec[cp] = (int16_t)b;
    }
}

static int load_merges(tokenizer *t, const gguf_ctx *g) {
    const gguf_value *mv = gguf_find(g, "tokenizer.ggml.merges");
    if (!mv) return err_set("tokenizer: tokenizer.ggml.merges is missing (a gpt2 tokenizer needs it)");
    if (mv->type != GGUF_TYPE_ARRAY || mv->arr.type != GGUF_TYPE_STRING)
        return err_set("tokenizer: tokenizer.ggml.merges is not an array of strings");
    return bpe_set_merges(t, mv->arr.strs, mv->arr.n);
}

int bpe_set_merges(tokenizer *t, const gguf_str *merges, uint64_t n) {
    if (n > INT32_MAX) return err_set("tokenizer: %llu merges is too many", (unsigned long long)n);
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += merges[i].len + 1;
    t->merge_buf = malloc(total ? total : 1);
    t->merge = calloc(n ? n : 1, sizeof *t->merge);
    t->merge_len = calloc(n ? n : 1, sizeof *t->merge_len);
    if (!t->merge_buf || !t->merge || !t->merge_len)
        return err_oom("tokenizer: out of memory for %llu merges", (unsigned long long)n);
    if (strtab_init(&t->merges, (uint32_t)n, t->merge, t->merge_len)) return err_prefix("tokenizer: ");
    t->n_merges = (int32_t)n;
    char *p = t->merge_buf;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = merges[i];
        if (s.len > UINT32_MAX) return err_set("tokenizer: merge %llu is too long", (unsigned long long)i);
        memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
        t->merge[i] = p;
        t->merge_len[i] = (uint32_t)s.len;
        p += s.len + 1;
        /* "left right" split at the first space after the first byte; a merge
         * without one can never apply. The first of two equal merges ranks. */
        if (s.len >= 3 && memchr(s.ptr + 1, ' ', s.len - 1)) strtab_insert(&t->merges, (int32_t)i);
    }
    return 0;
}

int bpe_init(tokenizer *t, const gguf_ctx *g) {
    gguf_str pre = {"default", 7};
    if (gguf_get_str(g, "tokenizer.ggml.pre", &pre) && pre.len == 0) pre = (gguf_str){"default", 7};
    return bpe_setup(t, pre.ptr, pre.len) || load_merges(t, g) ? -1 : 0;
}

int bpe_setup(tokenizer *t, const char *pre_name, size_t pre_len) {
    init_byte_map(t);
    const gguf_str pre = {pre_name, pre_len};
    const pre_tokenizer *pt = NULL;
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0] && !pt; i++)
        if (name_in_list(k_pre[i].names, pre.ptr, pre.len)) pt = &k_pre[i];
    if (!pt)
        return err_set("tokenizer: unknown pre-tokenizer type '%.*s' (tokenizer.ggml.pre)",
                       (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
    snprintf(t->pre, sizeof t->pre, "%.*s", (int)(pre.len < sizeof t->pre ? pre.len : sizeof t->pre - 1), pre.ptr);
    t->ignore_merges = pt->ignore_merges;
    if (pt->add_bos) t->add_bos = true;
    for (int i = 0; i < TOK_MAX_PRE_REGEX && pt->re[i]; i++) {
        int errcode;
        PCRE2_SIZE erroff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pt->re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(errcode, msg, sizeof msg);
            return err_set("tokenizer: pre-tokenizer regex %d of '%.*s' does not compile at %zu: %s",
                           i, (int)pre.len, pre.ptr, (size_t)erroff, (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
        t->re[t->n_re++] = re;
    }
    return 0;
}

void bpe_free(tokenizer *t) {
    for (int i = 0; i < t->n_re; i++) pcre2_code_free((pcre2_code *)t->re[i]);
    t->n_re = 0;
    strtab_free(&t->merges);
    free(t->merge_buf);
    free(t->merge);
    free(t->merge_len);
}

/* --- step 1: lenient UTF-8 ----------------------------------------------- */

/* llama.cpp's unicode_cpt_from_utf8: lead-byte length, continuation bytes
 * checked, nothing else (overlong forms and surrogates pass). Returns the
 * byte count, or 0 for an invalid byte. */
static int decode_lax(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) return *cp = c, 1;
    int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

/* Re-encodes the text the way llama.cpp sees it: `norm` gets each decoded code
 * point (U+FFFD for an invalid byte) and `subj`, the regex subject, the same
 * bytes with surrogates replaced by U+FFFD (same length, so offsets agree). */
static int normalize_text(const char *text, size_t len, char **norm, char **subj, size_t *n_out) {
    char *a = malloc(3 * len + 1), *b = malloc(3 * len + 1);
    if (!a || !b) {
        free(a);
        free(b);
        return err_oom("tokenizer: out of memory for %zu bytes of text", len);
    }
    const unsigned char *s = (const unsigned char *)text;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int l = decode_lax(s + i, len - i, &cp);
        if (l == 0) cp = 0xFFFD, l = 1;
        if (cp > 0x10FFFF) cp = 0xFFFD;
        int w = utf8_encode(a + n, cp);
        if (cp >= 0xD800 && cp <= 0xDFFF)
            utf8_encode(b + n, 0xFFFD);
        else
            memcpy(b + n, a + n, (size_t)w);
        n += (size_t)w;
        i += (size_t)l;
    }
    *norm = a;
    *subj = b;
    *n_out = n;
    return 0;
}

/* --- step 2: pre-tokenizer ----------------------------------------------- */

typedef struct {
    size_t off, len;
} span;

typedef struct {
    span *v;
    size_t n, cap;
} spanvec;

static int span_push(spanvec *s, size_t off, size_t len) {
    if (len == 0) return 0;
    if (array_reserve((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return -1;
    s->v[s->n++] = (span){off, len};
    return 0;
}

/* Each word of `in` is matched on its own (so lookaheads stop at its end);
 * matches and the text between them become the words of `out`. */
static int split_words(const pcre2_code *re, pcre2_match_data *md, const char *subj,
                       const spanvec *in, spanvec *out) {
    out->n = 0;
    for (size_t k = 0; k < in->n; k++) {
        const char *w = subj + in->v[k].off;
        size_t len = in->v[k].len, pos = 0, prev = 0;
        while (pos < len) {
            int rc = pcre2_match(re, (PCRE2_SPTR)w, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return err_set("tokenizer: pre-tokenizer regex failed: %s", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            if (ov[1] == ov[0]) { /* an empty match: step over one character */
                pos = ov[1] + utf8_len_lax((unsigned char)w[ov[1]]);
                continue;
            }
            if (span_push(out, in->v[k].off + prev, ov[0] - prev) ||
                span_push(out, in->v[k].off + ov[0], ov[1] - ov[0]))
                return -1;
            pos = prev = ov[1];
        }
        if (span_push(out, in->v[k].off + prev, len - prev)) return -1;
    }
    return 0;
}

/* --- step 3: merges ------------------------------------------------------ */

typedef struct {
    const tokenizer *t;
    const char *word;
    tok_sym *sym;
    size_t sym_cap;
    char *key; /* "left right", the form of tokenizer.ggml.merges */
    size_t key_cap;
    tok_merge_state merge;
} bpe_session;

/* Two symbols merge when "left right" is a merge; the lowest rank first. */
static int bpe_pair_key(void *ctx, const tok_sym *l, const tok_sym *r, double *key) {
    bpe_session *s = ctx;
    return tok_merge_rank(s->t, s->word, l, r, &s->key, &s->key_cap, key);
}

static int emit_piece(const tokenizer *t, const char *p, size_t n, tokvec *out) {
    int32_t id = strtab_find(&t->vocab, p, n);
    if (id >= 0) return tokvec_push(out, id);
    /* llama.cpp's fallback: each byte that is itself a token */
    for (size_t i = 0; i < n; i++) {
        id = strtab_find(&t->vocab, p + i, 1);
        if (id >= 0 && tokvec_push(out, id)) return -1;
    }
    return 0;
}

/* Encodes one byte-mapped word. */
static int bpe_word(bpe_session *s, const char *word, size_t len, tokvec *out) {
    const tokenizer *t = s->t;
    if (t->ignore_merges) {
        int32_t id = strtab_find(&t->vocab, word, len);
        if (id >= 0) return tokvec_push(out, id);
    }
    if (array_reserve((void **)&s->sym, &s->sym_cap, len + 1, sizeof *s->sym)) return -1;
    s->word = word;
    int32_t n_sym = tok_split_chars(word, len, s->sym);
    if (tok_merge(&s->merge, s->sym, n_sym)) return -1;
    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = s->sym[i].next)
        if (emit_piece(t, word + s->sym[i].off, s->sym[i].n, out)) return -1;
    return 0;
}

int bpe_encode(const tokenizer *t, const char *text, size_t len, tokvec *out) {
    char *norm = NULL, *subj = NULL;
    const char *nt = text, *st = text;
    size_t n = len;
    /* Strict UTF-8 is what PCRE2 accepts, and already the form step 1 would give. */
    if (!utf8_valid(text, len)) {
        if (normalize_text(text, len, &norm, &subj, &n)) return -1;
        nt = norm;
        st = subj;
    }
    int rc = 0;
    spanvec a = {0}, b = {0};
    bpe_session s = {.t = t};
    s.merge = (tok_merge_state){.pair_key = bpe_pair_key, .ctx = &s};
    char *wbuf = NULL;
    size_t wcap = 0;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) rc = err_oom("tokenizer: out of memory for regex match data");
    if (rc == 0) rc = span_push(&a, 0, n);
    for (int i = 0; i < t->n_re && rc == 0; i++) {
        rc = split_words((const pcre2_code *)t->re[i], md, st, &a, &b);
        spanvec tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t k = 0; k < a.n && rc == 0; k++) {
        rc = array_reserve((void **)&wbuf, &wcap, 2 * a.v[k].len, 1); /* each byte: 1-2 bytes */
        if (rc) break;
        size_t wl = 0;
        for (size_t j = 0; j < a.v[k].len; j++) {
            uint8_t c = (uint8_t)nt[a.v[k].off + j];
            memcpy(wbuf + wl, t->byte_enc[c], t->byte_enc_len[c]);
            wl += t->byte_enc_len[c];
        }
        rc = bpe_word(&s, wbuf, wl, out);
    }
    pcre2_match_data_free(md);
    free(s.sym);
    free(s.key);
    tok_merge_free(&s.merge);
    free(wbuf);
    free(a.v);
    free(b.v);
    free(norm);
    free(subj);
    return rc;
}

/* Token text back to bytes: each GPT-2 character to its byte; a character
 * outside the map is kept as it is. */
int bpe_decode_text(const tokenizer *t, const char *text, size_t len, char *buf, int cap) {
    int w = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int l = decode_lax((const unsigned char *)text + i, len - i, &cp);
        if (l > 0 && cp < 324 && t->byte_dec[cp] >= 0) {
            if (w < cap) buf[w] = (char)t->byte_dec[cp];
            w++;
        } else {
            if (l == 0) l = 1;
            for (int j = 0; j < l; j++, w++)
                if (w < cap) buf[w] = text[i + j];
        }
        i += (size_t)l;
    }
    return w;
}
