/* Chat-template lexer: template source -> tokens, following jinja2's lexer
 * as Hugging Face configures it (trim_blocks, lstrip_blocks, no
 * keep_trailing_newline).
 *
 * Outside tags the text becomes T_DATA. Before a tag, `{%-`/`{{-`/`{#-` strip
 * all whitespace; otherwise lstrip_blocks removes the whitespace between a
 * line start and a block or comment tag (not `{{`) unless the tag says `+`.
 * After a tag, `-%}` strips all following whitespace and a plain `%}` or `#}`
 * eats one newline (trim_blocks). `{% raw %}` passes text through. Inside
 * tags: names, strings (Python escapes), integers, floats and operators; an
 * end delimiter only counts when brackets are balanced, as in jinja2. */
#include "chat/template_internal.h"

#include "util/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const tpl_op_text[OP_COUNT] = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";",
};

typedef struct {
    tpl_arena *ar;
    const char *s;
    size_t n, pos;
    size_t line_pos; /* lines are counted up to here */
    int line;
    token *t;
    size_t nt, cap;
    bool line_starting;
    char balance[TPL_MAX_DEPTH];
    int nbalance;
} lexer;

static int line_at(lexer *L, size_t pos) {
    for (; L->line_pos < pos && L->line_pos < L->n; L->line_pos++)
        if (L->s[L->line_pos] == '\n') L->line++;
    return L->line;
}

static int lex_error(lexer *L, size_t pos, const char *what) {
    return err_set("chat template line %d: %s", line_at(L, pos), what);
}

static token *emit(lexer *L, int kind, size_t pos) {
    token *t = tpl_ar_grow(L->ar, L->t, &L->cap, L->nt + 1, sizeof *t);
    if (!t) return NULL;
    L->t = t;
    token *k = &L->t[L->nt++];
    memset(k, 0, sizeof *k);
    k->kind = (uint8_t)kind;
    k->line = line_at(L, pos);
    return k;
}

/* Length of Python whitespace (\s) starting at p. */
static size_t space_run(const char *s, size_t n, size_t p) {
    size_t q = p;
    while (q < n) {
        size_t k = q;
        uint32_t cp = tpl_utf8_next(s, n, &k);
        if (!tpl_py_isspace(cp)) break;
        q = k;
    }
    return q - p;
}

/* Text with trailing Python whitespace removed. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80)
            start--;
        size_t k = start;
        if (!tpl_py_isspace(tpl_utf8_next(s, end, &k))) break;
        end = start;
    }
    return end;
}

/* Emits the text before a tag after applying the tag's whitespace control. */
static int emit_text(lexer *L, size_t start, size_t end, char sign, bool variable) {
    const char *text = L->s + start;
    size_t len = end - start;
    if (sign == '-') {
        len = rstrip_len(text, len);
    } else if (sign != '+' && !variable) {
        size_t l_pos = 0;
        for (size_t i = len; i > 0; i--)
            if (text[i - 1] == '\n') {
                l_pos = i;
                break;
            }
        /* jinja2 3.1 strips when the rest of the line is Python whitespace (\s) */
        if ((l_pos > 0 || L->line_starting) && space_run(text, len, l_pos) == len - l_pos)
            len = l_pos;
    }
    if (len == 0) return 0;
    token *t = emit(L, T_DATA, start);
    if (!t) return -1;
    t->s = (tstr){text, len};
    return 0;
}

/* Matches "{%[-+]?\s*WORD\s*" at p; returns the position after it, or 0. */
static size_t match_tag_word(const lexer *L, size_t p, const char *word, char *sign) {
    if (p + 2 > L->n || L->s[p] != '{' || L->s[p + 1] != '%') return 0;
    p += 2;
    *sign = 0;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) *sign = L->s[p++];
    p += space_run(L->s, L->n, p);
    size_t w = strlen(word);
    if (p + w > L->n || memcmp(L->s + p, word, w) != 0) return 0;
    p += w;
    return p + space_run(L->s, L->n, p);
}

/* After a block or comment: `+X}` keeps what follows, `-X}` strips whitespace,
 * `X}` eats one newline. Returns the end of the match; sets line_starting. */
static size_t finish_tag(lexer *L, size_t p, char sign, bool trim_newline) {
    /* p points just after the closing delimiter. */
    if (sign == '-')
        p += space_run(L->s, L->n, p);
    else if (sign != '+' && trim_newline && p < L->n && L->s[p] == '\n')
        p++;
    L->line_starting = p > 0 && L->s[p - 1] == '\n';
    return p;
}

