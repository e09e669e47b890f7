/* Python's str for chat templates: case mapping with Unicode's special cases
 * (final sigma, 'ß'.upper()), strip/split/splitlines/replace with Python's
 * whitespace and line-break sets, int() and float() of strings, printf-style
 * `%` formatting, and the str methods templates call (content.strip(),
 * s.split('\n'), s.startswith(...), '{}'.format(...)), and markupsafe's
 * Markup on top of them. Indices count code points, as Python's do. Methods
 * for text layout and character classes (center, zfill, isdigit, ...) are left
 * out: tests/data/templates/README.md lists what is here and why. */
#include "chat/template_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- str helpers ---------------------------------------------------------------------- */

static int map_case(tpl_rt *r, tstr s, int (*fn)(sbuf *, uint32_t), tstr *out) {
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    size_t i = 0;
    while (i < s.n)
        if (fn(&b, tpl_utf8_next(s.p, s.n, &i))) return -1;
    *out = tpl_sb_str(&b);
    return 0;
}

int tpl_str_upper(tpl_rt *r, tstr s, tstr *out) {
    return map_case(r, s, tpl_py_upper_cp, out);
}

/* CPython's handle_capital_sigma: Σ at byte `pos` (next char at `next`) is
 * final when a cased letter precedes it and none follows, skipping
 * case-ignorable characters both ways. */
static bool final_sigma(tstr s, size_t pos, size_t next) {
    uint32_t c = 0;
    size_t j = pos;
    bool found = false;
    while (j > 0) {
        size_t b = j - 1;
        while (b > 0 && ((unsigned char)s.p[b] & 0xC0) == 0x80)
            b--;
        size_t k = b;
        c = tpl_utf8_next(s.p, s.n, &k);
        j = b;
        if (!tpl_py_iscase_ignorable(c)) {
            found = true;
            break;
        }
    }
    if (!found || !tpl_py_iscased(c)) return false;
    size_t i = next;
    while (i < s.n) {
        c = tpl_utf8_next(s.p, s.n, &i);
        if (!tpl_py_iscase_ignorable(c)) return !tpl_py_iscased(c);
    }
    return true;
}

int tpl_str_lower_from(sbuf *b, tstr s, size_t from) {
    size_t i = from;
    while (i < s.n) {
        size_t start = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        int rc = cp == 0x3A3 ? tpl_sb_put_cp(b, final_sigma(s, start, i) ? 0x3C2 : 0x3C3)
                             : tpl_py_lower_cp(b, cp);
        if (rc) return -1;
    }
    return 0;
}

int tpl_str_lower(tpl_rt *r, tstr s, tstr *out) {
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (tpl_str_lower_from(&b, s, 0)) return -1;
    *out = tpl_sb_str(&b);
    return 0;
}

int tpl_str_capitalize(tpl_rt *r, tstr s, tstr *out) {
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    size_t i = 0;
    if (i < s.n && tpl_py_title_cp(&b, tpl_utf8_next(s.p, s.n, &i))) return -1;
    if (tpl_str_lower_from(&b, s, i)) return -1;
    *out = tpl_sb_str(&b);
    return 0;
}

static int str_title(tpl_rt *r, tstr s, tstr *out) {
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    bool prev_cased = false;
    size_t i = 0;
    while (i < s.n) {
        size_t start = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        int rc;
        if (!prev_cased)
            rc = tpl_py_title_cp(&b, cp);
        else if (cp == 0x3A3)
            rc = tpl_sb_put_cp(&b, final_sigma(s, start, i) ? 0x3C2 : 0x3C3);
        else
            rc = tpl_py_lower_cp(&b, cp);
        if (rc) return -1;
        prev_cased = tpl_py_iscased(cp);
    }
    *out = tpl_sb_str(&b);
    return 0;
}

static bool in_chars(tstr chars, uint32_t cp) {
    size_t i = 0;
    while (i < chars.n)
        if (tpl_utf8_next(chars.p, chars.n, &i) == cp) return true;
    return false;
}

int tpl_str_strip(tpl_rt *r, tstr s, tv chars, int mode, tstr *out) {
    if (chars.kind != TV_NONE && chars.kind != TV_STR && chars.kind != TV_UNDEF)
        return tpl_rt_error(r, NULL, "strip arg must be None or str");
    bool ws = chars.kind != TV_STR;
    size_t start = 0, end = s.n;
    if (mode & 1) {
        while (start < end) {
            size_t k = start;
            uint32_t cp = tpl_utf8_next(s.p, s.n, &k);
            if (ws ? !tpl_py_isspace(cp) : !in_chars(chars.u.s, cp)) break;
            start = k;
        }
    }
    if (mode & 2) {
        while (end > start) {
            size_t b = end - 1;
            while (b > start && ((unsigned char)s.p[b] & 0xC0) == 0x80)
                b--;
            size_t k = b;
            uint32_t cp = tpl_utf8_next(s.p, s.n, &k);
            if (ws ? !tpl_py_isspace(cp) : !in_chars(chars.u.s, cp)) break;
            end = b;
        }
    }
    *out = (tstr){s.p + start, end - start};
    return 0;
}

