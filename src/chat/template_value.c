/* Chat-template values with Python's semantics, as jinja2 shows them to a
 * template: str() and repr() (what `{{ }}` prints: True, None, 1.0,
 * ['a', 1], {'k': 'v'}), truthiness, ==, ordering, `in`, slicing, iteration,
 * len(), and the arithmetic operators. Undefined behaves like jinja2's
 * default Undefined: it prints as nothing, is falsy, iterates as empty, and
 * raises its message when used in arithmetic. Python's big integers are
 * 64-bit here; overflow is an error. */
#include "chat/template_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- containers ------------------------------------------------------------------ */

tlist *tpl_tl_new(tpl_arena *a, size_t n) {
    if (n > SIZE_MAX / sizeof(tv) / 2) {
        err_set("chat template: memory limit exceeded");
        return NULL;
    }
    tlist *l = tpl_ar_alloc(a, sizeof *l);
    if (!l) return NULL;
    l->n = n;
    if (n && !(l->v = tpl_ar_alloc(a, n * sizeof(tv)))) return NULL;
    return l;
}

tdict *tpl_td_new(tpl_arena *a, size_t cap) {
    tdict *d = tpl_ar_alloc(a, sizeof *d);
    if (!d) return NULL;
    if (cap) {
        d->cap = cap;
        d->k = tpl_ar_alloc(a, cap * sizeof(tv));
        d->v = tpl_ar_alloc(a, cap * sizeof(tv));
        if (!d->k || !d->v) return NULL;
    }
    return d;
}

static bool hashable(tv v) {
    if (v.kind == TV_DICT) return false;
    if (v.kind != TV_LIST) return true;
    if (v.sub != LIST_TUPLE && v.sub != LIST_RANGE) return false;
    for (size_t i = 0; i < v.u.l->n; i++)
        if (!hashable(v.u.l->v[i])) return false;
    return true;
}

int tpl_td_get(tpl_rt *r, const tdict *d, tv k, tv *out, bool *found) {
    *found = false;
    if (!hashable(k)) return 0;
    for (size_t i = 0; i < d->n; i++) {
        bool eq;
        if (tpl_tv_equal(r, d->k[i], k, &eq)) return -1;
        if (eq) {
            *out = d->v[i];
            *found = true;
            return 0;
        }
    }
    return 0;
}

bool tpl_td_get_str(const tdict *d, tstr k, tv *out) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == TV_STR && tpl_tstr_eq(d->k[i].u.s, k)) {
            *out = d->v[i];
            return true;
        }
    return false;
}

int tpl_td_set(tpl_rt *r, tdict *d, tv k, tv v) {
    if (!hashable(k)) return tpl_rt_error(r, NULL, "unhashable type: '%s'", tpl_tv_type_name(k));
    for (size_t i = 0; i < d->n; i++) {
        bool eq;
        if (tpl_tv_equal(r, d->k[i], k, &eq)) return -1;
        if (eq) {
            d->v[i] = v;
            return 0;
        }
    }
    size_t kcap = d->cap, vcap = d->cap;
    tv *nk = tpl_ar_grow(tpl_rt_arena(r), d->k, &kcap, d->n + 1, sizeof(tv));
    if (!nk) return -1;
    d->k = nk;
    tv *nv = tpl_ar_grow(tpl_rt_arena(r), d->v, &vcap, d->n + 1, sizeof(tv));
    if (!nv) return -1;
    d->v = nv;
    d->cap = kcap;
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return 0;
}

/* --- type names, truth ---------------------------------------------------------- */

const char *tpl_tv_type_name(tv v) {
    switch (v.kind) {
    case TV_UNDEF:
        return "Undefined";
    case TV_NONE:
        return "NoneType";
    case TV_BOOL:
        return "bool";
    case TV_INT:
        return "int";
    case TV_FLOAT:
        return "float";
    case TV_STR:
        return v.sub == STR_MARKUP ? "Markup" : "str";
    case TV_LIST:
        switch (v.sub) {
        case LIST_TUPLE:
            return "tuple";
        case LIST_ITEMS:
            return "dict_items";
        case LIST_KEYS:
            return "dict_keys";
        case LIST_VALUES:
            return "dict_values";
        case LIST_RANGE:
            return "range";
        default:
            return "list";
        }
    case TV_DICT:
        return "dict";
    case TV_GEN:
        return v.u.g->type;
    case TV_NS:
        return "Namespace";
    case TV_LOOP:
        return "LoopContext";
    case TV_MACRO:
        return "Macro";
    case TV_FUNC:
        return "builtin_function_or_method";
    }
    return "object";
}

