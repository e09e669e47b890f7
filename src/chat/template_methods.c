/* Chat-template methods and globals: looking up the Python methods that
 * templates call (msg.get('x'), d.items(), xs.count(1); str's are in
 * template_str.c), the globals of Hugging Face's environment (range, dict,
 * namespace, raise_exception, strftime_now), and the argument binder every
 * built-in uses. As in jinja2's ImmutableSandbox, methods that would mutate a
 * list or dict (append, pop, update, ...) are refused. */
#include "chat/template_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- argument binding ---------------------------------------------------------------- */

int tpl_args_bind(tpl_rt *r, const node *at, const char *fname, targs *a, const char *const *names,
                  int nnames, tv *vals, bool *given) {
    for (int i = 0; i < nnames; i++)
        given[i] = false;
    if (a->n > nnames)
        return tpl_rt_error(r, at, "%s() takes at most %d argument%s (%d given)", fname, nnames,
                            nnames == 1 ? "" : "s", a->n);
    for (int i = 0; i < a->n; i++) {
        vals[i] = a->pos[i];
        given[i] = true;
    }
    for (int k = 0; k < a->nk; k++) {
        int i = 0;
        while (i < nnames && !tpl_tstr_eqc(a->kname[k], names[i]))
            i++;
        if (i == nnames)
            return tpl_rt_error(r, at, "%s() got an unexpected keyword argument '%.*s'", fname,
                                (int)a->kname[k].n, a->kname[k].p);
        if (given[i])
            return tpl_rt_error(r, at, "%s() got multiple values for argument '%s'", fname,
                                names[i]);
        vals[i] = a->kval[k];
        given[i] = true;
    }
    return 0;
}

/* --- dict and list methods ------------------------------------------------------------------ */

static int dict_view(tpl_rt *r, const node *at, tv self, targs *a, tv *out, int which,
                     const char *name) {
    if (no_args(r, at, name, a)) return -1;
    tpl_arena *ar = tpl_rt_arena(r);
    const tdict *d = self.u.d;
    tlist *l = tpl_tl_new(ar, d->n);
    if (!l) return -1;
    for (size_t i = 0; i < d->n; i++) {
        if (which == LIST_KEYS) {
            l->v[i] = d->k[i];
        } else if (which == LIST_VALUES) {
            l->v[i] = d->v[i];
        } else {
            tlist *t = tpl_tl_new(ar, 2);
            if (!t) return -1;
            t->v[0] = d->k[i];
            t->v[1] = d->v[i];
            l->v[i] = tv_list(t, LIST_TUPLE);
        }
    }
    *out = tv_list(l, which);
    return 0;
}
static int m_items(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return dict_view(r, at, self, a, out, LIST_ITEMS, "items");
}
static int m_keys(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return dict_view(r, at, self, a, out, LIST_KEYS, "keys");
}
static int m_values(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    return dict_view(r, at, self, a, out, LIST_VALUES, "values");
}

static int m_get(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    if (a->nk) return tpl_rt_error(r, at, "get() takes no keyword arguments");
    if (a->n < 1 || a->n > 2)
        return tpl_rt_error(r, at, "get expected 1 or 2 arguments, got %d", a->n);
    bool found;
    if (a->pos[0].kind == TV_DICT || (a->pos[0].kind == TV_LIST && a->pos[0].sub != LIST_TUPLE))
        return tpl_rt_error(r, at, "unhashable type: '%s'", tpl_tv_type_name(a->pos[0]));
    if (tpl_td_get(r, self.u.d, a->pos[0], out, &found)) return -1;
    if (!found) *out = a->n > 1 ? a->pos[1] : tv_none();
    return 0;
}

static int m_copy(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    if (no_args(r, at, "copy", a)) return -1;
    tpl_arena *ar = tpl_rt_arena(r);
    if (self.kind == TV_DICT) {
        tdict *d = tpl_td_new(ar, self.u.d->n);
        if (!d) return -1;
        for (size_t i = 0; i < self.u.d->n; i++) {
            d->k[i] = self.u.d->k[i];
            d->v[i] = self.u.d->v[i];
        }
        d->n = self.u.d->n;
        *out = tv_dict(d);
        return 0;
    }
    tlist *l = tpl_tl_new(ar, self.u.l->n);
    if (!l) return -1;
    for (size_t i = 0; i < l->n; i++)
        l->v[i] = self.u.l->v[i];
    *out = tv_list(l, LIST_PLAIN);
    return 0;
}