int tpl_str_replace(tpl_rt *r, const node *at, tstr s, tstr old, tstr rep, int64_t count,
                    tstr *out) {
    (void)at;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (count < 0) count = INT64_MAX;
    if (old.n == 0) {
        /* Python inserts `rep` before every character and at the end */
        size_t i = 0;
        int64_t done = 0;
        while (i <= s.n) {
            if (done < count) {
                if (tpl_sb_put(&b, rep.p, rep.n)) return -1;
                done++;
            }
            if (i == s.n) break;
            size_t start = i;
            tpl_utf8_next(s.p, s.n, &i);
            if (tpl_sb_put(&b, s.p + start, i - start)) return -1;
        }
        *out = tpl_sb_str(&b);
        return 0;
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s.n) {
        const char *hit =
            done < count && old.n <= s.n - i ? memmem(s.p + i, s.n - i, old.p, old.n) : NULL;
        if (!hit) break;
        size_t k = (size_t)(hit - s.p);
        if (tpl_sb_put(&b, s.p + i, k - i) || tpl_sb_put(&b, rep.p, rep.n)) return -1;
        i = k + old.n;
        done++;
    }
    if (tpl_sb_put(&b, s.p + i, s.n - i)) return -1;
    *out = tpl_sb_str(&b);
    return 0;
}

static bool line_break(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static int list_push(tpl_rt *r, tlist *l, size_t *cap, tv v) {
    tv *nv = tpl_ar_grow(tpl_rt_arena(r), l->v, cap, l->n + 1, sizeof(tv));
    if (!nv) return -1;
    l->v = nv;
    l->v[l->n++] = v;
    return 0;
}

int tpl_str_splitlines(tpl_rt *r, tstr s, bool keepends, tlist **out) {
    tlist *l = tpl_tl_new(tpl_rt_arena(r), 0);
    if (!l) return -1;
    size_t cap = 0, i = 0, start = 0;
    while (i < s.n) {
        size_t before = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        if (!line_break(cp)) continue;
        if (cp == '\r' && i < s.n && s.p[i] == '\n') i++;
        size_t end = keepends ? i : before;
        if (list_push(r, l, &cap, tv_str((tstr){s.p + start, end - start}))) return -1;
        start = i;
    }
    if (start < s.n && list_push(r, l, &cap, tv_str((tstr){s.p + start, s.n - start}))) return -1;
    *out = l;
    return 0;
}

/* What int() and float() parse: s with Unicode decimal digits made ASCII
 * and Unicode whitespace made spaces, trimmed (CPython's
 * _PyUnicode_TransformDecimalAndSpaceToASCII); false if anything else is not
 * ASCII or it does not fit. */
static bool ascii_number(tstr s, char *buf, size_t cap, size_t *n) {
    size_t k = 0, i = 0;
    while (i < s.n) {
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        int d = cp >= 0x80 ? tpl_py_decimal(cp) : -1;
        char c = tpl_py_isspace(cp) ? ' ' : cp < 0x80 ? (char)cp : d >= 0 ? (char)('0' + d) : 0;
        if (!c || k + 1 >= cap) return false;
        buf[k++] = c;
    }
    size_t a = 0;
    while (a < k && buf[a] == ' ')
        a++;
    while (k > a && buf[k - 1] == ' ')
        k--;
    memmove(buf, buf + a, k - a);
    *n = k - a;
    buf[*n] = 0;
    return true;
}

/* Python int(s, base) for strings: sign, prefixes, underscores. */
int tpl_py_parse_int(tstr s, int base, int64_t *out) {
    char buf[256];
    size_t n;
    if (!ascii_number(s, buf, sizeof buf, &n)) return -1;
    tstr t = {buf, n};
    if (base != 0 && (base < 2 || base > 36)) return -1;
    size_t i = 0;
    bool neg = false;
    if (i < t.n && (t.p[i] == '+' || t.p[i] == '-')) neg = t.p[i++] == '-';
    bool prefixed = false;
    if (i + 1 < t.n && t.p[i] == '0') {
        char c = (char)(t.p[i + 1] | 0x20);
        int pb = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
        if (pb && (base == 0 || base == pb)) {
            base = pb;
            i += 2;
            prefixed = true;
        }
    }
    if (base == 0) {
        base = 10;
        /* base 0 forbids leading zeros in non-zero decimals */
        if (i + 1 < t.n && t.p[i] == '0') {
            for (size_t k = i; k < t.n; k++)
                if (t.p[k] != '0' && t.p[k] != '_') return -1;
        }
    }
    if (i >= t.n) return -1;
    uint64_t v = 0;
    bool digit_seen = false, last_us = prefixed;
    for (; i < t.n; i++) {
        char c = t.p[i];
        if (c == '_') {
            if (last_us && !(prefixed && !digit_seen)) return -1;
            if (!digit_seen && !prefixed) return -1;
            last_us = true;
            continue;
        }
        int d = c >= '0' && c <= '9'                     ? c - '0'
                : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10
                                                         : 99;
        if (d >= base) return -1;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return -1;
        v = v * (uint64_t)base + (uint64_t)d;
        digit_seen = true;
        last_us = false;
    }
    if (!digit_seen || last_us) return -1;
    if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0)) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* Python float(s) for strings. */