bool tpl_tv_truthy(tv v) {
    switch (v.kind) {
    case TV_UNDEF:
    case TV_NONE:
        return false;
    case TV_BOOL:
        return v.u.b;
    case TV_INT:
        return v.u.i != 0;
    case TV_FLOAT:
        return v.u.f != 0.0;
    case TV_STR:
        return v.u.s.n != 0;
    case TV_LIST:
        return v.u.l->n != 0;
    case TV_DICT:
        return v.u.d->n != 0;
    default:
        return true;
    }
}

tv tpl_tv_macro_value(tmacro *m) {
    tv v = {TV_MACRO, 0, {.m = m}, NULL};
    return v;
}

/* --- numbers ----------------------------------------------------------------------- */

static bool is_num(tv v) {
    return v.kind == TV_BOOL || v.kind == TV_INT || v.kind == TV_FLOAT;
}
static bool is_intlike(tv v) {
    return v.kind == TV_BOOL || v.kind == TV_INT;
}
static int64_t as_int(tv v) {
    return v.kind == TV_BOOL ? (int64_t)v.u.b : v.u.i;
}
static double as_float(tv v) {
    return v.kind == TV_FLOAT ? v.u.f : (double)as_int(v);
}

void tpl_fmt_float(double f, char *buf, size_t n) {
    if (isnan(f)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, n, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0) {
        snprintf(buf, n, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* The shortest %e that reads back as f: Python's repr digits. */
    char tmp[48];
    for (int p = 0; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p, f);
        if (strtod(tmp, NULL) == f) break;
    }
    const char *s = tmp;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[32];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < 30) digits[nd++] = *s;
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    char out[64];
    int k = 0;
    if (neg) out[k++] = '-';
    if (decpt > 16 || decpt < -3) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++)
                out[k++] = digits[i];
        }
        k += snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+',
                      exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[k++] = '0';
        for (int i = 0; i < nd; i++)
            out[k++] = digits[i];
    } else if (decpt >= nd) {
        for (int i = 0; i < nd; i++)
            out[k++] = digits[i];
        for (int i = nd; i < decpt; i++)
            out[k++] = '0';
        out[k++] = '.';
        out[k++] = '0';
    } else {
        for (int i = 0; i < decpt; i++)
            out[k++] = digits[i];
        out[k++] = '.';
        for (int i = decpt; i < nd; i++)
            out[k++] = digits[i];
    }
    out[k] = 0;
    snprintf(buf, n, "%s", out);
}

/* --- equality and ordering ---------------------------------------------------------- */

/* Lists compare equal within a family: list, tuple, range, the set-like
 * dict_keys/dict_items (order-insensitive), dict_values (identity only). */
static int list_family(tv v) {
    switch (v.sub) {
    case LIST_TUPLE:
        return 1;
    case LIST_RANGE:
        return 2;
    case LIST_KEYS:
    case LIST_ITEMS:
        return 3;
    case LIST_VALUES:
        return 4;
    default:
        return 0;
    }
}

static int equal_depth(tpl_rt *r, tv a, tv b, bool *eq, int depth) {
    *eq = false;
    if (depth > TPL_MAX_DEPTH)
        return tpl_rt_error(r, NULL, "maximum recursion depth exceeded in comparison");
    if (is_num(a) && is_num(b)) {
        if (is_intlike(a) && is_intlike(b))
            *eq = as_int(a) == as_int(b);
        else
            *eq = as_float(a) == as_float(b);
        return 0;
    }
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case TV_UNDEF:
    case TV_NONE:
        *eq = true;
        return 0;
    case TV_STR:
        *eq = tpl_tstr_eq(a.u.s, b.u.s);
        return 0;
    case TV_LIST:
        if (list_family(a) != list_family(b) || a.u.l->n != b.u.l->n) return 0;
        if (a.sub == LIST_VALUES) {
            *eq = a.u.l == b.u.l;
            return 0;
        }
        if (list_family(a) == 3) {
            for (size_t i = 0; i < a.u.l->n; i++) {
                bool found = false;
                for (size_t j = 0; j < b.u.l->n && !found; j++)
                    if (equal_depth(r, a.u.l->v[i], b.u.l->v[j], &found, depth + 1)) return -1;
                if (!found) return 0;
            }
            *eq = true;
            return 0;
        }
        for (size_t i = 0; i < a.u.l->n; i++) {
            if (equal_depth(r, a.u.l->v[i], b.u.l->v[i], eq, depth + 1)) return -1;
            if (!*eq) return 0;
        }
        *eq = true;
        return 0;
    case TV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            bool found = false;
            for (size_t j = 0; j < b.u.d->n && !found; j++) {
                bool keq;
                if (equal_depth(r, a.u.d->k[i], b.u.d->k[j], &keq, depth + 1)) return -1;
                if (keq) {
                    found = true;
                    if (equal_depth(r, a.u.d->v[i], b.u.d->v[j], eq, depth + 1)) return -1;
                    if (!*eq) return 0;
                }
            }
            if (!found) {
                *eq = false;
                return 0;
            }
        }
        *eq = true;
        return 0;
    case TV_GEN:
        *eq = a.u.g == b.u.g;
        return 0;
    case TV_NS:
        *eq = a.u.ns == b.u.ns;
        return 0;
    case TV_LOOP:
        *eq = a.u.loop == b.u.loop;
        return 0;
    case TV_MACRO:
        *eq = a.u.m == b.u.m;
        return 0;
    case TV_FUNC:
        *eq = a.u.fn == b.u.fn;
        return 0;
    }
    return 0;
}

