/* Chat-template filters: jinja2's built-in filters (jinja2/filters.py) that
 * chat templates use, with their argument names, defaults and quirks -
 * map/select/reject/selectattr/rejectattr/unique/items return one-shot
 * generators, `title` splits words at "-", spaces and brackets, `int` reads
 * "4.7" as 4, `default` only replaces Undefined unless asked, `safe` and
 * `escape` make Markup. `tojson` is Hugging Face's override (json.dumps with
 * ensure_ascii=False, indent, separators, sort_keys). Filters jinja2 has but
 * chat templates do not use (groupby, truncate, wordcount, round, batch,
 * center, ...) are absent: using one is a parse error. Which filters are here,
 * and why those no template of the test corpus uses are kept, is the table in
 * tests/data/templates/README.md. */
#include "chat/template_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tv make_gen(tpl_rt *r, tlist *l, const char *type) {
    tgen *g = tpl_ar_alloc(tpl_rt_arena(r), sizeof *g);
    if (!g) return tv_undef("out of memory");
    g->src = l;
    g->type = type;
    tv v = {TV_GEN, 0, {.g = g}, NULL};
    return v;
}

static int str_arg(tpl_rt *r, tv v, tstr *out) {
    return tpl_tv_stringify(r, v, out);
}

/* --- attribute getters (make_attrgetter) ------------------------------------------------ */

typedef struct {
    int nparts;
    tv parts[16];
    bool lower; /* postprocess: ignore_case */
    bool has_default;
    tv dflt;
} getter;

static int getter_init(tpl_rt *r, const node *at, getter *gt, tv attribute, bool lower) {
    memset(gt, 0, sizeof *gt);
    gt->lower = lower;
    if (attribute.kind == TV_NONE || attribute.kind == TV_UNDEF) return 0;
    if (attribute.kind != TV_STR) {
        gt->parts[gt->nparts++] = attribute;
        return 0;
    }
    tstr s = attribute.u.s;
    size_t start = 0;
    for (size_t i = 0; i <= s.n; i++) {
        if (i < s.n && s.p[i] != '.') continue;
        if (gt->nparts >= 16) return tpl_rt_error(r, at, "attribute path too long");
        tstr part = {s.p + start, i - start};
        bool digits = part.n > 0;
        int64_t v = 0;
        for (size_t k = 0; k < part.n && digits; k++) {
            if (part.p[k] < '0' || part.p[k] > '9' || v > INT64_MAX / 10)
                digits = false;
            else
                v = v * 10 + (part.p[k] - '0');
        }
        gt->parts[gt->nparts++] = digits ? tv_int(v) : tv_str(part);
        start = i + 1;
    }
    return 0;
}

static int getter_get(tpl_rt *r, const node *at, const getter *gt, tv item, tv *out) {
    for (int i = 0; i < gt->nparts; i++) {
        if (tpl_rt_getitem(r, at, item, gt->parts[i], &item)) return -1;
        if (gt->has_default && item.kind == TV_UNDEF) item = gt->dflt;
    }
    if (gt->lower && item.kind == TV_STR) {
        tstr low;
        if (tpl_str_lower(r, item.u.s, &low)) return -1;
        item = tv_str(low);
    }
    *out = item;
    return 0;
}

/* --- sorting (stable merge sort with a fallible comparison) ------------------------------ */

static int sort_less(tpl_rt *r, const node *at, tv a, tv b, bool reverse, bool *less) {
    int c;
    if (tpl_tv_compare(r, at, "<", reverse ? b : a, reverse ? a : b, &c)) return -1;
    *less = c < 0;
    return 0;
}

static int merge_sort(tpl_rt *r, const node *at, size_t *idx, size_t *tmp, size_t n, const tv *keys,
                      bool reverse) {
    if (n < 2) return 0;
    size_t h = n / 2;
    if (merge_sort(r, at, idx, tmp, h, keys, reverse) ||
        merge_sort(r, at, idx + h, tmp, n - h, keys, reverse))
        return -1;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        bool less;
        if (sort_less(r, at, keys[idx[j]], keys[idx[i]], reverse, &less)) return -1;
        tmp[k++] = less ? idx[j++] : idx[i++];
    }
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return 0;
}

