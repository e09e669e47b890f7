/* WordPiece (BERT) encoding, as Hugging Face `tokenizers` does it for a
 * tokenizer.json with a BertNormalizer, a BertPreTokenizer and a WordPiece
 * model:
 *
 *  1. normalize, character by character: clean_text drops NUL, U+FFFD and
 *     "other" characters (Cc, Cf, Cn, Co, Cs; tab, newline and CR excepted)
 *     and turns whitespace into a space; handle_chinese_chars puts spaces
 *     around CJK ideographs; strip_accents (by default when lowercasing)
 *     decomposes to NFD and drops nonspacing marks; lowercase maps each
 *     character as Rust's char::to_lowercase does;
 *  2. split into words at whitespace, and cut out every punctuation
 *     character (ASCII punctuation or Unicode P*) as a word of its own;
 *  3. each word, greedily from the left, into the longest vocabulary entry
 *     (continuations spelled with the "##" prefix; in a GGUF vocabulary,
 *     llama.cpp's converter marks a word's first piece with U+2581 instead
 *     and continuations not at all); a word with a piece that matches
 *     nothing, or longer than max_input_chars_per_word characters, becomes
 *     the unknown token as a whole. */
#include "tokenizer/tok_internal.h"

#include "util/error.h"
#include "util/unicode.h"
#include "util/utf8.h"

#include <string.h>

/* Rust's char::is_whitespace (the White_Space property). */
static bool is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

static bool is_control(uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    return unicode_is_other(c);
}

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_punct(uint32_t c) {
    const bool ascii = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return ascii || unicode_is_punct(c);
}

/* A growable code-point array. */
typedef struct {
    uint32_t *v;
    size_t n, cap;
} cpvec;

static int cp_push(cpvec *a, uint32_t cp) {
    if (a->n == a->cap) {
        const size_t cap = a->cap ? 2 * a->cap : 64;
        uint32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return err_oom("tokenizer: out of memory");
        a->v = v, a->cap = cap;
    }
    a->v[a->n++] = cp;
    return 0;
}

static int push_lowered(const tokenizer *t, cpvec *out, uint32_t cp) {
    if (!t->wp.lowercase) return cp_push(out, cp);
    uint32_t m[UNICODE_MAX_CASE_MAP];
    const int n = unicode_to_lower(cp, m);
    for (int i = 0; i < n; i++)
        if (cp_push(out, m[i])) return -1;
    return 0;
}

/* NFD of one character, nonspacing marks dropped, then lowercased. */
static int push_stripped(const tokenizer *t, cpvec *out, uint32_t cp) {
    uint32_t d[UNICODE_MAX_DECOMPOSITION];
    const int n = unicode_nfd(cp, d);
    for (int i = 0; i < n; i++)
        if (!unicode_is_nonspacing_mark(d[i]) && push_lowered(t, out, d[i])) return -1;
    return 0;
}

static int normalize(const tokenizer *t, const char *text, size_t len, cpvec *out) {
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0xFFFD;
        const int n = utf8_decode(text + i, len - i, &cp);
        i += n > 0 ? (size_t)n : 1;
        if (t->wp.clean_text) {
            if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
            if (is_whitespace(cp)) cp = ' ';
        }
        const bool pad = t->wp.chinese_chars && is_chinese(cp);
        if (pad && cp_push(out, ' ')) return -1;
        if (t->wp.strip_accents ? push_stripped(t, out, cp) : push_lowered(t, out, cp)) return -1;
        if (pad && cp_push(out, ' ')) return -1;
    }
    return 0;
}

/* One word (code points w[0..n)) into vocabulary pieces, or the unknown
 * token. buf has room for the word's UTF-8, piece for that and a prefix. */
static int encode_word(const tokenizer *t, const uint32_t *w, size_t n, char *buf, char *piece, size_t *offs,
                       tokvec *out) {
    if (n > (size_t)t->wp.max_chars) return tokvec_push(out, t->unk);
    size_t bytes = 0; /* offs[i]: where character i starts in buf */
    for (size_t i = 0; i < n; i++) {
        offs[i] = bytes;
        bytes += (size_t)utf8_encode(buf + bytes, w[i]);
    }
    offs[n] = bytes;
    const size_t first = out->n;
    for (size_t start = 0; start < n;) {
        const char *prefix = start ? t->wp.prefix : t->wp.first;
        const size_t plen = strlen(prefix);
        memcpy(piece, prefix, plen);
        int32_t id = -1;
        size_t end = n;
        /* A continuation spelled with the word-start mark would read as a word's
         * first piece in a GGUF vocabulary; tokenizer.json has none. */
        const size_t flen = strlen(t->wp.first);
        if (start && flen && offs[n] - offs[start] >= flen && !memcmp(buf + offs[start], t->wp.first, flen)) end = start;
        for (; end > start && id < 0; end--) {
            const size_t len = offs[end] - offs[start];
            memcpy(piece + plen, buf + offs[start], len);
            id = strtab_find(&t->vocab, piece, plen + len);
        }
        if (id < 0) {
            out->n = first;
            return tokvec_push(out, t->unk);
        }
        if (tokvec_push(out, id)) return -1;
        start = end + 1;
    }
    return 0;
}

int wordpiece_encode(const tokenizer *t, const char *text, size_t len, tokvec *out) {
    cpvec cps = {0};
    int rc = normalize(t, text, len, &cps);
    /* The longest word is every character: room for its UTF-8 and the prefix. */
    char *buf = rc ? NULL : malloc(cps.n * 4 + 1);
    char *piece = rc ? NULL : malloc(cps.n * 4 + sizeof t->wp.prefix + sizeof t->wp.first);
    size_t *offs = rc ? NULL : malloc((cps.n + 1) * sizeof *offs);
    if (!rc && (!buf || !piece || !offs)) rc = err_oom("tokenizer: out of memory");
    size_t word = 0; /* start of the word being collected */
    for (size_t i = 0; i <= cps.n && rc == 0; i++) {
        const uint32_t c = i < cps.n ? cps.v[i] : ' ';
        const bool space = is_whitespace(c), punct = !space && is_punct(c);
        if (!space && !punct) continue;
        if (i > word) rc = encode_word(t, cps.v + word, i - word, buf, piece, offs, out);
        if (rc == 0 && punct) rc = encode_word(t, cps.v + i, 1, buf, piece, offs, out);
        word = i + 1;
    }
    free(offs);
    free(piece);
    free(buf);
    free(cps.v);
    return rc;
}

int wordpiece_piece(const tokenizer *t, const char *s, size_t n, char *buf, int cap) {
    /* The WordPiece decoder: a word's first piece after a space, a
     * continuation glued on, each without its marking prefix. */
    const size_t flen = strlen(t->wp.first), plen = strlen(t->wp.prefix);
    bool starts_word;
    size_t skip = 0;
    if (flen) {
        starts_word = n >= flen && !memcmp(s, t->wp.first, flen);
        skip = starts_word ? flen : 0;
    } else {
        starts_word = !(plen && n >= plen && !memcmp(s, t->wp.prefix, plen));
        skip = starts_word ? 0 : plen;
    }
    if (n - skip + 1 > INT32_MAX) return -1;
    int w = 0;
    if (starts_word && w++ < cap) buf[0] = ' ';
    for (size_t i = skip; i < n; i++, w++)
        if (w < cap) buf[w] = s[i];
    return w;
}