int tpl_tv_equal(tpl_rt *r, tv a, tv b, bool *eq) {
    return equal_depth(r, a, b, eq, 0);
}

static int compare_depth(tpl_rt *r, const node *at, const char *op, tv a, tv b, int *cmp,
                         int depth) {
    if (depth > TPL_MAX_DEPTH)
        return tpl_rt_error(r, at, "maximum recursion depth exceeded in comparison");
    if (a.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, a);
    if (b.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, b);
    if (is_num(a) && is_num(b)) {
        if (is_intlike(a) && is_intlike(b)) {
            int64_t x = as_int(a), y = as_int(b);
            *cmp = x < y ? -1 : x > y;
        } else {
            double x = as_float(a), y = as_float(b);
            *cmp = x < y ? -1 : x > y;
        }
        return 0;
    }
    if (a.kind == TV_STR && b.kind == TV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        if (c == 0) c = a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
        *cmp = c < 0 ? -1 : c > 0;
        return 0;
    }
    if (a.kind == TV_LIST && b.kind == TV_LIST && a.sub == b.sub &&
        (a.sub == LIST_PLAIN || a.sub == LIST_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            bool eq;
            if (tpl_tv_equal(r, a.u.l->v[i], b.u.l->v[i], &eq)) return -1;
            if (!eq) return compare_depth(r, at, op, a.u.l->v[i], b.u.l->v[i], cmp, depth + 1);
        }
        *cmp = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return 0;
    }
    return tpl_rt_error(r, at, "'%s' not supported between instances of '%s' and '%s'", op,
                        tpl_tv_type_name(a), tpl_tv_type_name(b));
}

int tpl_tv_compare(tpl_rt *r, const node *at, const char *op, tv a, tv b, int *cmp) {
    return compare_depth(r, at, op, a, b, cmp, 0);
}

/* --- str() and repr() ------------------------------------------------------------- */

static int repr_str(sbuf *b, tstr s) {
    bool has_single = memchr(s.p, '\'', s.n) != NULL, has_double = memchr(s.p, '"', s.n) != NULL;
    char q = has_single && !has_double ? '"' : '\'';
    if (tpl_sb_putc(b, q)) return -1;
    size_t i = 0;
    while (i < s.n) {
        size_t start = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        int rc;
        if (cp == (uint32_t)q || cp == '\\')
            rc = tpl_sb_putc(b, '\\') || tpl_sb_putc(b, (char)cp);
        else if (cp == '\n')
            rc = tpl_sb_puts(b, "\\n");
        else if (cp == '\r')
            rc = tpl_sb_puts(b, "\\r");
        else if (cp == '\t')
            rc = tpl_sb_puts(b, "\\t");
        else if (tpl_py_isprintable(cp))
            rc = tpl_sb_put(b, s.p + start, i - start);
        else if (cp < 0x100)
            rc = tpl_sb_printf(b, "\\x%02x", cp);
        else if (cp < 0x10000)
            rc = tpl_sb_printf(b, "\\u%04x", cp);
        else
            rc = tpl_sb_printf(b, "\\U%08x", cp);
        if (rc) return -1;
    }
    return tpl_sb_putc(b, q);
}

static int repr_depth(tpl_rt *r, tv v, sbuf *b, int depth, bool as_str);

static int repr_items(tpl_rt *r, const tlist *l, sbuf *b, int depth) {
    for (size_t i = 0; i < l->n; i++) {
        if (i && tpl_sb_puts(b, ", ")) return -1;
        if (repr_depth(r, l->v[i], b, depth + 1, false)) return -1;
    }
    return 0;
}

