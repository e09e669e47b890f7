/* GBNF, llama.cpp's grammar language (the `grammar` field of llama-server,
 * vLLM's `guided_grammar`), parsed into a grammar_builder:
 *
 *   root  ::= "{" ws pair ("," ws pair)* "}"    # comments run to line end
 *   pair  ::= [a-z]+ ":" ws ( "1" | "2" )? [^"\\\x00-\x1f]{2,5} .
 *
 * Literals and classes are over code points (escapes \n \r \t \\ \" \[ \]
 * \xHH \uHHHH \UHHHHHHHH); `.` is any character; repetition * + ? {m}
 * {m,} {m,n}. A rule ends at the end of its line unless inside parentheses
 * or after `|`. Errors name the line and column. */
#include "grammar/grammar.h"

#include "util/error.h"
#include "util/utf8.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text, *p;
    grammar_builder *b;
    int depth; /* of parentheses */
} gbnf_parser;

static int fail_at(gbnf_parser *ps, const char *where, const char *msg) {
    int line = 1, col = 1;
    for (const char *c = ps->text; c < where && *c; c++) {
        if (*c == '\n') line++, col = 1;
        else col++;
    }
    return err_set("grammar: line %d column %d: %s", line, col, msg);
}

static void skip_space(gbnf_parser *ps, bool newline_ok) {
    for (;;) {
        const char c = *ps->p;
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) ps->p++;
        else if (c == '#') {
            while (*ps->p && *ps->p != '\n') ps->p++;
        } else return;
    }
}

static bool is_name_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

static int hex_digits(gbnf_parser *ps, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        const char c = ps->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail_at(ps, ps->p + i, "expected a hex digit");
        v = v * 16 + (uint32_t)d;
    }
    ps->p += n;
    *out = v;
    return 0;
}

/* One character of a literal or class: an escape or a UTF-8 code point. */
static int read_char(gbnf_parser *ps, uint32_t *out) {
    const char *at = ps->p;
    if (*at == '\\') {
        ps->p += 2;
        switch (at[1]) {
        case 'n': *out = '\n'; return 0;
        case 'r': *out = '\r'; return 0;
        case 't': *out = '\t'; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *out = (unsigned char)at[1]; return 0;
        case 'x': return hex_digits(ps, 2, out);
        case 'u': return hex_digits(ps, 4, out);
        case 'U': return hex_digits(ps, 8, out);
        default: return fail_at(ps, at, "unknown escape");
        }
    }
    const int n = utf8_decode(at, strlen(at), out);
    if (n <= 0) return fail_at(ps, at, "invalid UTF-8");
    ps->p += n;
    return 0;
}

static int push_codepoint(grammar_builder *b, uint32_t c) {
    if (c > 0x10FFFF) return err_set("grammar: code point U+%X is out of range", c);
    const uint32_t r[2] = {c, c};
    return gb_push_codepoints(b, r, 1, false);
}

static int parse_alternates(gbnf_parser *ps, int rule, bool nested);

static int parse_literal(gbnf_parser *ps) {
    const char *start = ps->p++;
    while (*ps->p != '"') {
        if (!*ps->p || *ps->p == '\n') return fail_at(ps, start, "unterminated string literal");
        uint32_t c;
        if (read_char(ps, &c) || push_codepoint(ps->b, c)) return -1;
    }
    ps->p++;
    return 0;
}

static int parse_class(gbnf_parser *ps) {
    const char *start = ps->p++;
    const bool negated = *ps->p == '^';
    if (negated) ps->p++;
    uint32_t *ranges = NULL;
    int n = 0, cap = 0, rc = 0;
    while (*ps->p != ']') {
        if (!*ps->p) {
            rc = fail_at(ps, start, "unterminated character class");
            break;
        }
        uint32_t lo, hi;
        if ((rc = read_char(ps, &lo))) break;
        hi = lo;
        if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
            ps->p++;
            if ((rc = read_char(ps, &hi))) break;
            if (hi < lo) {
                rc = fail_at(ps, ps->p - 1, "character range out of order");
                break;
            }
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            uint32_t *r = realloc(ranges, (size_t)cap * 2 * sizeof *r);
            if (!r) {
                rc = err_oom("grammar: out of memory");
                break;
            }
            ranges = r;
        }
        ranges[2 * n] = lo, ranges[2 * n + 1] = hi, n++;
    }
    if (!rc) {
        ps->p++;
        if (n == 0 && !negated) rc = fail_at(ps, start, "empty character class");
        else rc = gb_push_codepoints(ps->b, ranges, n, negated);
    }
    free(ranges);
    return rc;
}

static int parse_int(gbnf_parser *ps, int *out) {
    if (!isdigit((unsigned char)*ps->p)) return fail_at(ps, ps->p, "expected a number");
    long v = 0;
    while (isdigit((unsigned char)*ps->p)) {
        v = v * 10 + (*ps->p++ - '0');
        if (v > 100000) return fail_at(ps, ps->p, "repetition count too large");
    }
    *out = (int)v;
    return 0;
}

