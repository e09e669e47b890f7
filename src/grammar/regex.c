/* Regular expressions (vLLM's guided_regex, JSON Schema `pattern`) compiled
 * into a grammar rule. The practical subset that constrained decoding needs:
 * literals, `.`, classes [a-z] [^...] with escapes, \d \w \s \D \W \S and \p{Cc} \P{Cc} (inside
 * classes too),
 * groups ( ) (?: ), alternation |, and ? * + {m} {m,} {m,n} (lazy `?`
 * suffixes accepted: the language is the same). The whole output must match
 * (anchored); a leading ^ and trailing $ are accepted. Backreferences and
 * lookaround are refused with the position. */
#include "grammar/regex.h"

#include "util/error.h"
#include "util/utf8.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text, *p;
    grammar_builder *b;
    uint32_t *ranges; /* a class being read */
    int n, cap;
} rx_parser;

static int rx_fail(rx_parser *ps, const char *where, const char *msg) {
    return err_set("regex: %s at position %d", msg, (int)(where - ps->text));
}

static int add_range(rx_parser *ps, uint32_t lo, uint32_t hi) {
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 16;
        uint32_t *r = realloc(ps->ranges, (size_t)ps->cap * 2 * sizeof *r);
        if (!r) return err_oom("regex: out of memory");
        ps->ranges = r;
    }
    ps->ranges[2 * ps->n] = lo, ps->ranges[2 * ps->n + 1] = hi, ps->n++;
    return 0;
}

/* The class escapes: \d \w \s, their negations \D \W \S, and the Unicode
 * property \p{Cc} (control characters) with its negation \P{Cc}. Reads one
 * after the backslash: its code point ranges (sorted, n pairs) and whether
 * it is negated. 1 when what follows is no class escape (nothing read). */
static int read_class_escape(rx_parser *ps, const uint32_t **in, int *n, bool *negated) {
    static const uint32_t d[] = {'0', '9'}, w[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'},
                          sp[] = {'\t', '\r', ' ', ' '}, cc[] = {0, 0x1f, 0x7f, 0x9f};
    const char c = *ps->p;
    *negated = isupper((unsigned char)c);
    switch (tolower((unsigned char)c)) {
    case 'd':
        *in = d, *n = 1;
        break;
    case 'w':
        *in = w, *n = 4;
        break;
    case 's':
        *in = sp, *n = 2;
        break;
    case 'p':
        if (ps->p[1] != '{') return rx_fail(ps, ps->p - 1, "expected {Name} after \\p");
        if (strncmp(ps->p + 2, "Cc}", 3))
            return rx_fail(ps, ps->p - 1, "unsupported Unicode property (only \\p{Cc})");
        *in = cc, *n = 2;
        ps->p += 4;
        break;
    default:
        return 1;
    }
    ps->p++;
    return 0;
}

static bool is_class_escape(char c) {
    return c && strchr("dwsDWSpP", c);
}

/* Every code point outside the sorted ranges in[0..n) (no surrogates),
 * added to the class. */
static int add_complement(rx_parser *ps, const uint32_t *in, int n) {
    uint32_t from = 0;
    for (int i = 0; i <= n; i++) {
        const uint32_t to = i < n ? in[2 * i] : 0x110000; /* the gap [from, to) */
        if (to > from) {
            if (from < 0xD800 && to > 0xE000) {
                if (add_range(ps, from, 0xD7FF) || add_range(ps, 0xE000, to - 1)) return -1;
            } else if (add_range(ps, from, to - 1)) {
                return -1;
            }
        }
        if (i < n) from = in[2 * i + 1] + 1;
    }
    return 0;
}

/* A class escape inside [...]: its ranges, or their complement. */
static int add_class_escape(rx_parser *ps) {
    const uint32_t *in;
    int n;
    bool neg;
    const int rc = read_class_escape(ps, &in, &n, &neg);
    if (rc) return rc < 0 ? -1 : rx_fail(ps, ps->p, "expected a class escape");
    if (neg) return add_complement(ps, in, n);
    for (int i = 0; i < n; i++)
        if (add_range(ps, in[2 * i], in[2 * i + 1])) return -1;
    return 0;
}

/* A single escaped character (after the backslash); -1 when unknown. */
static int escape_char(rx_parser *ps, uint32_t *out) {
    const char *at = ps->p;
    const char c = *ps->p++;
    switch (c) {
    case 'n': *out = '\n'; return 0;
    case 'r': *out = '\r'; return 0;
    case 't': *out = '\t'; return 0;
    case 'f': *out = '\f'; return 0;
    case 'v': *out = '\v'; return 0;
    case '0': *out = 0; return 0;
    case 'x': case 'u': {
        const int nd = c == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            const char h = *ps->p;
            const int d = isdigit((unsigned char)h) ? h - '0' : isxdigit((unsigned char)h) ? tolower(h) - 'a' + 10 : -1;
            if (d < 0) return rx_fail(ps, ps->p, "expected a hex digit");
            v = v * 16 + (uint32_t)d, ps->p++;
        }
        *out = v;
        return 0;
    }
    default:
        if (c && !isalnum((unsigned char)c)) {
            *out = (unsigned char)c;
            return 0;
        }
        if (isdigit((unsigned char)c)) return rx_fail(ps, at - 1, "backreferences are not supported");
        return rx_fail(ps, at - 1, "unsupported escape");
    }
}