static int lex_comment(lexer *L, size_t body) {
    for (size_t q = body; q + 1 < L->n; q++) {
        if (L->s[q] != '#' || L->s[q + 1] != '}') continue;
        char sign = 0;
        if (q > body && (L->s[q - 1] == '-' || L->s[q - 1] == '+')) sign = L->s[q - 1];
        L->pos = finish_tag(L, q + 2, sign, true);
        return 0;
    }
    return lex_error(L, body, "missing end of comment tag");
}

static int lex_raw(lexer *L, size_t body) {
    for (size_t q = body; q + 1 < L->n; q++) {
        char sign;
        size_t p = match_tag_word(L, q, "endraw", &sign);
        if (!p) continue;
        char end_sign = 0;
        if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) end_sign = L->s[p++];
        if (p + 2 > L->n || L->s[p] != '%' || L->s[p + 1] != '}') continue;
        if (emit_text(L, body, q, sign, false)) return -1;
        L->pos = finish_tag(L, p + 2, end_sign, true);
        return 0;
    }
    return lex_error(L, body, "missing end of raw directive");
}

/* (\d+_)*\d+ at p: returns its length (0 when none). */
static size_t digits_run(const char *s, size_t n, size_t p) {
    size_t q = p;
    if (q >= n || s[q] < '0' || s[q] > '9') return 0;
    while (q < n && s[q] >= '0' && s[q] <= '9') {
        q++;
        if (q + 1 < n && s[q] == '_' && s[q + 1] >= '0' && s[q + 1] <= '9') q++;
    }
    return q - p;
}

static size_t copy_digits(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        if (s[i] != '_') out[k++] = s[i];
    out[k] = 0;
    return k;
}

/* Jinja2's float rule; returns the length matched (0: not a float). */
static size_t match_float(const lexer *L, size_t p) {
    const char *s = L->s;
    size_t n = L->n;
    if (p > 0 && s[p - 1] == '.') return 0;
    size_t d = digits_run(s, n, p);
    if (!d) return 0;
    size_t q = p + d;
    /* (\.D)?[eE][+-]?D */
    size_t frac = 0;
    if (q < n && s[q] == '.') {
        size_t f = digits_run(s, n, q + 1);
        if (f) frac = 1 + f;
    }
    for (int with_frac = frac ? 1 : 0; with_frac >= 0; with_frac--) {
        size_t e = q + (with_frac ? frac : 0);
        if (e < n && (s[e] == 'e' || s[e] == 'E')) {
            size_t x = e + 1;
            if (x < n && (s[x] == '+' || s[x] == '-')) x++;
            size_t xd = digits_run(s, n, x);
            if (xd) return x + xd - p;
        }
    }
    return frac ? q + frac - p : 0;
}