static int repr_depth(tpl_rt *r, tv v, sbuf *b, int depth, bool as_str) {
    if (depth > TPL_MAX_DEPTH)
        return tpl_rt_error(r, NULL, "maximum recursion depth exceeded while printing");
    char num[64];
    switch (v.kind) {
    case TV_UNDEF:
        return as_str ? 0 : tpl_sb_puts(b, "Undefined");
    case TV_NONE:
        return tpl_sb_puts(b, "None");
    case TV_BOOL:
        return tpl_sb_puts(b, v.u.b ? "True" : "False");
    case TV_INT:
        return tpl_sb_printf(b, "%" PRId64, v.u.i);
    case TV_FLOAT:
        tpl_fmt_float(v.u.f, num, sizeof num);
        return tpl_sb_puts(b, num);
    case TV_STR:
        if (as_str) return tpl_sb_put(b, v.u.s.p, v.u.s.n);
        if (v.sub == STR_MARKUP)
            return tpl_sb_puts(b, "Markup(") || repr_str(b, v.u.s) || tpl_sb_putc(b, ')');
        return repr_str(b, v.u.s);
    case TV_LIST: {
        const tlist *l = v.u.l;
        switch (v.sub) {
        case LIST_TUPLE:
            if (tpl_sb_putc(b, '(') || repr_items(r, l, b, depth)) return -1;
            return tpl_sb_puts(b, l->n == 1 ? ",)" : ")");
        case LIST_RANGE:
            if (l->step == 1)
                return tpl_sb_printf(b, "range(%" PRId64 ", %" PRId64 ")", l->start, l->stop);
            return tpl_sb_printf(b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", l->start,
                                 l->stop, l->step);
        case LIST_ITEMS:
        case LIST_KEYS:
        case LIST_VALUES:
            if (tpl_sb_puts(b, tpl_tv_type_name(v)) || tpl_sb_puts(b, "([") ||
                repr_items(r, l, b, depth))
                return -1;
            return tpl_sb_puts(b, "])");
        default:
            if (tpl_sb_putc(b, '[') || repr_items(r, l, b, depth)) return -1;
            return tpl_sb_putc(b, ']');
        }
    }
    case TV_DICT: {
        const tdict *d = v.u.d;
        if (tpl_sb_putc(b, '{')) return -1;
        for (size_t i = 0; i < d->n; i++) {
            if (i && tpl_sb_puts(b, ", ")) return -1;
            if (repr_depth(r, d->k[i], b, depth + 1, false) || tpl_sb_puts(b, ": ") ||
                repr_depth(r, d->v[i], b, depth + 1, false))
                return -1;
        }
        return tpl_sb_putc(b, '}');
    }
    case TV_GEN:
        return tpl_sb_printf(b, "<%s object>", v.u.g->type);
    case TV_NS: {
        const tvars *ns = &v.u.ns->attrs;
        if (tpl_sb_puts(b, "<Namespace {")) return -1;
        for (size_t i = 0; i < ns->n; i++) {
            if (i && tpl_sb_puts(b, ", ")) return -1;
            if (repr_str(b, ns->k[i]) || tpl_sb_puts(b, ": ") ||
                repr_depth(r, ns->v[i], b, depth + 1, false))
                return -1;
        }
        return tpl_sb_puts(b, "}>");
    }
    case TV_LOOP:
        return tpl_sb_printf(b, "<LoopContext %zu/%zu>", v.u.loop->index + 1, v.u.loop->items->n);
    case TV_MACRO:
        if (v.u.m->def->kind == N_MACRO) {
            if (tpl_sb_puts(b, "<Macro ") || repr_str(b, v.u.m->def->name)) return -1;
            return tpl_sb_putc(b, '>');
        }
        return tpl_sb_puts(b, "<Macro anonymous>");
    case TV_FUNC:
        return tpl_sb_printf(b, "<built-in method %s>", v.u.fn->name);
    }
    return 0;
}

int tpl_tv_to_str(tpl_rt *r, tv v, sbuf *b) {
    return repr_depth(r, v, b, 0, true);
}
int tpl_tv_repr(tpl_rt *r, tv v, sbuf *b) {
    return repr_depth(r, v, b, 0, false);
}

int tpl_tv_stringify(tpl_rt *r, tv v, tstr *out) {
    if (v.kind == TV_STR) {
        *out = v.u.s;
        return 0;
    }
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (tpl_tv_to_str(r, v, &b)) return -1;
    *out = tpl_sb_str(&b);
    return 0;
}

/* --- iteration, length ------------------------------------------------------------ */