/* Sorts items by keys (stable, as Python's sorted); returns a new list. */
static int sort_by(tpl_rt *r, const node *at, const tlist *items, const tv *keys, bool reverse,
                   tlist **out) {
    tpl_arena *ar = tpl_rt_arena(r);
    size_t n = items->n;
    size_t *idx = tpl_ar_alloc(ar, (n + 1) * sizeof *idx),
           *tmp = tpl_ar_alloc(ar, (n + 1) * sizeof *tmp);
    tlist *l = tpl_tl_new(ar, n);
    if (!idx || !tmp || !l) return -1;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    if (merge_sort(r, at, idx, tmp, n, keys, reverse)) return -1;
    for (size_t i = 0; i < n; i++)
        l->v[i] = items->v[idx[i]];
    *out = l;
    return 0;
}

/* --- string filters ----------------------------------------------------------------------- */

static int f_string(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (no_args(r, at, "string", a)) return -1;
    tstr s;
    if (str_arg(r, v, &s)) return -1;
    *out = tv_str_as(v, s); /* soft_str: a Markup stays one */
    return 0;
}

static int f_upper(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tstr s, u;
    if (no_args(r, at, "upper", a) || str_arg(r, v, &s) || tpl_str_upper(r, s, &u)) return -1;
    *out = tv_str_as(v, u);
    return 0;
}

static int f_lower(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tstr s, u;
    if (no_args(r, at, "lower", a) || str_arg(r, v, &s) || tpl_str_lower(r, s, &u)) return -1;
    *out = tv_str_as(v, u);
    return 0;
}

static int f_capitalize(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tstr s, u;
    if (no_args(r, at, "capitalize", a) || str_arg(r, v, &s) || tpl_str_capitalize(r, s, &u))
        return -1;
    *out = tv_str_as(v, u);
    return 0;
}

static bool title_sep(uint32_t cp) {
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || tpl_py_isspace(cp);
}

/* jinja2's title: item[0].upper() + item[1:].lower() for each word between
 * separators (so a word's lower() sees only the word). */
static int f_title(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tstr s;
    if (no_args(r, at, "title", a) || str_arg(r, v, &s)) return -1;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    size_t i = 0;
    while (i < s.n) {
        size_t start = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        if (title_sep(cp)) {
            if (tpl_sb_put(&b, s.p + start, i - start)) return -1;
            continue;
        }
        size_t end = i;
        while (end < s.n) {
            size_t k = end;
            if (title_sep(tpl_utf8_next(s.p, s.n, &k))) break;
            end = k;
        }
        tstr rest = {s.p + i, end - i};
        if (tpl_py_upper_cp(&b, cp) || tpl_str_lower_from(&b, rest, 0)) return -1;
        i = end;
    }
    *out = tv_str(tpl_sb_str(&b));
    return 0;
}

static int f_trim(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("trim", "chars");
    tstr s, t;
    if (str_arg(r, v, &s) || tpl_str_strip(r, s, g[0] ? p[0] : tv_none(), 3, &t)) return -1;
    *out = tv_str_as(v, t);
    return 0;
}

static int f_replace(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("replace", "old", "new", "count");
    if (!g[0] || !g[1]) return tpl_rt_error(r, at, "replace() missing required arguments");
    tstr s, old, rep, t;
    int64_t count = -1;
    if (g[2] && p[2].kind != TV_NONE) {
        if (p[2].kind != TV_INT && p[2].kind != TV_BOOL)
            return tpl_rt_error(r, at, "'%s' object cannot be interpreted as an integer",
                                tpl_tv_type_name(p[2]));
        count = p[2].kind == TV_BOOL ? p[2].u.b : p[2].u.i;
    }
    if (str_arg(r, v, &s) || str_arg(r, p[0], &old) || str_arg(r, p[1], &rep) ||
        tpl_str_replace(r, at, s, old, rep, count, &t))
        return -1;
    *out = tv_str(t);
    return 0;
}

/* escape, forceescape and safe make Markup strings, which print as they are
 * (autoescaping is off in chat templates) but escape what is added to them. */
static int f_escape(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (no_args(r, at, "escape", a)) return -1;
    return tpl_escape(r, v, out);
}

static int f_safe(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tstr s;
    if (no_args(r, at, "safe", a) || str_arg(r, v, &s)) return -1;
    *out = tv_markup(s);
    return 0;
}