int tpl_py_parse_float(tstr s, double *out) {
    char src[416];
    size_t len;
    if (!ascii_number(s, src, sizeof src, &len) || len == 0) return -1;
    char buf[416];
    size_t n = 0, i = 0, b = len;
    if (src[i] == '+' || src[i] == '-') buf[n++] = src[i++];
    size_t rest = b - i;
    const char *special[] = {"inf", "infinity", "nan"};
    for (int k = 0; k < 3; k++)
        if (rest == strlen(special[k]) && strncasecmp(src + i, special[k], rest) == 0) {
            double v = k == 2 ? NAN : INFINITY;
            *out = n && buf[0] == '-' ? -v : v;
            return 0;
        }
    /* digits [. digits] [e [sign] digits], underscores only between digits */
    bool digits = false, prev_digit = false;
    int part = 0; /* 0 integer, 1 fraction, 2 exponent */
    for (; i < b; i++) {
        char c = src[i];
        if (c >= '0' && c <= '9') {
            buf[n++] = c;
            digits = true;
            prev_digit = true;
        } else if (c == '_') {
            if (!prev_digit || i + 1 >= b || src[i + 1] < '0' || src[i + 1] > '9') return -1;
            prev_digit = false;
        } else if (c == '.' && part == 0) {
            buf[n++] = c;
            part = 1;
            prev_digit = false;
        } else if ((c == 'e' || c == 'E') && part < 2 && digits) {
            buf[n++] = 'e';
            part = 2;
            digits = false;
            prev_digit = false;
            if (i + 1 < b && (src[i + 1] == '+' || src[i + 1] == '-')) buf[n++] = src[++i];
        } else {
            return -1;
        }
    }
    if (!digits) return -1;
    buf[n] = 0;
    *out = strtod(buf, NULL);
    return 0;
}

/* --- printf-style formatting ------------------------------------------------------------ */