static int parse_postfix(gbnf_parser *ps, size_t mark) {
    const char *at = ps->p;
    int min, max;
    switch (*at) {
    case '*': ps->p++, min = 0, max = -1; break;
    case '+': ps->p++, min = 1, max = -1; break;
    case '?': ps->p++, min = 0, max = 1; break;
    case '{':
        ps->p++;
        skip_space(ps, false);
        if (parse_int(ps, &min)) return -1;
        skip_space(ps, false);
        max = min;
        if (*ps->p == ',') {
            ps->p++;
            skip_space(ps, false);
            max = -1;
            if (*ps->p != '}' && parse_int(ps, &max)) return -1;
            skip_space(ps, false);
        }
        if (*ps->p != '}') return fail_at(ps, ps->p, "expected '}'");
        ps->p++;
        if (max >= 0 && max < min) return fail_at(ps, at, "repetition {m,n} with n < m");
        break;
    default: return 0;
    }
    if (gb_repeat_since(ps->b, mark, min, max)) {
        char why[256]; /* err_get's buffer is rewritten by fail_at */
        snprintf(why, sizeof why, "%s", err_get());
        return fail_at(ps, at, why);
    }
    return 0;
}

static int parse_sequence(gbnf_parser *ps, bool nested) {
    for (;;) {
        skip_space(ps, nested);
        const char c = *ps->p;
        const size_t mark = gb_mark(ps->b);
        if (c == '"') {
            if (parse_literal(ps)) return -1;
        } else if (c == '[') {
            if (parse_class(ps)) return -1;
        } else if (c == '.') {
            ps->p++;
            const uint32_t any[2] = {0, 0x10FFFF};
            if (gb_push_codepoints(ps->b, any, 1, false)) return -1;
        } else if (c == '(') {
            const char *open = ps->p++;
            if (++ps->depth > 200) return fail_at(ps, open, "groups nested too deeply (over 200)");
            const int sub = gb_fresh_rule(ps->b);
            if (sub < 0 || parse_alternates(ps, sub, true)) return -1;
            ps->depth--;
            skip_space(ps, true);
            if (*ps->p != ')') return fail_at(ps, open, "unclosed '('");
            ps->p++;
            if (gb_push_rule(ps->b, sub)) return -1;
        } else if (is_name_char(c)) {
            const char *name = ps->p;
            while (is_name_char(*ps->p)) ps->p++;
            const char *after = ps->p;
            skip_space(ps, false);
            if (ps->p[0] == ':' && ps->p[1] == ':' && ps->p[2] == '=') {
                ps->p = name; /* the next rule's definition: this sequence ended a line earlier */
                return fail_at(ps, name, "missing newline before a rule definition");
            }
            ps->p = after;
            const int r = gb_rule(ps->b, name, (size_t)(after - name));
            if (r < 0 || gb_push_rule(ps->b, r)) return -1;
        } else {
            return 0;
        }
        if (parse_postfix(ps, mark)) return -1;
    }
}

static int parse_alternates(gbnf_parser *ps, int rule, bool nested) {
    for (;;) {
        if (gb_alt_begin(ps->b, rule) || parse_sequence(ps, nested) || gb_alt_end(ps->b)) return -1;
        skip_space(ps, nested);
        if (*ps->p != '|') return 0;
        ps->p++;
        skip_space(ps, true);
    }
}

grammar *grammar_from_gbnf(const char *text) {
    gbnf_parser ps = {.text = text, .p = text, .b = gb_create()};
    if (!ps.b) {
        err_oom("grammar: out of memory");
        return NULL;
    }
    bool *seen = NULL;
    size_t n_seen = 0;
    for (;;) {
        skip_space(&ps, true);
        if (!*ps.p) break;
        const char *name = ps.p;
        while (is_name_char(*ps.p)) ps.p++;
        if (ps.p == name) {
            fail_at(&ps, ps.p, "expected a rule name");
            goto fail;
        }
        const int r = gb_rule(ps.b, name, (size_t)(ps.p - name));
        if (r < 0) goto fail;
        if ((size_t)r >= n_seen) {
            bool *s = realloc(seen, (size_t)r + 1);
            if (!s) {
                err_oom("grammar: out of memory");
                goto fail;
            }
            memset(s + n_seen, 0, (size_t)r + 1 - n_seen);
            seen = s, n_seen = (size_t)r + 1;
        }
        if (seen[r]) {
            fail_at(&ps, name, "rule defined twice");
            goto fail;
        }
        seen[r] = true;
        skip_space(&ps, false);
        if (strncmp(ps.p, "::=", 3)) {
            fail_at(&ps, ps.p, "expected '::='");
            goto fail;
        }
        ps.p += 3;
        skip_space(&ps, true);
        if (parse_alternates(&ps, r, false)) goto fail;
        skip_space(&ps, false);
        if (*ps.p && *ps.p != '\n' && *ps.p != '\r') {
            fail_at(&ps, ps.p, "unexpected character");
            goto fail;
        }
    }
    free(seen);
    const int root = gb_rule(ps.b, "root", 4);
    if (root < 0) {
        gb_free(ps.b);
        return NULL;
    }
    if (!gb_rule_defined(ps.b, root)) {
        gb_free(ps.b);
        err_set("grammar: no rule named 'root' (the start rule)");
        return NULL;
    }
    return gb_finish(ps.b, root);
fail:
    free(seen);
    gb_free(ps.b);
    return NULL;
}