/* Jinja2's integer rule; returns the length matched and the value. */
static int match_int(lexer *L, size_t p, size_t *len, int64_t *value) {
    const char *s = L->s;
    size_t n = L->n;
    *len = 0;
    if (p >= n || s[p] < '0' || s[p] > '9') return 0;
    int base = 10;
    size_t q = p, digits_at = p;
    if (s[p] == '0' && p + 1 < n && s[p + 1] && strchr("bBoOxX", s[p + 1])) {
        char c = (char)(s[p + 1] | 0x20);
        base = c == 'b' ? 2 : c == 'o' ? 8 : 16;
        size_t r = p + 2;
        for (;;) {
            size_t t = r;
            if (t < n && s[t] == '_') t++;
            if (t >= n) break;
            int v = -1;
            char ch = s[t];
            if (ch >= '0' && ch <= '9')
                v = ch - '0';
            else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
                v = (ch | 0x20) - 'a' + 10;
            if (v < 0 || v >= base) break;
            r = t + 1;
        }
        if (r > p + 2) {
            q = r;
            digits_at = p + 2;
        } else {
            base = 10;
        }
    }
    if (base == 10) {
        if (s[p] == '0') {
            q = p + 1;
            while (q < n && (s[q] == '0' || (s[q] == '_' && q + 1 < n && s[q + 1] == '0')))
                q += s[q] == '_' ? 2 : 1;
        } else {
            q = p + digits_run(s, n, p);
        }
    }
    char buf[96];
    if (q - digits_at >= sizeof buf - 1) return lex_error(L, p, "integer literal too large");
    copy_digits(s + digits_at, q - digits_at, buf, sizeof buf);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, base);
    if (errno || v > INT64_MAX) return lex_error(L, p, "integer literal too large");
    *len = q - p;
    *value = (int64_t)v;
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Python's unicode-escape decoding of a string literal's body. */
static int unescape(lexer *L, size_t at, const char *s, size_t n, tstr *out) {
    sbuf b;
    tpl_sb_init(&b, L->ar, TPL_PARSE_BUDGET);
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] != '\\')
            run++;
        if (tpl_sb_put(&b, s + i, run - i)) return -1;
        i = run;
        if (i >= n) break;
        i++; /* the backslash; the lexer guarantees a character follows */
        char c = s[i++];
        uint32_t cp = 0;
        int want = 0;
        switch (c) {
        case '\n':
            continue;
        case '\\':
            cp = '\\';
            break;
        case '\'':
            cp = '\'';
            break;
        case '"':
            cp = '"';
            break;
        case 'a':
            cp = 7;
            break;
        case 'b':
            cp = 8;
            break;
        case 'f':
            cp = 12;
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'v':
            cp = 11;
            break;
        case 'x':
            want = 2;
            break;
        case 'u':
            want = 4;
            break;
        case 'U':
            want = 8;
            break;
        case 'N':
            return lex_error(L, at, "\\N{...} escapes are not supported");
        default:
            if (c >= '0' && c <= '7') {
                cp = (uint32_t)(c - '0');
                for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[i++] - '0');
            } else if ((unsigned char)c >= 0x80) {
                /* jinja2 escapes non-ASCII as \xNN/\uNNNN before decoding, so a
                 * backslash before one leaves the backslash and that spelling. */
                size_t k = i - 1;
                uint32_t u = tpl_utf8_next(s, n, &k);
                i = k;
                if (tpl_sb_putc(&b, '\\')) return -1;
                if (u < 0x100     ? tpl_sb_printf(&b, "x%02x", u)
                    : u < 0x10000 ? tpl_sb_printf(&b, "u%04x", u)
                                  : tpl_sb_printf(&b, "U%08x", u))
                    return -1;
                continue;
            } else {
                if (tpl_sb_putc(&b, '\\') || tpl_sb_putc(&b, c)) return -1;
                continue;
            }
        }
        if (want) {
            for (int k = 0; k < want; k++) {
                int h = i < n ? hexval(s[i]) : -1;
                if (h < 0) return lex_error(L, at, "truncated \\x, \\u or \\U escape in a string");
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
            if (cp > 0x10FFFF) return lex_error(L, at, "illegal Unicode character in a string");
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return lex_error(L, at, "surrogate escape in a string is not supported");
        }
        if (tpl_sb_put_cp(&b, cp)) return -1;
    }
    *out = tpl_sb_str(&b);
    return 0;
}

static int lex_string(lexer *L, size_t p, size_t *len) {
    char q = L->s[p];
    size_t i = p + 1;
    while (i < L->n && L->s[i] != q) {
        if (L->s[i] == '\\') {
            if (i + 1 >= L->n) break;
            i++;
            /* step over the escaped character (it may be multi-byte) */
            size_t k = i;
            tpl_utf8_next(L->s, L->n, &k);
            i = k;
            continue;
        }
        i++;
    }
    if (i >= L->n) return lex_error(L, p, "unterminated string");
    token *t = emit(L, T_STRING, p);
    if (!t) return -1;
    if (unescape(L, p, L->s + p + 1, i - p - 1, &t->s)) return -1;
    *len = i + 1 - p;
    return 0;
}

static int lex_operator(lexer *L, size_t p, size_t *len) {
    for (int op = 0; op < OP_COUNT; op++) {
        size_t k = strlen(tpl_op_text[op]);
        if (p + k > L->n || memcmp(L->s + p, tpl_op_text[op], k) != 0) continue;
        const char *open = "([{", *close = ")]}";
        char c = tpl_op_text[op][0];
        if (k == 1 && strchr(open, c)) {
            if (L->nbalance >= TPL_MAX_DEPTH) return lex_error(L, p, "brackets nested too deeply");
            L->balance[L->nbalance++] = close[strchr(open, c) - open];
        } else if (k == 1 && strchr(close, c)) {
            if (L->nbalance == 0) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected '%c'", c);
                return lex_error(L, p, msg);
            }
            char want = L->balance[--L->nbalance];
            if (want != c) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", c, want);
                return lex_error(L, p, msg);
            }
        }
        token *t = emit(L, T_OP, p);
        if (!t) return -1;
        t->op = (uint8_t)op;
        *len = k;
        return 0;
    }
    char msg[64];
    unsigned char c = (unsigned char)L->s[p];
    if (c >= 0x20 && c < 0x7F)
        snprintf(msg, sizeof msg, "unexpected character '%c'", c);
    else
        snprintf(msg, sizeof msg, "unexpected character (byte 0x%02x)", c);
    return lex_error(L, p, msg);
}