static int m_lcount(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    BIND("count", "value");
    if (!g[0]) return tpl_rt_error(r, at, "count() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < self.u.l->n; i++) {
        bool eq;
        if (tpl_tv_equal(r, self.u.l->v[i], p[0], &eq)) return -1;
        n += eq;
    }
    *out = tv_int(n);
    return 0;
}

static int m_lindex(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    BIND("index", "value");
    if (!g[0]) return tpl_rt_error(r, at, "index() takes at least 1 argument");
    for (size_t i = 0; i < self.u.l->n; i++) {
        bool eq;
        if (tpl_tv_equal(r, self.u.l->v[i], p[0], &eq)) return -1;
        if (eq) {
            *out = tv_int((int64_t)i);
            return 0;
        }
    }
    return tpl_rt_error(r, at, "value is not in list");
}

static const tpl_method dict_methods[] = {
    {"items", m_items, MK_NONE}, {"keys", m_keys, MK_NONE},     {"values", m_values, MK_NONE},
    {"get", m_get, MK_NONE},     {"copy", m_copy, MK_NONE},     {"pop", NULL, MK_NONE},
    {"popitem", NULL, MK_NONE},  {"setdefault", NULL, MK_NONE}, {"update", NULL, MK_NONE},
    {"clear", NULL, MK_NONE},
};

static const tpl_method list_methods[] = {
    {"count", m_lcount, MK_NONE}, {"index", m_lindex, MK_NONE}, {"copy", m_copy, MK_NONE},
    {"append", NULL, MK_NONE},    {"extend", NULL, MK_NONE},    {"insert", NULL, MK_NONE},
    {"pop", NULL, MK_NONE},       {"remove", NULL, MK_NONE},    {"reverse", NULL, MK_NONE},
    {"sort", NULL, MK_NONE},      {"clear", NULL, MK_NONE},
};

static bool find_in(tpl_rt *r, const tpl_method *m, size_t n, tv self, tstr name, tv *out) {
    for (size_t i = 0; i < n; i++) {
        if (!tpl_tstr_eqc(name, m[i].name)) continue;
        if (!m[i].fn) {
            *out = tpl_rt_undef(r, "access to attribute '%s' of '%s' object is unsafe.", m[i].name,
                                tpl_tv_type_name(self));
            return true;
        }
        tfunc *f = tpl_ar_alloc(tpl_rt_arena(r), sizeof *f);
        if (!f) {
            *out = tv_undef("out of memory");
            return true;
        }
        f->fn = m[i].fn;
        f->name = m[i].name;
        f->self = self;
        f->markup = tv_is_markup(self) ? m[i].markup : MK_NONE;
        out->kind = TV_FUNC;
        out->sub = 0;
        out->u.fn = f;
        return true;
    }
    return false;
}

bool tpl_method_find(tpl_rt *r, tv self, tstr name, tv *out) {
    if (self.kind == TV_STR)
        return find_in(r, tpl_str_methods, tpl_str_methods_count, self, name, out);
    if (self.kind == TV_DICT)
        return find_in(r, dict_methods, sizeof dict_methods / sizeof *dict_methods, self, name,
                       out);
    if (self.kind == TV_LIST && (self.sub == LIST_PLAIN || self.sub == LIST_TUPLE)) {
        size_t n = self.sub == LIST_TUPLE ? 2 : sizeof list_methods / sizeof *list_methods;
        return find_in(r, list_methods, n, self, name, out);
    }
    return false;
}

/* --- globals ------------------------------------------------------------------------------- */

static int g_range(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    (void)self;
    if (a->nk) return tpl_rt_error(r, at, "range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3)
        return tpl_rt_error(r, at, "range expected 1 to 3 arguments, got %d", a->n);
    int64_t v[3];
    for (int i = 0; i < a->n; i++) {
        tv x = a->pos[i];
        if (x.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, x);
        if (x.kind != TV_INT && x.kind != TV_BOOL)
            return tpl_rt_error(r, at, "'%s' object cannot be interpreted as an integer",
                                tpl_tv_type_name(x));
        v[i] = x.kind == TV_BOOL ? x.u.b : x.u.i;
    }
    int64_t start = a->n == 1 ? 0 : v[0], stop = a->n == 1 ? v[0] : v[1],
            step = a->n == 3 ? v[2] : 1;
    if (step == 0) return tpl_rt_error(r, at, "range() arg 3 must not be zero");
    double count = 0;
    if (step > 0 && stop > start) count = ((double)stop - (double)start - 1) / (double)step + 1;
    if (step < 0 && start > stop) count = ((double)start - (double)stop - 1) / (double)-step + 1;
    if (count > TPL_MAX_RANGE)
        return tpl_rt_error(r, at,
                            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).",
                            TPL_MAX_RANGE);
    tlist *l = tpl_tl_new(tpl_rt_arena(r), (size_t)count);
    if (!l) return -1;
    for (size_t i = 0; i < l->n; i++)
        l->v[i] = tv_int(start + (int64_t)i * step);
    l->start = start;
    l->stop = stop;
    l->step = step;
    *out = tv_list(l, LIST_RANGE);
    return 0;
}