static int read_literal_char(rx_parser *ps, uint32_t *out) {
    const int n = utf8_decode(ps->p, strlen(ps->p), out);
    if (n <= 0) return rx_fail(ps, ps->p, "invalid UTF-8");
    ps->p += n;
    return 0;
}

/* A literal character; inside a JSON string the ones JSON escapes are
 * written escaped. */
static int push_char(rx_parser *ps, uint32_t cp) {
    char buf[8];
    int n;
    if (gb_json_string_mode(ps->b) && (cp == '"' || cp == '\\')) buf[0] = '\\', buf[1] = (char)cp, n = 2;
    else if (gb_json_string_mode(ps->b) && cp < 0x20) n = snprintf(buf, sizeof buf, "\\u%04x", (unsigned)cp);
    else n = utf8_encode(buf, cp);
    return gb_push_literal(ps->b, buf, (size_t)n);
}

static int push_ranges(rx_parser *ps, bool negated) {
    const int rc = gb_push_codepoints(ps->b, ps->ranges, ps->n, negated);
    ps->n = 0;
    return rc;
}

static int parse_class(rx_parser *ps) {
    const char *start = ps->p++;
    const bool negated = *ps->p == '^';
    if (negated) ps->p++;
    ps->n = 0;
    bool first = true;
    while (*ps->p != ']' || first) {
        first = false;
        if (!*ps->p) return rx_fail(ps, start, "unterminated character class");
        uint32_t lo;
        if (*ps->p == '\\') {
            ps->p++;
            if (is_class_escape(*ps->p)) {
                if (add_class_escape(ps)) return -1;
                continue;
            }
            if (*ps->p == 'b') lo = '\b', ps->p++;
            else if (escape_char(ps, &lo)) return -1;
        } else if (ps->p[0] == '[' && ps->p[1] == ':') {
            return rx_fail(ps, ps->p, "POSIX classes [:name:] are not supported");
        } else if (read_literal_char(ps, &lo)) {
            return -1;
        }
        uint32_t hi = lo;
        if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
            const char *dash = ps->p++;
            if (*ps->p == '\\') {
                ps->p++;
                if (is_class_escape(*ps->p)) return rx_fail(ps, dash, "a range cannot end in a class escape");
                if (escape_char(ps, &hi)) return -1;
            } else if (read_literal_char(ps, &hi)) {
                return -1;
            }
            if (hi < lo) return rx_fail(ps, dash, "character range out of order");
        }
        if (add_range(ps, lo, hi)) return -1;
    }
    ps->p++;
    return push_ranges(ps, negated);
}

static int parse_alt(rx_parser *ps, int rule, int depth);

static int parse_count(rx_parser *ps, int *out) {
    long v = 0;
    if (!isdigit((unsigned char)*ps->p)) return rx_fail(ps, ps->p, "expected a number in {m,n}");
    while (isdigit((unsigned char)*ps->p)) {
        v = v * 10 + (*ps->p++ - '0');
        if (v > 10000) return rx_fail(ps, ps->p, "repetition count too large");
    }
    *out = (int)v;
    return 0;
}

static int parse_quantifier(rx_parser *ps, size_t mark, bool have_atom) {
    const char *at = ps->p;
    int min, max;
    switch (*ps->p) {
    case '*': min = 0, max = -1, ps->p++; break;
    case '+': min = 1, max = -1, ps->p++; break;
    case '?': min = 0, max = 1, ps->p++; break;
    case '{': {
        const char *save = ps->p++;
        if (!isdigit((unsigned char)*ps->p)) { /* a literal '{' as in many engines */
            ps->p = save;
            return 0;
        }
        if (parse_count(ps, &min)) return -1;
        max = min;
        if (*ps->p == ',') {
            ps->p++;
            max = -1;
            if (*ps->p != '}' && parse_count(ps, &max)) return -1;
        }
        if (*ps->p != '}') return rx_fail(ps, ps->p, "expected '}'");
        ps->p++;
        if (max >= 0 && max < min) return rx_fail(ps, at, "repetition {m,n} with n < m");
        break;
    }
    default: return 0;
    }
    if (!have_atom) return rx_fail(ps, at, "nothing to repeat");
    if (*ps->p == '?' || *ps->p == '+') ps->p++; /* lazy or possessive: same language */
    if (*ps->p == '*' || *ps->p == '+' || *ps->p == '?') return rx_fail(ps, ps->p, "multiple repeat");
    if (gb_repeat_since(ps->b, mark, min, max)) {
        char why[256]; /* err_get's buffer is rewritten by rx_fail */
        snprintf(why, sizeof why, "%s", err_get());
        return rx_fail(ps, at, why);
    }
    return 0;
}