int tpl_format_percent(tpl_rt *r, const node *at, tv fmtv, tv args, tv *out) {
    tstr fmt = fmtv.u.s;
    bool markup = tv_is_markup(fmtv);
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    const tlist *tuple = NULL;
    tlist single = {1, &args, 0, 0, 0};
    bool mapping = args.kind == TV_DICT;
    /* Python treats any subscriptable non-tuple (a list too) as a mapping when
     * deciding whether arguments were left unconverted */
    bool subscriptable =
        mapping || args.kind == TV_UNDEF ||
        (args.kind == TV_LIST && args.sub != LIST_TUPLE && args.sub != LIST_ITEMS &&
         args.sub != LIST_KEYS && args.sub != LIST_VALUES);
    bool is_tuple = args.kind == TV_LIST && args.sub == LIST_TUPLE;
    if (is_tuple)
        tuple = args.u.l;
    else
        tuple = &single;
    size_t argi = 0, i = 0;
    bool used_mapping = false;
    while (i < fmt.n) {
        const char *pct = memchr(fmt.p + i, '%', fmt.n - i);
        size_t k = pct ? (size_t)(pct - fmt.p) : fmt.n;
        if (tpl_sb_put(&b, fmt.p + i, k - i)) return -1;
        if (!pct) break;
        i = k + 1;
        if (i >= fmt.n) return tpl_rt_error(r, at, "incomplete format");
        tv arg;
        bool have_arg = false;
        if (fmt.p[i] == '(') {
            const char *close = memchr(fmt.p + i, ')', fmt.n - i);
            if (!close) return tpl_rt_error(r, at, "incomplete format key");
            if (args.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, args);
            if (!mapping) return tpl_rt_error(r, at, "format requires a mapping");
            tstr key = {fmt.p + i + 1, (size_t)(close - fmt.p) - i - 1};
            if (!tpl_td_get_str(args.u.d, key, &arg))
                return tpl_rt_error(r, at, "KeyError: '%.*s'", (int)key.n, key.p);
            have_arg = used_mapping = true;
            i = (size_t)(close - fmt.p) + 1;
        }
        char flags[8] = "";
        int nf = 0;
        while (i < fmt.n && strchr("-+ #0", fmt.p[i]) && fmt.p[i] && nf < 6)
            flags[nf++] = fmt.p[i++];
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (i < fmt.n && fmt.p[i] == '*')
            return tpl_rt_error(r, at, "'*' in format strings is not supported");
        if (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9') {
            width = 0;
            while (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9' && width < 100000)
                width = width * 10 + (fmt.p[i++] - '0');
        }
        if (i < fmt.n && fmt.p[i] == '.') {
            i++;
            prec = 0;
            while (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9' && prec < 100000)
                prec = prec * 10 + (fmt.p[i++] - '0');
        }
        if (i >= fmt.n) return tpl_rt_error(r, at, "incomplete format");
        char type = fmt.p[i++];
        if (type == '%') {
            if (tpl_sb_putc(&b, '%')) return -1;
            continue;
        }
        if (!have_arg) {
            if (mapping) {
                arg = args;
            } else {
                if (argi >= tuple->n)
                    return tpl_rt_error(r, at, "not enough arguments for format string");
                arg = tuple->v[argi++];
            }
        }
        char spec[48], tmp[512];
        bool left = strchr(flags, '-') != NULL;
        if (type == 's' || type == 'r' || type == 'a') {
            sbuf sb;
            tpl_sb_init(&sb, tpl_rt_arena(r), TPL_MAX_OUTPUT);
            if (type == 's' ? tpl_tv_to_str(r, arg, &sb) : tpl_tv_repr(r, arg, &sb)) return -1;
            tstr s = tpl_sb_str(&sb);
            if (markup && !(type == 's' && tv_is_markup(arg))) {
                tv e;
                if (tpl_escape(r, tv_str(s), &e)) return -1;
                s = e.u.s;
            }
            if (prec >= 0) {
                size_t bi = 0;
                for (int c = 0; c < prec && bi < s.n; c++)
                    tpl_utf8_next(s.p, s.n, &bi);
                s.n = bi;
            }
            int pad = width - (int)tpl_utf8_len(s);
            for (int c = 0; !left && c < pad; c++)
                if (tpl_sb_putc(&b, ' ')) return -1;
            if (tpl_sb_put(&b, s.p, s.n)) return -1;
            for (int c = 0; left && c < pad; c++)
                if (tpl_sb_putc(&b, ' ')) return -1;
            continue;
        }
        if (width > 4096 || prec > 4096) return tpl_rt_error(r, at, "format width too large");
        bool is_num = arg.kind == TV_INT || arg.kind == TV_BOOL || arg.kind == TV_FLOAT;
        if (!is_num)
            return tpl_rt_error(r, at, "%%%c format: a real number is required, not %s", type,
                                tpl_tv_type_name(arg));
        double f =
            arg.kind == TV_FLOAT ? arg.u.f : (double)(arg.kind == TV_BOOL ? arg.u.b : arg.u.i);
        if (strchr("diu", type) && arg.kind == TV_FLOAT && !(fabs(f) < 9.2e18)) {
            /* Python prints int(f) exactly; so does %.0f of an integral double */
            if (!isfinite(f)) return tpl_rt_error(r, at, "cannot convert float to integer");
            snprintf(spec, sizeof spec, "%%%s%s.0f", flags, width >= 0 ? "*" : "");
            if (width >= 0)
                snprintf(tmp, sizeof tmp, spec, width, trunc(f));
            else
                snprintf(tmp, sizeof tmp, spec, trunc(f));
        } else if (strchr("diuxXo", type)) {
            if (arg.kind == TV_FLOAT && !(fabs(f) < 9.2e18))
                return tpl_rt_error(r, at,
                                    "integer overflow (values beyond 64 bits are not supported)");
            int64_t v =
                arg.kind == TV_FLOAT ? (int64_t)f : (arg.kind == TV_BOOL ? arg.u.b : arg.u.i);
            char t = type == 'i' || type == 'u' ? 'd' : type;
            const char *len_mod = t == 'd'   ? PRId64
                                  : t == 'x' ? PRIx64
                                  : t == 'X' ? PRIX64
                                             : PRIo64;
            snprintf(spec, sizeof spec, "%%%s%s%s%s", flags, width >= 0 ? "*" : "",
                     prec >= 0 ? ".*" : "", len_mod);
            if (width >= 0 && prec >= 0)
                snprintf(tmp, sizeof tmp, spec, width, prec, v);
            else if (width >= 0)
                snprintf(tmp, sizeof tmp, spec, width, v);
            else if (prec >= 0)
                snprintf(tmp, sizeof tmp, spec, prec, v);
            else
                snprintf(tmp, sizeof tmp, spec, v);
        } else if (strchr("eEfFgG", type)) {
            snprintf(spec, sizeof spec, "%%%s%s.*%c", flags, width >= 0 ? "*" : "", type);
            int pr = prec >= 0 ? prec : 6;
            if (width >= 0)
                snprintf(tmp, sizeof tmp, spec, width, pr, f);
            else
                snprintf(tmp, sizeof tmp, spec, pr, f);
        } else {
            return tpl_rt_error(r, at, "unsupported format character '%c'", type);
        }
        if (tpl_sb_puts(&b, tmp)) return -1;
    }
    if (!subscriptable && argi < tuple->n && !used_mapping)
        return tpl_rt_error(r, at, "not all arguments converted during string formatting");
    *out = tv_str_as(fmtv, tpl_sb_str(&b));
    return 0;
}

/* --- Markup ------------------------------------------------------------------------------ */

int tpl_escape(tpl_rt *r, tv v, tv *out) {
    if (tv_is_markup(v)) {
        *out = v;
        return 0;
    }
    tstr s;
    if (tpl_tv_stringify(r, v, &s)) return -1;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    for (size_t i = 0; i < s.n; i++) {
        const char *e = NULL;
        switch (s.p[i]) {
        case '&':
            e = "&amp;";
            break;
        case '<':
            e = "&lt;";
            break;
        case '>':
            e = "&gt;";
            break;
        case '"':
            e = "&#34;";
            break;
        case '\'':
            e = "&#39;";
            break;
        }
        if (e ? tpl_sb_puts(&b, e) : tpl_sb_putc(&b, s.p[i])) return -1;
    }
    *out = tv_markup(tpl_sb_str(&b));
    return 0;
}

int tpl_markup_call(tpl_rt *r, const node *at, const tfunc *f, targs *a, tv *out) {
    targs esc = *a;
    if (f->markup == MK_ESCAPE_ARG1 && a->n > 1) {
        esc.pos = tpl_ar_alloc(tpl_rt_arena(r), (size_t)a->n * sizeof *esc.pos);
        if (!esc.pos) return -1;
        for (int i = 0; i < a->n; i++)
            esc.pos[i] = a->pos[i];
        if (tpl_escape(r, a->pos[1], &esc.pos[1])) return -1;
    } else if (f->markup == MK_ESCAPE_ITEMS && a->n == 1 && !a->nk) {
        /* Markup.join(map(escape, iterable)): the items need not be strings */
        tlist *items;
        if (tpl_tv_iterate(r, at, a->pos[0], &items)) return -1;
        tlist *l = tpl_tl_new(tpl_rt_arena(r), items->n);
        if (!l) return -1;
        for (size_t i = 0; i < items->n; i++)
            if (tpl_escape(r, items->v[i], &l->v[i])) return -1;
        esc.pos = tpl_ar_alloc(tpl_rt_arena(r), sizeof *esc.pos);
        if (!esc.pos) return -1;
        esc.pos[0] = tv_list(l, LIST_PLAIN);
    }
    if (f->fn(r, at, f->self, &esc, out)) return -1;
    if (out->kind == TV_STR) {
        out->sub = STR_MARKUP;
    } else if (out->kind == TV_LIST) { /* split(), partition(): new lists of Markup */
        tlist *l = tpl_tl_new(tpl_rt_arena(r), out->u.l->n);
        if (!l) return -1;
        for (size_t i = 0; i < l->n; i++) {
            l->v[i] = out->u.l->v[i];
            if (l->v[i].kind == TV_STR) l->v[i].sub = STR_MARKUP;
        }
        out->u.l = l;
    }
    return 0;
}

/* --- str methods -------------------------------------------------------------------------- */

static int self_str(tv self, tstr *s) {
    *s = self.u.s;
    return 0;
}

static int m_strip_mode(tpl_rt *r, const node *at, tv self, targs *a, tv *out, int mode,
                        const char *name) {
    BIND(name, "chars");
    tstr s, t;
    self_str(self, &s);
    if (tpl_str_strip(r, s, g[0] ? p[0] : tv_none(), mode, &t)) return -1;
    *out = tv_str(t);
    return 0;
}
static int m_strip(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_strip_mode(r, at, self, a, out, 3, "strip");
}
static int m_lstrip(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_strip_mode(r, at, self, a, out, 1, "lstrip");
}
static int m_rstrip(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_strip_mode(r, at, self, a, out, 2, "rstrip");
}

static int m_case(tpl_rt *r, const node *at, tv self, targs *a, tv *out, const char *name,
                  int (*fn)(tpl_rt *, tstr, tstr *)) {
    tstr t;
    if (no_args(r, at, name, a) || fn(r, self.u.s, &t)) return -1;
    *out = tv_str(t);
    return 0;
}
static int m_upper(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_case(r, at, self, a, out, "upper", tpl_str_upper);
}
static int m_lower(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_case(r, at, self, a, out, "lower", tpl_str_lower);
}
static int m_title(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_case(r, at, self, a, out, "title", str_title);
}
static int m_capitalize(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return m_case(r, at, self, a, out, "capitalize", tpl_str_capitalize);
}

static int split_common(tpl_rt *r, const node *at, tv self, targs *a, tv *out, bool from_right) {
    BIND(from_right ? "rsplit" : "split", "sep", "maxsplit");
    tstr s = self.u.s;
    int64_t maxsplit = -1;
    if (g[1]) {
        if (p[1].kind != TV_INT && p[1].kind != TV_BOOL)
            return tpl_rt_error(r, at, "'%s' object cannot be interpreted as an integer",
                                tpl_tv_type_name(p[1]));
        maxsplit = p[1].kind == TV_BOOL ? p[1].u.b : p[1].u.i;
    }
    if (maxsplit < 0) maxsplit = INT64_MAX;
    tlist *l = tpl_tl_new(tpl_rt_arena(r), 0);
    if (!l) return -1;
    size_t cap = 0;
    bool ws = !g[0] || p[0].kind == TV_NONE;
    if (!ws && p[0].kind != TV_STR)
        return tpl_rt_error(r, at, "must be str or None, not %s", tpl_tv_type_name(p[0]));
    if (!ws && p[0].u.s.n == 0) return tpl_rt_error(r, at, "empty separator");
    /* Collect pieces left to right (or right to left, then reverse). */
    tstr sep = ws ? (tstr){"", 0} : p[0].u.s;
    int64_t splits = 0;
    if (!from_right) {
        size_t i = 0;
        if (ws) {
            for (;;) {
                while (i < s.n) {
                    size_t k = i;
                    if (!tpl_py_isspace(tpl_utf8_next(s.p, s.n, &k))) break;
                    i = k;
                }
                if (i >= s.n) break;
                size_t start = i;
                if (splits >= maxsplit) { /* the rest, as it is */
                    if (list_push(r, l, &cap, tv_str((tstr){s.p + start, s.n - start}))) return -1;
                    break;
                }
                while (i < s.n) {
                    size_t k = i;
                    if (tpl_py_isspace(tpl_utf8_next(s.p, s.n, &k))) break;
                    i = k;
                }
                if (list_push(r, l, &cap, tv_str((tstr){s.p + start, i - start}))) return -1;
                splits++;
            }
        } else {
            for (;;) {
                const char *hit = splits < maxsplit && sep.n <= s.n - i
                                      ? memmem(s.p + i, s.n - i, sep.p, sep.n)
                                      : NULL;
                size_t end = hit ? (size_t)(hit - s.p) : s.n;
                if (list_push(r, l, &cap, tv_str((tstr){s.p + i, end - i}))) return -1;
                if (!hit) break;
                i = end + sep.n;
                splits++;
            }
        }
    } else {
        size_t j = s.n;
        if (ws) {
            for (;;) {
                while (j > 0) {
                    size_t b0 = j - 1;
                    while (b0 > 0 && ((unsigned char)s.p[b0] & 0xC0) == 0x80)
                        b0--;
                    size_t k = b0;
                    if (!tpl_py_isspace(tpl_utf8_next(s.p, s.n, &k))) break;
                    j = b0;
                }
                if (j == 0) break;
                size_t end = j;
                if (splits >= maxsplit) {
                    if (list_push(r, l, &cap, tv_str((tstr){s.p, end}))) return -1;
                    break;
                }
                while (j > 0) {
                    size_t b0 = j - 1;
                    while (b0 > 0 && ((unsigned char)s.p[b0] & 0xC0) == 0x80)
                        b0--;
                    size_t k = b0;
                    if (tpl_py_isspace(tpl_utf8_next(s.p, s.n, &k))) break;
                    j = b0;
                }
                if (list_push(r, l, &cap, tv_str((tstr){s.p + j, end - j}))) return -1;
                splits++;
            }
        } else {
            for (;;) {
                size_t hit = SIZE_MAX;
                if (splits < maxsplit && j >= sep.n)
                    for (size_t k = j - sep.n + 1; k-- > 0;)
                        if (memcmp(s.p + k, sep.p, sep.n) == 0) {
                            hit = k;
                            break;
                        }
                size_t start = hit == SIZE_MAX ? 0 : hit + sep.n;
                if (list_push(r, l, &cap, tv_str((tstr){s.p + start, j - start}))) return -1;
                if (hit == SIZE_MAX) break;
                j = hit;
                splits++;
            }
        }
        for (size_t k = 0; k < l->n / 2; k++) {
            tv t = l->v[k];
            l->v[k] = l->v[l->n - 1 - k];
            l->v[l->n - 1 - k] = t;
        }
    }
    *out = tv_list(l, LIST_PLAIN);
    return 0;
}
static int m_split(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return split_common(r, at, self, a, out, false);
}
static int m_rsplit(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return split_common(r, at, self, a, out, true);
}

static int m_splitlines(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    BIND("splitlines", "keepends");
    tlist *l;
    if (tpl_str_splitlines(r, self.u.s, g[0] && tpl_tv_truthy(p[0]), &l)) return -1;
    *out = tv_list(l, LIST_PLAIN);
    return 0;
}

/* Byte range of s[start:end] in code points, Python's slice clamping. */
static int sub_range(tpl_rt *r, const node *at, tstr s, bool gs, tv vs, bool ge, tv ve, size_t *b0,
                     size_t *b1) {
    int64_t len = (int64_t)tpl_utf8_len(s), st = 0, en = len;
    if (gs && vs.kind != TV_NONE) {
        if (vs.kind != TV_INT && vs.kind != TV_BOOL)
            return tpl_rt_error(r, at, "slice indices must be integers or None");
        st = vs.kind == TV_BOOL ? vs.u.b : vs.u.i;
        if (st < 0) st = st + len < 0 ? 0 : st + len;
        if (st > len) st = len + 1; /* past the end: nothing matches, not even "" */
    }
    if (ge && ve.kind != TV_NONE) {
        if (ve.kind != TV_INT && ve.kind != TV_BOOL)
            return tpl_rt_error(r, at, "slice indices must be integers or None");
        en = ve.kind == TV_BOOL ? ve.u.b : ve.u.i;
        if (en < 0) en = en + len < 0 ? 0 : en + len;
        if (en > len) en = len;
    }
    if (st > len) {
        *b0 = SIZE_MAX;
        *b1 = 0;
        return 0;
    }
    size_t i = 0;
    int64_t k = 0;
    *b0 = *b1 = s.n;
    for (;; k++) {
        if (k == st) *b0 = i;
        if (k == en) *b1 = i;
        if (i >= s.n) break;
        tpl_utf8_next(s.p, s.n, &i);
    }
    if (en < st) *b1 = *b0;
    return 0;
}

static int64_t cp_index(tstr s, size_t byte) {
    int64_t n = 0;
    for (size_t i = 0; i < byte; i++)
        if (((unsigned char)s.p[i] & 0xC0) != 0x80) n++;
    return n;
}

static int affix_common(tpl_rt *r, const node *at, tv self, targs *a, tv *out, bool suffix) {
    BIND(suffix ? "endswith" : "startswith", "prefix", "start", "end");
    if (!g[0])
        return tpl_rt_error(r, at, "%s() takes at least 1 argument",
                            suffix ? "endswith" : "startswith");
    size_t b0, b1;
    if (sub_range(r, at, self.u.s, g[1], p[1], g[2], p[2], &b0, &b1)) return -1;
    const tv *cands = &p[0];
    size_t n = 1;
    if (p[0].kind == TV_LIST && p[0].sub == LIST_TUPLE) {
        cands = p[0].u.l->v;
        n = p[0].u.l->n;
    }
    *out = tv_bool(false);
    for (size_t i = 0; i < n; i++) {
        if (cands[i].kind != TV_STR)
            return tpl_rt_error(r, at, "%s first arg must be str or a tuple of str, not %s",
                                suffix ? "endswith" : "startswith", tpl_tv_type_name(cands[i]));
        if (b0 == SIZE_MAX) continue;
        tstr c = cands[i].u.s;
        size_t len = b1 - b0;
        if (c.n > len) continue;
        const char *at_p = suffix ? self.u.s.p + b1 - c.n : self.u.s.p + b0;
        if (c.n == 0 || memcmp(at_p, c.p, c.n) == 0) {
            *out = tv_bool(true);
            return 0;
        }
    }
    return 0;
}
static int m_startswith(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return affix_common(r, at, self, a, out, false);
}
static int m_endswith(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return affix_common(r, at, self, a, out, true);
}

static int find_common(tpl_rt *r, const node *at, tv self, targs *a, tv *out, bool from_right,
                       bool raise, const char *name) {
    BIND(name, "sub", "start", "end");
    if (!g[0] || p[0].kind != TV_STR) return tpl_rt_error(r, at, "%s() argument must be str", name);
    tstr s = self.u.s, sub = p[0].u.s;
    size_t b0, b1;
    if (sub_range(r, at, s, g[1], p[1], g[2], p[2], &b0, &b1)) return -1;
    int64_t found = -1;
    if (b0 != SIZE_MAX && sub.n <= b1 - b0) {
        if (!from_right) {
            const char *hit = sub.n ? memmem(s.p + b0, b1 - b0, sub.p, sub.n) : s.p + b0;
            if (hit) found = cp_index(s, (size_t)(hit - s.p));
        } else {
            for (size_t k = b1 - sub.n + 1; k-- > b0;)
                if (memcmp(s.p + k, sub.p, sub.n) == 0) {
                    found = cp_index(s, k);
                    break;
                }
        }
    }
    if (found < 0 && raise) return tpl_rt_error(r, at, "substring not found");
    *out = tv_int(found);
    return 0;
}
static int m_find(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return find_common(r, at, self, a, out, false, false, "find");
}
static int m_rfind(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return find_common(r, at, self, a, out, true, false, "rfind");
}
static int m_sindex(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return find_common(r, at, self, a, out, false, true, "index");
}
static int m_rindex(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return find_common(r, at, self, a, out, true, true, "rindex");
}

static int m_scount(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    BIND("count", "sub", "start", "end");
    if (!g[0] || p[0].kind != TV_STR) return tpl_rt_error(r, at, "count() argument must be str");
    tstr s = self.u.s, sub = p[0].u.s;
    size_t b0, b1;
    if (sub_range(r, at, s, g[1], p[1], g[2], p[2], &b0, &b1)) return -1;
    int64_t n = 0;
    if (b0 != SIZE_MAX) {
        if (sub.n == 0) {
            n = cp_index(s, b1) - cp_index(s, b0) + 1;
        } else {
            size_t i = b0;
            while (sub.n <= b1 - i) {
                const char *hit = memmem(s.p + i, b1 - i, sub.p, sub.n);
                if (!hit) break;
                n++;
                i = (size_t)(hit - s.p) + sub.n;
            }
        }
    }
    *out = tv_int(n);
    return 0;
}

static int m_replace(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    BIND("replace", "old", "new", "count");
    if (!g[0] || !g[1] || p[0].kind != TV_STR || p[1].kind != TV_STR)
        return tpl_rt_error(r, at, "replace() arguments must be str");
    int64_t count = -1;
    if (g[2]) {
        if (p[2].kind != TV_INT && p[2].kind != TV_BOOL)
            return tpl_rt_error(r, at, "'%s' object cannot be interpreted as an integer",
                                tpl_tv_type_name(p[2]));
        count = p[2].kind == TV_BOOL ? p[2].u.b : p[2].u.i;
    }
    tstr t;
    if (tpl_str_replace(r, at, self.u.s, p[0].u.s, p[1].u.s, count, &t)) return -1;
    *out = tv_str(t);
    return 0;
}

static int m_join(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    BIND("join", "iterable");
    if (!g[0]) return tpl_rt_error(r, at, "join() takes exactly one argument");
    tlist *items;
    if (tpl_tv_iterate(r, at, p[0], &items)) return -1;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    for (size_t i = 0; i < items->n; i++) {
        if (items->v[i].kind != TV_STR)
            return tpl_rt_error(r, at, "sequence item %zu: expected str instance, %s found", i,
                                tpl_tv_type_name(items->v[i]));
        if ((i && tpl_sb_put(&b, self.u.s.p, self.u.s.n)) ||
            tpl_sb_put(&b, items->v[i].u.s.p, items->v[i].u.s.n))
            return -1;
    }
    *out = tv_str(tpl_sb_str(&b));
    return 0;
}

static int affix_remove(tpl_rt *r, const node *at, tv self, targs *a, tv *out, bool suffix) {
    BIND(suffix ? "removesuffix" : "removeprefix", "affix");
    if (!g[0] || p[0].kind != TV_STR) return tpl_rt_error(r, at, "argument must be str");
    tstr s = self.u.s, x = p[0].u.s;
    *out = self;
    if (x.n && x.n <= s.n) {
        if (!suffix && memcmp(s.p, x.p, x.n) == 0) *out = tv_str((tstr){s.p + x.n, s.n - x.n});
        if (suffix && memcmp(s.p + s.n - x.n, x.p, x.n) == 0) *out = tv_str((tstr){s.p, s.n - x.n});
    }
    return 0;
}
static int m_removeprefix(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return affix_remove(r, at, self, a, out, false);
}
static int m_removesuffix(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return affix_remove(r, at, self, a, out, true);
}

static int partition_common(tpl_rt *r, const node *at, tv self, targs *a, tv *out, bool right) {
    BIND(right ? "rpartition" : "partition", "sep");
    if (!g[0] || p[0].kind != TV_STR || p[0].u.s.n == 0)
        return tpl_rt_error(r, at, "partition() needs a non-empty str separator");
    tstr s = self.u.s, sep = p[0].u.s;
    size_t hit = SIZE_MAX;
    if (sep.n <= s.n) {
        if (!right) {
            const char *h = memmem(s.p, s.n, sep.p, sep.n);
            if (h) hit = (size_t)(h - s.p);
        } else {
            for (size_t k = s.n - sep.n + 1; k-- > 0;)
                if (memcmp(s.p + k, sep.p, sep.n) == 0) {
                    hit = k;
                    break;
                }
        }
    }
    tlist *l = tpl_tl_new(tpl_rt_arena(r), 3);
    if (!l) return -1;
    tstr empty = {"", 0};
    if (hit == SIZE_MAX) {
        l->v[0] = tv_str(right ? empty : s);
        l->v[1] = tv_str(empty);
        l->v[2] = tv_str(right ? s : empty);
    } else {
        l->v[0] = tv_str((tstr){s.p, hit});
        l->v[1] = tv_str(sep);
        l->v[2] = tv_str((tstr){s.p + hit + sep.n, s.n - hit - sep.n});
    }
    *out = tv_list(l, LIST_TUPLE);
    return 0;
}
static int m_partition(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return partition_common(r, at, self, a, out, false);
}
static int m_rpartition(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return partition_common(r, at, self, a, out, true);
}

/* str.format with {} {0} {name} {name.attr} {name[key]} fields, !s/!r, no format specs. */
static int m_format(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    tstr f = self.u.s;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    int auto_idx = 0;
    size_t i = 0;
    while (i < f.n) {
        char c = f.p[i];
        if (c == '}') {
            if (i + 1 < f.n && f.p[i + 1] == '}') {
                if (tpl_sb_putc(&b, '}')) return -1;
                i += 2;
                continue;
            }
            return tpl_rt_error(r, at, "Single '}' encountered in format string");
        }
        if (c != '{') {
            if (tpl_sb_putc(&b, c)) return -1;
            i++;
            continue;
        }
        if (i + 1 < f.n && f.p[i + 1] == '{') {
            if (tpl_sb_putc(&b, '{')) return -1;
            i += 2;
            continue;
        }
        const char *close = memchr(f.p + i, '}', f.n - i);
        if (!close) return tpl_rt_error(r, at, "Single '{' encountered in format string");
        tstr field = {f.p + i + 1, (size_t)(close - f.p) - i - 1};
        i = (size_t)(close - f.p) + 1;
        char conv = 's';
        bool explicit_conv = false;
        const char *bang = memchr(field.p, '!', field.n);
        if (memchr(field.p, ':', field.n))
            return tpl_rt_error(r, at, "format specs in str.format are not supported");
        if (bang) {
            if ((size_t)(bang - field.p) + 2 != field.n)
                return tpl_rt_error(r, at, "invalid conversion in format string");
            conv = bang[1];
            explicit_conv = true;
            field.n = (size_t)(bang - field.p);
        }
        size_t name_end = 0;
        while (name_end < field.n && field.p[name_end] != '.' && field.p[name_end] != '[')
            name_end++;
        tstr head = {field.p, name_end};
        tv v;
        if (head.n == 0 || (head.p[0] >= '0' && head.p[0] <= '9')) {
            int64_t idx = head.n == 0 ? auto_idx++ : 0;
            for (size_t k = 0; k < head.n; k++)
                idx = idx * 10 + (head.p[k] - '0');
            if (idx >= a->n)
                return tpl_rt_error(r, at, "Replacement index %" PRId64 " out of range", idx);
            v = a->pos[idx];
        } else {
            int k = 0;
            while (k < a->nk && !tpl_tstr_eq(a->kname[k], head))
                k++;
            if (k == a->nk) return tpl_rt_error(r, at, "KeyError: '%.*s'", (int)head.n, head.p);
            v = a->kval[k];
        }
        size_t j = name_end;
        while (j < field.n) {
            if (field.p[j] == '.') {
                size_t e = j + 1;
                while (e < field.n && field.p[e] != '.' && field.p[e] != '[')
                    e++;
                if (tpl_rt_getattr(r, at, v, (tstr){field.p + j + 1, e - j - 1}, &v)) return -1;
                j = e;
            } else {
                const char *rb = memchr(field.p + j, ']', field.n - j);
                if (!rb) return tpl_rt_error(r, at, "Missing ']' in format string");
                tstr key = {field.p + j + 1, (size_t)(rb - field.p) - j - 1};
                int64_t num;
                tv k = tpl_py_parse_int(key, 10, &num) == 0 ? tv_int(num) : tv_str(key);
                if (tpl_rt_getitem(r, at, v, k, &v)) return -1;
                j = (size_t)(rb - field.p) + 1;
            }
        }
        if (v.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, v);
        if (!tv_is_markup(self)) {
            if (conv == 'r' ? tpl_tv_repr(r, v, &b) : tpl_tv_to_str(r, v, &b)) return -1;
            continue;
        }
        /* markupsafe's EscapeFormatter: a Markup field as itself, the rest escaped
         * (after !s or !r, a Markup too) */
        if (!explicit_conv && tv_is_markup(v)) {
            if (tpl_sb_put(&b, v.u.s.p, v.u.s.n)) return -1;
            continue;
        }
        sbuf fb;
        tpl_sb_init(&fb, tpl_rt_arena(r), TPL_MAX_OUTPUT);
        tv e;
        if ((conv == 'r' ? tpl_tv_repr(r, v, &fb) : tpl_tv_to_str(r, v, &fb)) ||
            tpl_escape(r, tv_str(tpl_sb_str(&fb)), &e) || tpl_sb_put(&b, e.u.s.p, e.u.s.n))
            return -1;
    }
    *out = tv_str(tpl_sb_str(&b));
    return 0;
}

const tpl_method tpl_str_methods[] = {
    {"strip", m_strip, MK_RESULT},
    {"lstrip", m_lstrip, MK_RESULT},
    {"rstrip", m_rstrip, MK_RESULT},
    {"upper", m_upper, MK_RESULT},
    {"lower", m_lower, MK_RESULT},
    {"title", m_title, MK_RESULT},
    {"capitalize", m_capitalize, MK_RESULT},
    {"split", m_split, MK_RESULT},
    {"rsplit", m_rsplit, MK_RESULT},
    {"splitlines", m_splitlines, MK_RESULT},
    {"startswith", m_startswith, MK_NONE},
    {"endswith", m_endswith, MK_NONE},
    {"find", m_find, MK_NONE},
    {"rfind", m_rfind, MK_NONE},
    {"index", m_sindex, MK_NONE},
    {"rindex", m_rindex, MK_NONE},
    {"count", m_scount, MK_NONE},
    {"replace", m_replace, MK_ESCAPE_ARG1},
    {"join", m_join, MK_ESCAPE_ITEMS},
    {"removeprefix", m_removeprefix, MK_RESULT},
    {"removesuffix", m_removesuffix, MK_RESULT},
    {"partition", m_partition, MK_RESULT},
    {"rpartition", m_rpartition, MK_RESULT},
    {"format", m_format, MK_RESULT},
};
const size_t tpl_str_methods_count = sizeof tpl_str_methods / sizeof *tpl_str_methods;