/* dict(mapping_or_pairs, **kwargs) into d. */
static int fill_dict(tpl_rt *r, const node *at, targs *a, tdict *d, const char *fname) {
    if (a->n > 1) return tpl_rt_error(r, at, "%s expected at most 1 argument, got %d", fname, a->n);
    if (a->n == 1) {
        tv src = a->pos[0];
        if (src.kind == TV_DICT) {
            for (size_t i = 0; i < src.u.d->n; i++)
                if (tpl_td_set(r, d, src.u.d->k[i], src.u.d->v[i])) return -1;
        } else {
            tlist *items;
            if (tpl_tv_iterate(r, at, src, &items)) return -1;
            for (size_t i = 0; i < items->n; i++) {
                tlist *pair;
                if (tpl_tv_iterate(r, at, items->v[i], &pair)) return -1;
                if (pair->n != 2)
                    return tpl_rt_error(
                        r, at,
                        "dictionary update sequence element #%zu has length %zu; 2 is required", i,
                        pair->n);
                if (tpl_td_set(r, d, pair->v[0], pair->v[1])) return -1;
            }
        }
    }
    for (int k = 0; k < a->nk; k++)
        if (tpl_td_set(r, d, tv_str(a->kname[k]), a->kval[k])) return -1;
    return 0;
}

static int g_dict(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    (void)self;
    tdict *d = tpl_td_new(tpl_rt_arena(r), 0);
    if (!d || fill_dict(r, at, a, d, "dict")) return -1;
    *out = tv_dict(d);
    return 0;
}

static int g_namespace(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    (void)self;
    tdict *d = tpl_td_new(tpl_rt_arena(r), 0);
    if (!d || fill_dict(r, at, a, d, "namespace")) return -1;
    tns *ns = tpl_ar_alloc(tpl_rt_arena(r), sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < d->n; i++) {
        if (d->k[i].kind != TV_STR) return tpl_rt_error(r, at, "namespace keys must be strings");
        if (tpl_tvars_set(tpl_rt_arena(r), &ns->attrs, d->k[i].u.s, d->v[i])) return -1;
    }
    out->kind = TV_NS;
    out->sub = 0;
    out->u.ns = ns;
    return 0;
}

static int g_raise_exception(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    (void)self;
    (void)out;
    BIND("raise_exception", "message");
    tstr msg = {"", 0};
    if (g[0] && tpl_tv_stringify(r, p[0], &msg)) return -1;
    return tpl_rt_raise(r, at, msg);
}

static int g_strftime_now(tpl_rt *r, const node *at, tv self, targs *a, tv *out) {
    (void)self;
    BIND("strftime_now", "format");
    if (!g[0] || p[0].kind != TV_STR)
        return tpl_rt_error(r, at, "strftime_now() needs a format string");
    char fmt[256], buf[512];
    if (p[0].u.s.n >= sizeof fmt) return tpl_rt_error(r, at, "strftime_now() format too long");
    memcpy(fmt, p[0].u.s.p, p[0].u.s.n);
    fmt[p[0].u.s.n] = 0;
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = strftime(buf, sizeof buf, fmt, &tm);
    sbuf b;
    tpl_sb_init(&b, tpl_rt_arena(r), sizeof buf);
    if (tpl_sb_put(&b, buf, n)) return -1;
    *out = tv_str(tpl_sb_str(&b));
    return 0;
}

static const struct {
    const char *name;
    tpl_func_fn fn;
} globals[] = {
    {"range", g_range},
    {"dict", g_dict},
    {"namespace", g_namespace},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
};

bool tpl_global_find(tpl_rt *r, tstr name, tv *out) {
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++) {
        if (!tpl_tstr_eqc(name, globals[i].name)) continue;
        tfunc *f = tpl_ar_alloc(tpl_rt_arena(r), sizeof *f);
        if (!f) {
            *out = tv_undef("out of memory");
            return true;
        }
        f->fn = globals[i].fn;
        f->name = globals[i].name;
        f->self = tv_none();
        out->kind = TV_FUNC;
        out->sub = 0;
        out->u.fn = f;
        return true;
    }
    return false;
}