tlist *tpl_str_chars(tpl_arena *a, tstr s) {
    tlist *l = tpl_tl_new(a, tpl_utf8_len(s));
    if (!l) return NULL;
    size_t i = 0, k = 0;
    while (i < s.n) {
        size_t start = i;
        tpl_utf8_next(s.p, s.n, &i);
        l->v[k++] = tv_str((tstr){s.p + start, i - start});
    }
    return l;
}

int tpl_tv_iterate(tpl_rt *r, const node *at, tv v, tlist **out) {
    tpl_arena *a = tpl_rt_arena(r);
    switch (v.kind) {
    case TV_LIST:
        *out = v.u.l;
        return 0;
    case TV_UNDEF:
        return (*out = tpl_tl_new(a, 0)) ? 0 : -1;
    case TV_STR: {
        if (!(*out = tpl_str_chars(a, v.u.s))) return -1;
        tv chars = tv_list(*out, LIST_PLAIN);
        if (tpl_taint_result(r, tpl_tv_tainted(v), v, &chars)) return -1;
        *out = chars.u.l;
        return 0;
    }
    case TV_DICT: {
        tlist *l = tpl_tl_new(a, v.u.d->n);
        if (!l) return -1;
        for (size_t i = 0; i < l->n; i++)
            l->v[i] = v.u.d->k[i];
        *out = l;
        return 0;
    }
    case TV_GEN: {
        tgen *g = v.u.g;
        if (tpl_rt_gen_check(r, at, v)) return -1;
        tlist *l = tpl_tl_new(a, g->src->n - g->pos);
        if (!l) return -1;
        for (size_t i = 0; i < l->n; i++)
            l->v[i] = g->src->v[g->pos + i];
        g->pos = g->src->n;
        *out = l;
        return 0;
    }
    default:
        return tpl_rt_error(r, at, "'%s' object is not iterable", tpl_tv_type_name(v));
    }
}

int tpl_tv_length(tpl_rt *r, const node *at, tv v, int64_t *n) {
    switch (v.kind) {
    case TV_UNDEF:
        *n = 0;
        return 0;
    case TV_STR:
        *n = (int64_t)tpl_utf8_len(v.u.s);
        return 0;
    case TV_LIST:
        *n = (int64_t)v.u.l->n;
        return 0;
    case TV_DICT:
        *n = (int64_t)v.u.d->n;
        return 0;
    case TV_LOOP:
        *n = (int64_t)v.u.loop->items->n;
        return 0;
    default:
        return tpl_rt_error(r, at, "object of type '%s' has no len()", tpl_tv_type_name(v));
    }
}

int tpl_tv_contains(tpl_rt *r, const node *at, tv c, tv item, bool *out) {
    *out = false;
    switch (c.kind) {
    case TV_UNDEF:
        return 0;
    case TV_STR:
        if (item.kind != TV_STR)
            return tpl_rt_error(r, at, "'in <string>' requires string as left operand, not %s",
                                tpl_tv_type_name(item));
        if (item.u.s.n == 0)
            *out = true;
        else if (item.u.s.n <= c.u.s.n)
            *out = memmem(c.u.s.p, c.u.s.n, item.u.s.p, item.u.s.n) != NULL;
        return 0;
    case TV_LIST:
        if (c.sub == LIST_KEYS && !hashable(item))
            return tpl_rt_error(r, at, "unhashable type: '%s'", tpl_tv_type_name(item));
        for (size_t i = 0; i < c.u.l->n && !*out; i++)
            if (tpl_tv_equal(r, c.u.l->v[i], item, out)) return -1;
        return 0;
    case TV_DICT: {
        if (!hashable(item))
            return tpl_rt_error(r, at, "unhashable type: '%s'", tpl_tv_type_name(item));
        tv dummy;
        return tpl_td_get(r, c.u.d, item, &dummy, out);
    }
    case TV_GEN: {
        tgen *g = c.u.g;
        if (tpl_rt_gen_check(r, at, c)) return -1;
        while (g->pos < g->src->n && !*out)
            if (tpl_tv_equal(r, g->src->v[g->pos++], item, out)) return -1;
        return 0;
    }
    default:
        return tpl_rt_error(r, at, "argument of type '%s' is not iterable", tpl_tv_type_name(c));
    }
}

/* --- slicing ---------------------------------------------------------------------- */

/* Byte offsets of each code point of s (plus the end), for non-ASCII strings. */
static size_t *cp_offsets(tpl_arena *a, tstr s, size_t *count) {
    size_t n = tpl_utf8_len(s);
    size_t *off = tpl_ar_alloc(a, (n + 1) * sizeof *off);
    if (!off) return NULL;
    size_t i = 0, k = 0;
    while (i < s.n) {
        off[k++] = i;
        tpl_utf8_next(s.p, s.n, &i);
    }
    off[k] = s.n;
    *count = n;
    return off;
}