static int parse_seq(rx_parser *ps, int depth) {
    for (;;) {
        const char c = *ps->p;
        if (!c || c == '|' || c == ')') return 0;
        const size_t mark = gb_mark(ps->b);
        const char *at = ps->p;
        bool atom = true;
        if (c == '(') {
            ps->p++;
            if (ps->p[0] == '?') {
                if (ps->p[1] == ':') ps->p += 2;
                else if (ps->p[1] == '<' && ps->p[2] != '=' && ps->p[2] != '!') {
                    const char *end = strchr(ps->p, '>'); /* a named group: the name does not matter */
                    if (!end) return rx_fail(ps, at, "unterminated group name");
                    ps->p = end + 1;
                } else return rx_fail(ps, at, "lookaround and inline flags are not supported");
            }
            if (depth > 200) return rx_fail(ps, at, "groups nested too deeply");
            const int sub = gb_fresh_rule(ps->b);
            if (sub < 0 || parse_alt(ps, sub, depth + 1)) return -1;
            if (*ps->p != ')') return rx_fail(ps, at, "unclosed '('");
            ps->p++;
            if (gb_push_rule(ps->b, sub)) return -1;
        } else if (c == '[') {
            if (parse_class(ps)) return -1;
        } else if (c == '.') {
            ps->p++;
            const uint32_t nl[2] = {'\n', '\n'};
            if (gb_push_codepoints(ps->b, nl, 1, true)) return -1;
        } else if (c == '^' && at == ps->text) {
            ps->p++, atom = false;
        } else if (c == '$' && ps->p[1] == 0) {
            ps->p++, atom = false;
        } else if (c == '^' || c == '$') {
            return rx_fail(ps, at, "anchors are supported only at the start and end");
        } else if (c == '*' || c == '+' || c == '?') {
            return rx_fail(ps, at, "nothing to repeat");
        } else if (c == '\\') {
            ps->p++;
            if (is_class_escape(*ps->p)) {
                const uint32_t *in;
                int n;
                bool neg;
                if (read_class_escape(ps, &in, &n, &neg)) return -1;
                ps->n = 0;
                for (int i = 0; i < n; i++)
                    if (add_range(ps, in[2 * i], in[2 * i + 1])) return -1;
                if (push_ranges(ps, neg)) return -1;
            } else if (*ps->p == 'b' || *ps->p == 'B' || *ps->p == 'A' || *ps->p == 'Z' ||
                       *ps->p == 'z') {
                return rx_fail(ps, at, "word boundaries and \\A \\Z anchors are not supported");
            } else {
                uint32_t cp;
                if (escape_char(ps, &cp) || push_char(ps, cp)) return -1;
            }
        } else {
            uint32_t cp;
            if (read_literal_char(ps, &cp) || push_char(ps, cp)) return -1;
        }
        if (parse_quantifier(ps, mark, atom)) return -1;
    }
}

static int parse_alt(rx_parser *ps, int rule, int depth) {
    for (;;) {
        if (gb_alt_begin(ps->b, rule) || parse_seq(ps, depth) || gb_alt_end(ps->b)) return -1;
        if (*ps->p != '|') return 0;
        ps->p++;
    }
}

int regex_to_rule(grammar_builder *b, const char *pattern) {
    rx_parser ps = {.text = pattern, .p = pattern, .b = b};
    const int rule = gb_fresh_rule(b);
    int rc = rule < 0 || parse_alt(&ps, rule, 0);
    if (!rc && *ps.p == ')') rc = rx_fail(&ps, ps.p, "unbalanced ')'");
    free(ps.ranges);
    return rc ? -1 : rule;
}

grammar *grammar_from_regex(const char *pattern) {
    grammar_builder *b = gb_create();
    if (!b) {
        err_oom("regex: out of memory");
        return NULL;
    }
    const int rule = regex_to_rule(b, pattern);
    if (rule < 0) {
        gb_free(b);
        return NULL;
    }
    return gb_finish(b, rule);
}