/* Lexes the inside of {{ }} or {% %} from L->pos up to and including its end. */
static int lex_tag(lexer *L, bool block) {
    L->nbalance = 0;
    for (;;) {
        size_t p = L->pos;
        const char *s = L->s;
        if (p >= L->n) return lex_error(L, p, "unexpected end of template inside a tag");
        if (L->nbalance == 0) {
            char end = block ? '%' : '}';
            char sign = 0;
            size_t q = p;
            if (s[q] == '-' || (block && s[q] == '+')) sign = s[q++];
            if (q + 1 < L->n && s[q] == end && s[q + 1] == '}') {
                token *t = emit(L, block ? T_BLOCK_END : T_VAR_END, p);
                if (!t) return -1;
                L->pos = finish_tag(L, q + 2, sign, block);
                return 0;
            }
        }
        size_t ws = space_run(s, L->n, p);
        if (ws) {
            L->pos += ws;
            continue;
        }
        size_t len = match_float(L, p);
        if (len) {
            char buf[128];
            if (len >= sizeof buf) return lex_error(L, p, "float literal too long");
            copy_digits(s + p, len, buf, sizeof buf);
            token *t = emit(L, T_FLOAT, p);
            if (!t) return -1;
            t->f = strtod(buf, NULL);
            L->pos += len;
            continue;
        }
        int64_t iv;
        if (match_int(L, p, &len, &iv)) return -1;
        if (len) {
            token *t = emit(L, T_INT, p);
            if (!t) return -1;
            t->i = iv;
            L->pos += len;
            continue;
        }
        char c = s[p];
        if (c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) {
            size_t q = p + 1;
            while (q < L->n && (s[q] == '_' || (s[q] >= '0' && s[q] <= '9') ||
                                ((s[q] | 0x20) >= 'a' && (s[q] | 0x20) <= 'z')))
                q++;
            token *t = emit(L, T_NAME, p);
            if (!t) return -1;
            t->s = (tstr){s + p, q - p};
            L->pos = q;
            continue;
        }
        if (c == '\'' || c == '"') {
            if (lex_string(L, p, &len)) return -1;
            L->pos += len;
            continue;
        }
        if (lex_operator(L, p, &len)) return -1;
        L->pos += len;
    }
}

/* Newlines become "\n" and one trailing newline goes, as jinja2 does. */
static char *normalize(tpl_arena *a, const char *src, size_t n, size_t *out_n) {
    char *d = tpl_ar_alloc(a, n + 1);
    if (!d) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            d[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            d[k++] = src[i];
        }
    }
    if (k > 0 && d[k - 1] == '\n') k--;
    d[k] = 0;
    *out_n = k;
    return d;
}

int tpl_lex(tpl_arena *a, const char *src, size_t n, token **out, size_t *nout) {
    lexer L = {0};
    L.ar = a;
    L.line = 1;
    L.line_starting = true;
    if (!utf8_valid(src, n)) return err_set("chat template: not valid UTF-8");
    L.s = normalize(a, src, n, &L.n);
    if (!L.s) return -1;
    while (L.pos < L.n) {
        size_t q = L.pos;
        const char *s = L.s;
        while (q + 1 < L.n &&
               !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')))
            q++;
        if (q + 1 >= L.n) {
            token *t = emit(&L, T_DATA, L.pos);
            if (!t) return -1;
            t->s = (tstr){s + L.pos, L.n - L.pos};
            break;
        }
        char kind = s[q + 1];
        char sign = 0;
        if (q + 2 < L.n && (s[q + 2] == '-' || s[q + 2] == '+')) sign = s[q + 2];
        size_t body = q + 2 + (sign ? 1 : 0);
        if (kind == '%') {
            char raw_sign;
            size_t p = match_tag_word(&L, q, "raw", &raw_sign);
            if (p) {
                /* (?:-%}\s*|%}): no trim_blocks newline after {% raw %} */
                bool ok = false;
                if (p + 2 < L.n && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}') {
                    p += 3;
                    p += space_run(s, L.n, p);
                    ok = true;
                } else if (p + 1 < L.n && s[p] == '%' && s[p + 1] == '}') {
                    p += 2;
                    ok = true;
                }
                if (ok) {
                    if (emit_text(&L, L.pos, q, raw_sign, false)) return -1;
                    L.line_starting = s[p - 1] == '\n';
                    if (lex_raw(&L, p)) return -1;
                    continue;
                }
            }
        }
        if (emit_text(&L, L.pos, q, sign, kind == '{')) return -1;
        L.line_starting = false;
        if (kind == '#') {
            if (lex_comment(&L, body)) return -1;
            continue;
        }
        token *t = emit(&L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, q);
        if (!t) return -1;
        L.pos = body;
        if (lex_tag(&L, kind == '%')) return -1;
    }
    token *t = emit(&L, T_EOF, L.n);
    if (!t) return -1;
    *out = L.t;
    *nout = L.nt;
    return 0;
}