static int slice_index(tv v, bool *none, int64_t *out) {
    *none = v.kind == TV_NONE;
    if (*none) return 0;
    if (!is_intlike(v)) return -1;
    *out = as_int(v);
    return 0;
}

/* obj[start:stop:step]. jinja2 compiles slices to plain Python subscription
 * (not its forgiving getitem), so anything but a str or list is an error. */
int tpl_tv_slice(tpl_rt *r, const node *at, tv obj, tv vstart, tv vstop, tv vstep, tv *out) {
    if (obj.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, obj);
    if (obj.kind == TV_DICT) return tpl_rt_error(r, at, "unhashable type: 'slice'");
    if (obj.kind != TV_STR &&
        !(obj.kind == TV_LIST &&
          (obj.sub == LIST_PLAIN || obj.sub == LIST_TUPLE || obj.sub == LIST_RANGE)))
        return tpl_rt_error(r, at, "'%s' object is not subscriptable", tpl_tv_type_name(obj));
    bool nstart, nstop, nstep;
    int64_t start = 0, stop = 0, step = 1;
    if (slice_index(vstart, &nstart, &start) || slice_index(vstop, &nstop, &stop) ||
        slice_index(vstep, &nstep, &step))
        return tpl_rt_error(r, at,
                            "slice indices must be integers or None or have an __index__ method");
    if (nstep) step = 1;
    if (step == 0) return tpl_rt_error(r, at, "slice step cannot be zero");
    tpl_arena *a = tpl_rt_arena(r);
    size_t count = 0, *off = NULL;
    bool ascii = true;
    if (obj.kind == TV_STR) {
        for (size_t i = 0; i < obj.u.s.n && ascii; i++)
            if ((unsigned char)obj.u.s.p[i] >= 0x80) ascii = false;
        if (ascii)
            count = obj.u.s.n;
        else if (!(off = cp_offsets(a, obj.u.s, &count)))
            return -1;
    } else {
        count = obj.u.l->n;
    }
    int64_t len = (int64_t)count;
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
    if (nstart)
        start = step < 0 ? upper : lower;
    else {
        if (start < 0) start += len;
        if (start < lower)
            start = lower;
        else if (start > upper)
            start = upper;
    }
    if (nstop)
        stop = step < 0 ? lower : upper;
    else {
        if (stop < 0) stop += len;
        if (stop < lower)
            stop = lower;
        else if (stop > upper)
            stop = upper;
    }
    size_t n = 0;
    if (step > 0 && stop > start) n = (size_t)((stop - start - 1) / step + 1);
    if (step < 0 && start > stop) n = (size_t)((start - stop - 1) / (-step) + 1);
    if (obj.kind == TV_LIST) {
        tlist *l = tpl_tl_new(a, n);
        if (!l) return -1;
        for (size_t i = 0; i < n; i++)
            l->v[i] = obj.u.l->v[start + (int64_t)i * step];
        *out = tv_list(l, obj.sub == LIST_TUPLE ? LIST_TUPLE : LIST_PLAIN);
        return 0;
    }
    if (step == 1) {
        size_t b0 = ascii ? (size_t)start : off[start];
        size_t b1 = ascii ? (size_t)(start + (int64_t)n) : off[start + (int64_t)n];
        *out = tv_str_as(obj, (tstr){obj.u.s.p + b0, b1 - b0});
        return 0;
    }
    sbuf b;
    tpl_sb_init(&b, a, TPL_MAX_OUTPUT);
    for (size_t i = 0; i < n; i++) {
        int64_t k = start + (int64_t)i * step;
        size_t b0 = ascii ? (size_t)k : off[k], b1 = ascii ? (size_t)k + 1 : off[k + 1];
        if (tpl_sb_put(&b, obj.u.s.p + b0, b1 - b0)) return -1;
    }
    *out = tv_str_as(obj, tpl_sb_str(&b));
    return 0;
}

/* --- JSON input -------------------------------------------------------------------- */