static int f_indent(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("indent", "width", "first", "blank");
    tstr s, ind;
    /* jinja2 does `s += "\n"` on the value itself: only strings survive that */
    if (v.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, v);
    if (v.kind != TV_STR)
        return tpl_rt_error(r, at, "indent needs a string, not %s", tpl_tv_type_name(v));
    s = v.u.s;
    sbuf ib;
    tpl_sb_init(&ib, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (g[0] && p[0].kind == TV_STR) {
        ind = p[0].u.s;
    } else {
        int64_t w = 4;
        if (g[0]) {
            if (p[0].kind != TV_INT && p[0].kind != TV_BOOL)
                return tpl_rt_error(r, at, "indent width must be an integer or a string");
            w = p[0].kind == TV_BOOL ? p[0].u.b : p[0].u.i;
        }
        if (w > 4096) return tpl_rt_error(r, at, "indent width too large");
        for (int64_t i = 0; i < w; i++)
            if (tpl_sb_putc(&ib, ' ')) return -1;
        ind = tpl_sb_str(&ib);
    }
    bool first = g[1] && tpl_tv_truthy(p[1]), blank = g[2] && tpl_tv_truthy(p[2]);
    /* jinja2: s += "\n"; lines = s.splitlines(); indent all lines but the first
     * (blank ones too when asked) */
    sbuf withnl;
    tpl_sb_init(&withnl, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (tpl_sb_put(&withnl, s.p, s.n) || tpl_sb_putc(&withnl, '\n')) return -1;
    tlist *lines;
    if (tpl_str_splitlines(r, tpl_sb_str(&withnl), false, &lines)) return -1;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (first && tpl_sb_put(&b, ind.p, ind.n)) return -1;
    for (size_t i = 0; i < lines->n; i++) {
        tstr line = lines->v[i].u.s;
        if (i) {
            if (tpl_sb_putc(&b, '\n')) return -1;
            if ((blank || line.n) && tpl_sb_put(&b, ind.p, ind.n)) return -1;
        }
        if (tpl_sb_put(&b, line.p, line.n)) return -1;
    }
    *out = tv_str_as(v, tpl_sb_str(&b));
    return 0;
}

static int f_format(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tstr s;
    if (str_arg(r, v, &s)) return -1;
    tv args;
    if (a->nk) {
        if (a->n)
            return tpl_rt_error(r, at,
                                "can't handle positional and keyword arguments at the same time");
        tdict *d = tpl_td_new(tpl_rt_arena(r), (size_t)a->nk);
        if (!d) return -1;
        for (int i = 0; i < a->nk; i++)
            if (tpl_td_set(r, d, tv_str(a->kname[i]), a->kval[i])) return -1;
        args = tv_dict(d);
    } else {
        tlist *l = tpl_tl_new(tpl_rt_arena(r), (size_t)a->n);
        if (!l) return -1;
        for (int i = 0; i < a->n; i++)
            l->v[i] = a->pos[i];
        args = tv_list(l, LIST_TUPLE);
    }
    return tpl_format_percent(r, at, tv_str_as(v, s), args, out);
}

/* --- sequence filters ---------------------------------------------------------------------- */

static int f_length(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    int64_t n;
    if (no_args(r, at, "length", a) || tpl_tv_length(r, at, v, &n)) return -1;
    *out = tv_int(n);
    return 0;
}

static int f_list(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    tlist *items;
    if (no_args(r, at, "list", a) || tpl_tv_iterate(r, at, v, &items)) return -1;
    tlist *l = tpl_tl_new(tpl_rt_arena(r), items->n);
    if (!l) return -1;
    for (size_t i = 0; i < items->n; i++)
        l->v[i] = items->v[i];
    *out = tv_list(l, LIST_PLAIN);
    return 0;
}

static int f_first(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (no_args(r, at, "first", a)) return -1;
    if (v.kind == TV_GEN) {
        tgen *gen = v.u.g;
        if (tpl_rt_gen_check(r, at, v)) return -1;
        if (gen->pos < gen->src->n)
            *out = gen->src->v[gen->pos++];
        else
            *out = tpl_rt_undef(r, "No first item, sequence was empty.");
        return 0;
    }
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    *out = items->n ? items->v[0] : tpl_rt_undef(r, "No first item, sequence was empty.");
    return 0;
}

static int f_last(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (no_args(r, at, "last", a)) return -1;
    if (v.kind == TV_GEN)
        return tpl_rt_error(r, at, "'%s' object is not reversible", tpl_tv_type_name(v));
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    *out = items->n ? items->v[items->n - 1] : tpl_rt_undef(r, "No last item, sequence was empty.");
    return 0;
}

static int f_reverse(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (no_args(r, at, "reverse", a)) return -1;
    if (v.kind == TV_STR) return tpl_tv_slice(r, at, v, tv_none(), tv_none(), tv_int(-1), out);
    bool iterator = v.kind != TV_GEN;
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    tlist *l = tpl_tl_new(tpl_rt_arena(r), items->n);
    if (!l) return -1;
    for (size_t i = 0; i < items->n; i++)
        l->v[i] = items->v[items->n - 1 - i];
    /* reversed() of a sequence is an iterator; of a generator, jinja2 makes a list */
    *out =
        iterator
            ? make_gen(r, l, v.kind == TV_DICT ? "dict_reversekeyiterator" : "list_reverseiterator")
            : tv_list(l, LIST_PLAIN);
    return 0;
}

static int f_join(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("join", "d", "attribute");
    tstr sep = {"", 0};
    if (g[0] && str_arg(r, p[0], &sep)) return -1;
    getter gt;
    if (getter_init(r, at, &gt, g[1] ? p[1] : tv_none(), false)) return -1;
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    for (size_t i = 0; i < items->n; i++) {
        tv item = items->v[i];
        if (gt.nparts && getter_get(r, at, &gt, item, &item)) return -1;
        if (i && tpl_sb_put(&b, sep.p, sep.n)) return -1;
        if (tpl_tv_to_str(r, item, &b)) return -1;
    }
    *out = tv_str(tpl_sb_str(&b));
    return 0;
}

static int f_default(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("default", "default_value", "boolean");
    bool boolean = g[1] && tpl_tv_truthy(p[1]);
    if (v.kind == TV_UNDEF || (boolean && !tpl_tv_truthy(v)))
        *out = g[0] ? p[0] : tv_str((tstr){"", 0});
    else
        *out = v;
    return 0;
}

static tv empty_gen(tpl_rt *r) {
    tlist *l = tpl_tl_new(tpl_rt_arena(r), 0);
    return l ? make_gen(r, l, "generator") : tv_undef("out of memory");
}

static int f_map(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (!tpl_tv_truthy(v)) { /* jinja2: `if value:` before anything else */
        *out = empty_gen(r);
        return 0;
    }
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    tlist *l = tpl_tl_new(tpl_rt_arena(r), items->n);
    if (!l) return -1;
    if (a->n == 0) {
        getter gt;
        tv attr = tv_none(), dflt = tv_none();
        bool has_attr = false;
        for (int i = 0; i < a->nk; i++) {
            if (tpl_tstr_eqc(a->kname[i], "attribute")) {
                attr = a->kval[i];
                has_attr = true;
            } else if (tpl_tstr_eqc(a->kname[i], "default")) {
                dflt = a->kval[i];
            } else {
                return tpl_rt_error(r, at, "Unexpected keyword argument '%.*s'", (int)a->kname[i].n,
                                    a->kname[i].p);
            }
        }
        if (!has_attr) return tpl_rt_error(r, at, "map requires a filter argument");
        if (getter_init(r, at, &gt, attr, false)) return -1;
        if (dflt.kind != TV_NONE) {
            gt.has_default = true;
            gt.dflt = dflt;
        }
        for (size_t i = 0; i < items->n; i++)
            if (getter_get(r, at, &gt, items->v[i], &l->v[i])) return -1;
    } else {
        if (a->pos[0].kind != TV_STR)
            return tpl_rt_error(r, at, "map filter name must be a string");
        targs rest = *a;
        rest.pos++;
        rest.n--;
        for (size_t i = 0; i < items->n; i++)
            if (tpl_rt_call_filter_named(r, at, a->pos[0].u.s, items->v[i], &rest, &l->v[i]))
                return -1;
    }
    *out = make_gen(r, l, "generator");
    return 0;
}

/* select/reject/selectattr/rejectattr (prepare_select_or_reject). */
static int select_common(tpl_rt *r, const node *at, tv v, targs *a, bool attr, bool want, tv *out) {
    if (!tpl_tv_truthy(v)) {
        *out = empty_gen(r);
        return 0;
    }
    getter gt;
    int off = 0;
    if (attr) {
        if (a->n < 1) return tpl_rt_error(r, at, "Missing parameter for attribute name");
        if (getter_init(r, at, &gt, a->pos[0], false)) return -1;
        off = 1;
    }
    bool has_test = a->n > off;
    targs rest = *a;
    const int skip = off + (has_test ? 1 : 0);
    if (skip > 0) { /* with no arguments pos may be NULL: no pointer arithmetic on it */
        rest.pos += skip;
        rest.n -= skip;
    }
    if (has_test && a->pos[off].kind != TV_STR)
        return tpl_rt_error(r, at, "test name must be a string");
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    tlist *l = tpl_tl_new(tpl_rt_arena(r), items->n);
    if (!l) return -1;
    l->n = 0;
    for (size_t i = 0; i < items->n; i++) {
        tv x = items->v[i];
        if (attr && getter_get(r, at, &gt, x, &x)) return -1;
        bool ok;
        if (has_test) {
            if (tpl_rt_call_test_named(r, at, a->pos[off].u.s, x, &rest, &ok)) return -1;
        } else {
            ok = tpl_tv_truthy(x);
        }
        if (ok == want) l->v[l->n++] = items->v[i];
    }
    *out = make_gen(r, l, "generator");
    return 0;
}

static int f_select(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    return select_common(r, at, v, a, false, true, out);
}
static int f_reject(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    return select_common(r, at, v, a, false, false, out);
}
static int f_selectattr(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    return select_common(r, at, v, a, true, true, out);
}
static int f_rejectattr(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    return select_common(r, at, v, a, true, false, out);
}

static int f_sort(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("sort", "reverse", "case_sensitive", "attribute");
    bool reverse = g[0] && tpl_tv_truthy(p[0]), cs = g[1] && tpl_tv_truthy(p[1]);
    getter gt;
    if (getter_init(r, at, &gt, g[2] ? p[2] : tv_none(), !cs)) return -1;
    tlist *items, *sorted;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    tv *keys = tpl_ar_alloc(tpl_rt_arena(r), (items->n + 1) * sizeof *keys);
    if (!keys) return -1;
    for (size_t i = 0; i < items->n; i++)
        if (getter_get(r, at, &gt, items->v[i], &keys[i])) return -1;
    if (sort_by(r, at, items, keys, reverse, &sorted)) return -1;
    *out = tv_list(sorted, LIST_PLAIN);
    return 0;
}

static int f_dictsort(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("dictsort", "case_sensitive", "by", "reverse");
    bool cs = g[0] && tpl_tv_truthy(p[0]), reverse = g[2] && tpl_tv_truthy(p[2]);
    int pos = 0;
    if (g[1]) {
        if (p[1].kind == TV_STR && tpl_tstr_eqc(p[1].u.s, "value"))
            pos = 1;
        else if (!(p[1].kind == TV_STR && tpl_tstr_eqc(p[1].u.s, "key")))
            return tpl_rt_error(r, at, "You can only sort by either \"key\" or \"value\"");
    }
    if (v.kind != TV_DICT) return tpl_rt_error(r, at, "dictsort needs a mapping");
    tpl_arena *ar = tpl_rt_arena(r);
    tlist *pairs = tpl_tl_new(ar, v.u.d->n);
    tv *keys = tpl_ar_alloc(ar, (v.u.d->n + 1) * sizeof *keys);
    if (!pairs || !keys) return -1;
    for (size_t i = 0; i < v.u.d->n; i++) {
        tlist *t = tpl_tl_new(ar, 2);
        if (!t) return -1;
        t->v[0] = v.u.d->k[i];
        t->v[1] = v.u.d->v[i];
        pairs->v[i] = tv_list(t, LIST_TUPLE);
        keys[i] = t->v[pos];
        if (!cs && keys[i].kind == TV_STR) {
            tstr low;
            if (tpl_str_lower(r, keys[i].u.s, &low)) return -1;
            keys[i] = tv_str(low);
        }
    }
    tlist *sorted;
    if (sort_by(r, at, pairs, keys, reverse, &sorted)) return -1;
    *out = tv_list(sorted, LIST_PLAIN);
    return 0;
}

static int f_unique(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("unique", "case_sensitive", "attribute");
    bool cs = g[0] && tpl_tv_truthy(p[0]);
    getter gt;
    if (getter_init(r, at, &gt, g[1] ? p[1] : tv_none(), !cs)) return -1;
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    tpl_arena *ar = tpl_rt_arena(r);
    tlist *l = tpl_tl_new(ar, items->n);
    tv *seen = tpl_ar_alloc(ar, (items->n + 1) * sizeof *seen);
    if (!l || !seen) return -1;
    l->n = 0;
    size_t nseen = 0;
    for (size_t i = 0; i < items->n; i++) {
        tv key;
        if (getter_get(r, at, &gt, items->v[i], &key)) return -1;
        if (key.kind == TV_DICT || (key.kind == TV_LIST && key.sub != LIST_TUPLE))
            return tpl_rt_error(r, at, "unhashable type: '%s'", tpl_tv_type_name(key));
        bool dup = false;
        for (size_t k = 0; k < nseen && !dup; k++)
            if (tpl_tv_equal(r, seen[k], key, &dup)) return -1;
        if (dup) continue;
        seen[nseen++] = key;
        l->v[l->n++] = items->v[i];
    }
    *out = make_gen(r, l, "generator");
    return 0;
}

static int min_max(tpl_rt *r, const node *at, tv v, targs *a, bool want_max, tv *out) {
    BIND(want_max ? "max" : "min", "case_sensitive", "attribute");
    bool cs = g[0] && tpl_tv_truthy(p[0]);
    getter gt;
    if (getter_init(r, at, &gt, g[1] ? p[1] : tv_none(), !cs)) return -1;
    tlist *items;
    if (tpl_tv_iterate(r, at, v, &items)) return -1;
    if (items->n == 0) {
        *out = tpl_rt_undef(r, "No aggregated item, sequence was empty.");
        return 0;
    }
    size_t best = 0;
    tv best_key;
    if (getter_get(r, at, &gt, items->v[0], &best_key)) return -1;
    for (size_t i = 1; i < items->n; i++) {
        tv key;
        int c;
        if (getter_get(r, at, &gt, items->v[i], &key) ||
            tpl_tv_compare(r, at, want_max ? ">" : "<", key, best_key, &c))
            return -1;
        if (want_max ? c > 0 : c < 0) {
            best = i;
            best_key = key;
        }
    }
    *out = items->v[best];
    return 0;
}

static int f_max(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    return min_max(r, at, v, a, true, out);
}
static int f_min(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    return min_max(r, at, v, a, false, out);
}

static int f_items(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    if (no_args(r, at, "items", a)) return -1;
    tpl_arena *ar = tpl_rt_arena(r);
    if (v.kind == TV_UNDEF) {
        *out = empty_gen(r);
        return 0;
    }
    if (v.kind != TV_DICT) return tpl_rt_error(r, at, "Can only get item pairs from a mapping.");
    tlist *l = tpl_tl_new(ar, v.u.d->n);
    if (!l) return -1;
    for (size_t i = 0; i < l->n; i++) {
        tlist *t = tpl_tl_new(ar, 2);
        if (!t) return -1;
        t->v[0] = v.u.d->k[i];
        t->v[1] = v.u.d->v[i];
        l->v[i] = tv_list(t, LIST_TUPLE);
    }
    *out = make_gen(r, l, "generator");
    return 0;
}

/* --- numbers -------------------------------------------------------------------------------- */

/* int(f) inside do_int: NaN is a ValueError (the default); infinity an
 * OverflowError, caught only on the string path; beyond 64 bits is this
 * interpreter's limit. */
static int float_to_int(tpl_rt *r, const node *at, double f, tv dflt, bool from_str, tv *out) {
    if (isnan(f) || (isinf(f) && from_str)) {
        *out = dflt;
        return 0;
    }
    if (isinf(f)) return tpl_rt_error(r, at, "cannot convert float infinity to integer");
    if (fabs(f) >= 9.2e18)
        return tpl_rt_error(r, at, "integer overflow (values beyond 64 bits are not supported)");
    *out = tv_int((int64_t)f);
    return 0;
}

static int f_int(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("int", "default", "base");
    tv dflt = g[0] ? p[0] : tv_int(0);
    if (v.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, v); /* Undefined.__int__ raises */
    int base = 10;
    if (g[1]) {
        if (p[1].kind != TV_INT) return tpl_rt_error(r, at, "int() base must be an integer");
        base = (int)p[1].u.i;
    }
    switch (v.kind) {
    case TV_INT:
        *out = v;
        return 0;
    case TV_BOOL:
        *out = tv_int(v.u.b);
        return 0;
    case TV_FLOAT:
        return float_to_int(r, at, v.u.f, dflt, false, out);
    case TV_STR: {
        int64_t i;
        double f;
        if (tpl_py_parse_int(v.u.s, base, &i) == 0)
            *out = tv_int(i);
        else if (tpl_py_parse_float(v.u.s, &f) == 0)
            return float_to_int(r, at, f, dflt, true, out);
        else
            *out = dflt;
        return 0;
    }
    default:
        *out = dflt;
        return 0;
    }
}

static int f_float(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("float", "default");
    tv dflt = g[0] ? p[0] : tv_float(0.0);
    if (v.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, v);
    double f;
    switch (v.kind) {
    case TV_FLOAT:
        *out = v;
        return 0;
    case TV_INT:
        *out = tv_float((double)v.u.i);
        return 0;
    case TV_BOOL:
        *out = tv_float(v.u.b);
        return 0;
    case TV_STR:
        *out = tpl_py_parse_float(v.u.s, &f) == 0 ? tv_float(f) : dflt;
        return 0;
    default:
        *out = dflt;
        return 0;
    }
}

/* --- tojson ----------------------------------------------------------------------------------- */

static int f_tojson(tpl_rt *r, const node *at, tv v, targs *a, tv *out) {
    BIND("tojson", "ensure_ascii", "indent", "separators", "sort_keys");
    json_opts o = {0};
    o.ensure_ascii = g[0] && tpl_tv_truthy(p[0]);
    o.sort_keys = g[3] && tpl_tv_truthy(p[3]);
    sbuf ib;
    tpl_sb_init(&ib, tpl_rt_arena(r), 1 << 16);
    if (g[1] && p[1].kind != TV_NONE) {
        o.has_indent = true;
        if (p[1].kind == TV_STR) {
            o.indent = p[1].u.s;
        } else if (p[1].kind == TV_INT || p[1].kind == TV_BOOL) {
            int64_t w = p[1].kind == TV_BOOL ? p[1].u.b : p[1].u.i;
            if (w > 4096) return tpl_rt_error(r, at, "tojson indent too large");
            for (int64_t i = 0; i < w; i++)
                if (tpl_sb_putc(&ib, ' ')) return -1;
            o.indent = tpl_sb_str(&ib);
        } else {
            return tpl_rt_error(r, at, "tojson indent must be an integer or a string");
        }
    }
    o.item_sep = tstr_c(o.has_indent ? "," : ", ");
    o.key_sep = tstr_c(": ");
    if (g[2] && p[2].kind != TV_NONE) {
        if (p[2].kind != TV_LIST || p[2].u.l->n != 2 || p[2].u.l->v[0].kind != TV_STR ||
            p[2].u.l->v[1].kind != TV_STR)
            return tpl_rt_error(r, at, "tojson separators must be a pair of strings");
        o.item_sep = p[2].u.l->v[0].u.s;
        o.key_sep = p[2].u.l->v[1].u.s;
    }
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), TPL_MAX_OUTPUT);
    if (tpl_json_dumps(r, at, v, &o, &b)) return -1;
    *out = tv_str(tpl_sb_str(&b));
    return 0;
}

/* --- table -------------------------------------------------------------------------------------
 */

static const struct {
    const char *name;
    tpl_filter_fn fn;
} filters[] = {
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
};

bool tpl_filter_is_lazy(tpl_filter_fn f) {
    return f == f_map || f == f_select || f == f_reject || f == f_selectattr || f == f_rejectattr ||
           f == f_unique || f == f_items;
}

tpl_filter_fn tpl_filter_find(tstr name) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (tpl_tstr_eqc(name, filters[i].name)) return filters[i].fn;
    return NULL;
}