int tpl_tv_from_json(tpl_rt *r, json_t *j, tv *out, int depth) {
    if (depth > TPL_MAX_DEPTH) return tpl_rt_error(r, NULL, "context JSON nested too deeply");
    tpl_arena *a = tpl_rt_arena(r);
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        tdict *d = tpl_td_new(a, json_object_size(j));
        if (!d) return -1;
        const char *key;
        json_t *val;
        json_object_foreach(j, key, val) {
            d->k[d->n] = tv_str(tstr_c(key));
            if (tpl_tv_from_json(r, val, &d->v[d->n], depth + 1)) return -1;
            d->n++;
        }
        *out = tv_dict(d);
        return 0;
    }
    case JSON_ARRAY: {
        tlist *l = tpl_tl_new(a, json_array_size(j));
        if (!l) return -1;
        for (size_t i = 0; i < l->n; i++)
            if (tpl_tv_from_json(r, json_array_get(j, i), &l->v[i], depth + 1)) return -1;
        *out = tv_list(l, LIST_PLAIN);
        return 0;
    }
    case JSON_STRING:
        *out = tv_str((tstr){json_string_value(j), json_string_length(j)});
        return 0;
    case JSON_INTEGER:
        *out = tv_int((int64_t)json_integer_value(j));
        return 0;
    case JSON_REAL:
        *out = tv_float(json_real_value(j));
        return 0;
    case JSON_TRUE:
        *out = tv_bool(true);
        return 0;
    case JSON_FALSE:
        *out = tv_bool(false);
        return 0;
    default:
        *out = tv_none();
        return 0;
    }
}

/* --- arithmetic -------------------------------------------------------------------- */

static const char *op_symbol(int op) {
    return tpl_op_text[op];
}

static int type_error(tpl_rt *r, const node *at, int op, tv a, tv b) {
    if (op == OP_ADD && a.kind == TV_STR)
        return tpl_rt_error(r, at, "can only concatenate str (not \"%s\") to str",
                            tpl_tv_type_name(b));
    if (op == OP_ADD && a.kind == TV_LIST && (a.sub == LIST_PLAIN || a.sub == LIST_TUPLE))
        return tpl_rt_error(r, at, "can only concatenate %s (not \"%s\") to %s",
                            tpl_tv_type_name(a), tpl_tv_type_name(b), tpl_tv_type_name(a));
    return tpl_rt_error(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_symbol(op),
                        tpl_tv_type_name(a), tpl_tv_type_name(b));
}

static int overflow(tpl_rt *r, const node *at) {
    return tpl_rt_error(r, at, "integer overflow (values beyond 64 bits are not supported)");
}

static int repeat(tpl_rt *r, const node *at, tv seq, int64_t times, tv *out) {
    tpl_arena *a = tpl_rt_arena(r);
    if (times < 0) times = 0;
    if (seq.kind == TV_STR) {
        /* Nothing to repeat: no output limit would end 10^10 empty appends. */
        if (seq.u.s.n == 0) times = 0;
        if (seq.u.s.n && (uint64_t)times > TPL_MAX_OUTPUT / seq.u.s.n)
            return tpl_rt_error(r, at, "string repetition too large");
        sbuf b;
        tpl_sb_init(&b, a, TPL_MAX_OUTPUT);
        for (int64_t i = 0; i < times; i++)
            if (tpl_sb_put(&b, seq.u.s.p, seq.u.s.n)) return -1;
        *out = tv_str_as(seq, tpl_sb_str(&b));
        return 0;
    }
    size_t n = seq.u.l->n;
    if (n && (uint64_t)times > (TPL_RENDER_BUDGET / sizeof(tv)) / n)
        return tpl_rt_error(r, at, "list repetition too large");
    tlist *l = tpl_tl_new(a, n * (size_t)times);
    if (!l) return -1;
    for (size_t i = 0; i < l->n; i++)
        l->v[i] = seq.u.l->v[i % n];
    *out = tv_list(l, seq.sub == LIST_TUPLE ? LIST_TUPLE : LIST_PLAIN);
    return 0;
}

/* Python's float divmod (floor division and modulo with the divisor's sign). */
static void float_divmod(double vx, double wx, double *floordiv, double *mod) {
    double m = fmod(vx, wx);
    double div = (vx - m) / wx;
    if (m != 0) {
        if ((wx < 0) != (m < 0)) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = copysign(0.0, wx);
    }
    double fd;
    if (div != 0) {
        fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
    } else {
        fd = copysign(0.0, vx / wx);
    }
    *floordiv = fd;
    *mod = m;
}

int tpl_tv_binop(tpl_rt *r, const node *at, int op, tv a, tv b, tv *out) {
    /* str % x formats even an Undefined x (str's own % runs first) */
    if (op == OP_MOD && a.kind == TV_STR) return tpl_format_percent(r, at, a, b, out);
    if (a.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, a);
    if (b.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, b);
    tpl_arena *ar = tpl_rt_arena(r);
    if (is_num(a) && is_num(b)) {
        bool ints = is_intlike(a) && is_intlike(b);
        int64_t x = ints ? as_int(a) : 0, y = ints ? as_int(b) : 0, z;
        double fx = as_float(a), fy = as_float(b);
        switch (op) {
        case OP_ADD:
            if (!ints) break;
            if (__builtin_add_overflow(x, y, &z)) return overflow(r, at);
            *out = tv_int(z);
            return 0;
        case OP_SUB:
            if (!ints) break;
            if (__builtin_sub_overflow(x, y, &z)) return overflow(r, at);
            *out = tv_int(z);
            return 0;
        case OP_MUL:
            if (!ints) break;
            if (__builtin_mul_overflow(x, y, &z)) return overflow(r, at);
            *out = tv_int(z);
            return 0;
        case OP_DIV:
            if (fy == 0) return tpl_rt_error(r, at, "division by zero");
            *out = tv_float(fx / fy);
            return 0;
        case OP_FLOORDIV:
        case OP_MOD:
            if (ints) {
                if (y == 0)
                    return tpl_rt_error(r, at,
                                        op == OP_MOD ? "integer modulo by zero"
                                                     : "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) return overflow(r, at);
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q -= 1;
                    m += y;
                }
                *out = tv_int(op == OP_MOD ? m : q);
                return 0;
            } else {
                if (fy == 0)
                    return tpl_rt_error(
                        r, at, op == OP_MOD ? "float modulo" : "float floor division by zero");
                double fd, m;
                float_divmod(fx, fy, &fd, &m);
                *out = tv_float(op == OP_MOD ? m : fd);
                return 0;
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if (e & 1 && __builtin_mul_overflow(acc, base, &acc)) return overflow(r, at);
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow(r, at);
                }
                *out = tv_int(acc);
                return 0;
            }
            if (fx == 0 && fy < 0)
                return tpl_rt_error(r, at, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy))
                return tpl_rt_error(r, at,
                                    "negative number cannot be raised to a fractional power");
            *out = tv_float(pow(fx, fy));
            if (isinf(out->u.f) && isfinite(fx) && isfinite(fy))
                return tpl_rt_error(r, at,
                                    "(34, 'Numerical result out of range')"); /* OverflowError */
            return 0;
        }
        switch (op) {
        case OP_ADD:
            *out = tv_float(fx + fy);
            return 0;
        case OP_SUB:
            *out = tv_float(fx - fy);
            return 0;
        case OP_MUL:
            *out = tv_float(fx * fy);
            return 0;
        }
        return type_error(r, at, op, a, b);
    }
    if (op == OP_ADD) {
        if (a.kind == TV_STR && b.kind == TV_STR) {
            /* Markup + str escapes the str, str + Markup too; the sum is Markup */
            bool markup = tv_is_markup(a) || tv_is_markup(b);
            if (markup && (tpl_escape(r, a, &a) || tpl_escape(r, b, &b))) return -1;
            sbuf s;
            tpl_sb_init(&s, ar, TPL_MAX_OUTPUT);
            if (tpl_sb_put(&s, a.u.s.p, a.u.s.n) || tpl_sb_put(&s, b.u.s.p, b.u.s.n)) return -1;
            *out = markup ? tv_markup(tpl_sb_str(&s)) : tv_str(tpl_sb_str(&s));
            return 0;
        }
        if (a.kind == TV_LIST && b.kind == TV_LIST &&
            ((a.sub == LIST_PLAIN && b.sub == LIST_PLAIN) ||
             (a.sub == LIST_TUPLE && b.sub == LIST_TUPLE))) {
            tlist *l = tpl_tl_new(ar, a.u.l->n + b.u.l->n);
            if (!l) return -1;
            for (size_t i = 0; i < a.u.l->n; i++)
                l->v[i] = a.u.l->v[i];
            for (size_t i = 0; i < b.u.l->n; i++)
                l->v[a.u.l->n + i] = b.u.l->v[i];
            *out = tv_list(l, a.sub);
            return 0;
        }
    }
    if (op == OP_MUL) {
        bool seq_a =
            a.kind == TV_STR || (a.kind == TV_LIST && (a.sub == LIST_PLAIN || a.sub == LIST_TUPLE));
        bool seq_b =
            b.kind == TV_STR || (b.kind == TV_LIST && (b.sub == LIST_PLAIN || b.sub == LIST_TUPLE));
        if (seq_a && is_intlike(b)) return repeat(r, at, a, as_int(b), out);
        if (seq_b && is_intlike(a)) return repeat(r, at, b, as_int(a), out);
    }
    return type_error(r, at, op, a, b);
}
