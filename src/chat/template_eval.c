/* Chat-template evaluator: walks the tree with a JSON context and writes the
 * rendering, with jinja2's semantics where templates can see them:
 *
 * - Scopes: the context and top-level `set`s live in the root scope; `if`
 *   shares its scope; each loop iteration, macro call, filter block and
 *   {% generation %} gets a fresh child scope, so a `set` inside a loop is gone after it (and
 *   at the next iteration) - state crosses iterations only via namespace().
 * - Lookups: `a.b` tries the Python attribute (dict methods, str methods)
 *   before the item; `a['b']` the item before the attribute. Missing ones are
 *   Undefined values that carry jinja2's message and raise it when used.
 * - Macros see their defining scope as it is when they are called.
 * - raise_exception(msg) fails the render with exactly msg as the error.
 *
 * Limits (depth, steps, memory, output) turn runaway templates into errors. */
#include "chat/template_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scope {
    struct scope *parent;
    tvars vars;
    bool captured; /* a macro's closure: must outlive its block */
} scope;

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

struct tpl_rt {
    tpl_arena *ar;
    sbuf *out;
    ttaint *out_taint; /* which bytes of *out came from the request */
    int depth;
    long steps;
    int ctl;
    int line;
    tv filter_input; /* the body of a filter block or set block */
};

tpl_arena *tpl_rt_arena(tpl_rt *r) {
    return r->ar;
}

int tpl_rt_error(tpl_rt *r, const node *at, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set("chat template line %d: %s", at ? at->line : r->line, msg);
}

int tpl_rt_raise(tpl_rt *r, const node *at, tstr msg) {
    (void)r;
    (void)at;
    return err_set("%.*s", (int)(msg.n > 1000 ? 1000 : msg.n), msg.p);
}

tv tpl_rt_undef(tpl_rt *r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    char *p = tpl_ar_alloc(r->ar, n + 1);
    if (p) memcpy(p, msg, n + 1);
    return tv_undef(p ? p : "undefined value");
}

int tpl_rt_undefined_error(tpl_rt *r, const node *at, tv u) {
    return tpl_rt_error(r, at, "%s", u.u.undef ? u.u.undef : "undefined value");
}

int tpl_rt_step(tpl_rt *r, const node *at) {
    if (++r->steps > TPL_MAX_STEPS)
        return tpl_rt_error(r, at, "template takes too long (more than %ld steps)", TPL_MAX_STEPS);
    return 0;
}

static int enter(tpl_rt *r, const node *at) {
    if (++r->depth > TPL_MAX_EVAL_DEPTH)
        return tpl_rt_error(r, at, "maximum recursion depth exceeded");
    return 0;
}

/* --- scopes ------------------------------------------------------------------------ */

static scope *scope_new(tpl_rt *r, scope *parent) {
    scope *s = tpl_ar_alloc(r->ar, sizeof *s);
    if (s) s->parent = parent;
    return s;
}

/* A macro keeps its scope chain alive. */
static void scope_capture(scope *s) {
    for (; s && !s->captured; s = s->parent)
        s->captured = true;
}

static bool scope_lookup(const scope *s, tstr name, tv *out) {
    for (; s; s = s->parent)
        if (tpl_tvars_get(&s->vars, name, out)) return true;
    return false;
}

static int scope_set(tpl_rt *r, scope *s, tstr name, tv v) {
    return tpl_tvars_set(r->ar, &s->vars, name, v);
}

/* --- attribute and item access --------------------------------------------------- */

/* jinja2's object_type_repr: "dict object", "None", ... */
static const char *object_repr(tv v, char *buf, size_t n) {
    if (v.kind == TV_NONE) return "None";
    snprintf(buf, n, "%s object", tpl_tv_type_name(v));
    return buf;
}

static tv missing_attr(tpl_rt *r, tv obj, tstr name) {
    char tmp[64];
    return tpl_rt_undef(r, "'%s' has no attribute '%.*s'", object_repr(obj, tmp, sizeof tmp),
                        (int)(name.n > 200 ? 200 : name.n), name.p);
}

static tv missing_item(tpl_rt *r, tv obj, tv key) {
    char tmp[64];
    sbuf b;
    tpl_sb_init(&b, r->ar, 256);
    if (tpl_tv_repr(r, key, &b)) b.n = 0;
    return tpl_rt_undef(r, "%s has no element %.*s", object_repr(obj, tmp, sizeof tmp), (int)b.n,
                        b.p ? b.p : "");
}

static bool loop_attr(tpl_rt *r, tv obj, tstr name, tv *out) {
    tloop *l = obj.u.loop;
    size_t i = l->index, n = l->items->n;
    if (tpl_tstr_eqc(name, "index"))
        *out = tv_int((int64_t)i + 1);
    else if (tpl_tstr_eqc(name, "index0"))
        *out = tv_int((int64_t)i);
    else if (tpl_tstr_eqc(name, "revindex"))
        *out = tv_int((int64_t)(n - i));
    else if (tpl_tstr_eqc(name, "revindex0"))
        *out = tv_int((int64_t)(n - i - 1));
    else if (tpl_tstr_eqc(name, "first"))
        *out = tv_bool(i == 0);
    else if (tpl_tstr_eqc(name, "last"))
        *out = tv_bool(i + 1 == n);
    else if (tpl_tstr_eqc(name, "length"))
        *out = tv_int((int64_t)n);
    else if (tpl_tstr_eqc(name, "depth"))
        *out = tv_int(1);
    else if (tpl_tstr_eqc(name, "depth0"))
        *out = tv_int(0);
    else if (tpl_tstr_eqc(name, "previtem"))
        *out = i > 0 ? l->items->v[i - 1] : tpl_rt_undef(r, "there is no previous item");
    else if (tpl_tstr_eqc(name, "nextitem"))
        *out = i + 1 < n ? l->items->v[i + 1] : tpl_rt_undef(r, "there is no next item");
    else
        return false;
    return true;
}

/* Python attribute lookup only (no item fallback); false when there is none. */
static bool python_attr(tpl_rt *r, tv obj, tstr name, tv *out) {
    switch (obj.kind) {
    case TV_NS:
        return tpl_tvars_get(&obj.u.ns->attrs, name, out);
    case TV_LOOP:
        return loop_attr(r, obj, name, out);
    case TV_STR:
    case TV_DICT:
    case TV_LIST:
        return tpl_method_find(r, obj, name, out);
    default:
        return false;
    }
}

int tpl_rt_getattr(tpl_rt *r, const node *at, tv obj, tstr name, tv *out) {
    if (obj.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, obj);
    if (python_attr(r, obj, name, out)) return 0;
    if (obj.kind == TV_DICT && tpl_td_get_str(obj.u.d, name, out)) return 0;
    *out = missing_attr(r, obj, name);
    return 0;
}

int tpl_rt_getitem(tpl_rt *r, const node *at, tv obj, tv key, tv *out) {
    if (obj.kind == TV_UNDEF) return tpl_rt_undefined_error(r, at, obj);
    bool int_key = key.kind == TV_INT || key.kind == TV_BOOL;
    int64_t idx = key.kind == TV_BOOL ? key.u.b : key.u.i;
    if (obj.kind == TV_DICT) {
        bool found;
        if (tpl_td_get(r, obj.u.d, key, out, &found)) return -1;
        if (found) return 0;
    } else if (obj.kind == TV_LIST && int_key) {
        int64_t n = (int64_t)obj.u.l->n;
        if (idx < 0) idx += n;
        if (idx >= 0 && idx < n) {
            *out = obj.u.l->v[idx];
            return 0;
        }
        *out = missing_item(r, obj, key);
        return 0;
    } else if (obj.kind == TV_STR && int_key) {
        int64_t n = (int64_t)tpl_utf8_len(obj.u.s);
        if (idx < 0) idx += n;
        if (idx >= 0 && idx < n) {
            size_t i = 0;
            for (int64_t k = 0; k < idx; k++)
                tpl_utf8_next(obj.u.s.p, obj.u.s.n, &i);
            size_t start = i;
            tpl_utf8_next(obj.u.s.p, obj.u.s.n, &i);
            *out = tv_str_as(obj, (tstr){obj.u.s.p + start, i - start});
            return tpl_taint_result(r, tpl_tv_tainted(obj), obj, out);
        }
        *out = missing_item(r, obj, key);
        return 0;
    }
    if (key.kind == TV_STR) {
        if (python_attr(r, obj, key.u.s, out)) return 0;
        *out = missing_attr(r, obj, key.u.s);
        return 0;
    }
    *out = missing_item(r, obj, key);
    return 0;
}

/* --- expressions ------------------------------------------------------------------- */

static int eval(tpl_rt *r, scope *s, const node *e, tv *out);
static int exec_body(tpl_rt *r, scope *s, const nodelist *body);
static int call_macro(tpl_rt *r, const node *at, tmacro *m, targs *a, tv *out);

static int targs_push_kw(tpl_rt *r, targs *a, size_t *cap, tstr k, tv v) {
    size_t kc = *cap, vc = *cap;
    tstr *kn = tpl_ar_grow(r->ar, a->kname, &kc, (size_t)a->nk + 1, sizeof *kn);
    if (!kn) return -1;
    a->kname = kn;
    tv *kv = tpl_ar_grow(r->ar, a->kval, &vc, (size_t)a->nk + 1, sizeof *kv);
    if (!kv) return -1;
    a->kval = kv;
    *cap = kc;
    for (int i = 0; i < a->nk; i++)
        if (tpl_tstr_eq(a->kname[i], k)) {
            a->kval[i] = v;
            return 0;
        }
    a->kname[a->nk] = k;
    a->kval[a->nk++] = v;
    return 0;
}

static int eval_args(tpl_rt *r, scope *s, const callargs *c, targs *a) {
    memset(a, 0, sizeof *a);
    if (!c) return 0;
    tlist *extra = NULL;
    if (c->star) {
        tv v;
        if (eval(r, s, c->star, &v) || tpl_tv_iterate(r, c->star, v, &extra)) return -1;
    }
    size_t n = (size_t)c->pos.n + (extra ? extra->n : 0);
    if (n && !(a->pos = tpl_ar_alloc(r->ar, n * sizeof(tv)))) return -1;
    for (int i = 0; i < c->pos.n; i++)
        if (eval(r, s, c->pos.v[i], &a->pos[a->n++])) return -1;
    for (size_t i = 0; extra && i < extra->n; i++)
        a->pos[a->n++] = extra->v[i];
    size_t cap = 0;
    for (int i = 0; i < c->nkw; i++) {
        tv v;
        if (eval(r, s, c->kwv[i], &v) || targs_push_kw(r, a, &cap, c->kw[i], v)) return -1;
    }
    if (c->dstar) {
        tv v;
        if (eval(r, s, c->dstar, &v)) return -1;
        if (v.kind != TV_DICT)
            return tpl_rt_error(r, c->dstar, "argument after ** must be a mapping, not %s",
                                tpl_tv_type_name(v));
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (v.u.d->k[i].kind != TV_STR)
                return tpl_rt_error(r, c->dstar, "keywords must be strings");
            if (targs_push_kw(r, a, &cap, v.u.d->k[i].u.s, v.u.d->v[i])) return -1;
        }
    }
    return 0;
}

int tpl_rt_call(tpl_rt *r, const node *at, tv fn, targs *a, tv *out) {
    if (tpl_rt_step(r, at)) return -1;
    switch (fn.kind) {
    case TV_MACRO:
        return call_macro(r, at, fn.u.m, a, out);
    case TV_FUNC: {
        const tfunc *f = fn.u.fn;
        /* dict.get(key) picks a value of the dict: a template's own dict
         * indexed by a request's role is still the template's text */
        const bool picks = f->self.kind == TV_DICT && !strcmp(f->name, "get");
        const bool tainted = tpl_tv_tainted(f->self) || (!picks && tpl_targs_tainted(a));
        int rc = f->markup != MK_NONE ? tpl_markup_call(r, at, f, a, out) : f->fn(r, at, f->self, a, out);
        return rc ? rc : tpl_taint_result(r, tainted, f->self, out);
    }
    case TV_UNDEF:
        return tpl_rt_undefined_error(r, at, fn);
    default:
        return tpl_rt_error(r, at, "'%s' object is not callable", tpl_tv_type_name(fn));
    }
}

int tpl_rt_apply_filter(tpl_rt *r, const node *at, tpl_filter_fn f, tv v, targs *a, tv *out) {
    if (f(r, at, v, a, out) == 0) return tpl_taint_result(r, tpl_tv_tainted(v) || tpl_targs_tainted(a), v, out);
    if (!tpl_filter_is_lazy(f)) return -1;
    const char *msg = err_get();
    size_t n = strlen(msg);
    char *copy = tpl_ar_alloc(r->ar, n + 1);
    tgen *g = tpl_ar_alloc(r->ar, sizeof *g);
    tlist *empty = tpl_tl_new(r->ar, 0);
    if (!copy || !g || !empty) return -1;
    memcpy(copy, msg, n + 1);
    g->src = empty;
    g->type = "generator";
    g->err = copy;
    out->kind = TV_GEN;
    out->sub = 0;
    out->u.g = g;
    return 0;
}

int tpl_rt_gen_check(tpl_rt *r, const node *at, tv g) {
    (void)r;
    (void)at;
    if (g.kind == TV_GEN && g.u.g->err) return err_set("%s", g.u.g->err);
    return 0;
}

int tpl_rt_call_filter_named(tpl_rt *r, const node *at, tstr name, tv v, targs *a, tv *out) {
    tpl_filter_fn f = tpl_filter_find(name);
    if (!f) return tpl_rt_error(r, at, "no filter named '%.*s'", (int)name.n, name.p);
    return tpl_rt_apply_filter(r, at, f, v, a, out);
}

int tpl_rt_call_test_named(tpl_rt *r, const node *at, tstr name, tv v, targs *a, bool *out) {
    tpl_test_fn t = tpl_test_find(name);
    if (!t) return tpl_rt_error(r, at, "no test named '%.*s'", (int)name.n, name.p);
    return t(r, at, v, a, out);
}

/* Appends str(v) to b, and to `taint` the ranges of it that came from the
 * request: a string's own, all of anything else that holds tainted text. */
static int put_value(tpl_rt *r, tv v, sbuf *b, ttaint *taint) {
    const size_t start = b->n;
    if (tpl_tv_to_str(r, v, b)) return -1;
    if (v.kind == TV_STR) return tpl_taint_add_shifted(r->ar, taint, v.taint, start, b->n - start);
    return tpl_tv_tainted(v) ? tpl_taint_add(r->ar, taint, start, b->n - start) : 0;
}

/* str + str keeps each side's ranges (Markup too, when escaping changed
 * nothing); any other operation on tainted values taints its result whole. */
static int taint_binop(tpl_rt *r, int op, tv a, tv b, tv *out) {
    const bool plain_concat = op == OP_ADD && a.kind == TV_STR && b.kind == TV_STR && out->kind == TV_STR &&
                              out->u.s.n == a.u.s.n + b.u.s.n && (!a.u.s.n || !memcmp(out->u.s.p, a.u.s.p, a.u.s.n)) &&
                              (!b.u.s.n || !memcmp(out->u.s.p + a.u.s.n, b.u.s.p, b.u.s.n));
    if (!plain_concat) return tpl_taint_result(r, tpl_tv_tainted(a) || tpl_tv_tainted(b), tv_none(), out);
    if (!a.taint && !b.taint) return 0;
    ttaint *t = tpl_ar_alloc(r->ar, sizeof *t);
    if (!t || tpl_taint_add_shifted(r->ar, t, a.taint, 0, a.u.s.n) ||
        tpl_taint_add_shifted(r->ar, t, b.taint, a.u.s.n, b.u.s.n))
        return -1;
    out->taint = t;
    return 0;
}

static int eval_compare(tpl_rt *r, scope *s, const node *e, tv *out) {
    tv left;
    if (eval(r, s, e->a, &left)) return -1;
    for (int k = 0; k < e->items.n; k++) {
        tv right;
        if (eval(r, s, e->items.v[k], &right)) return -1;
        int op = e->ops[k];
        bool ok;
        if (op == OP_EQ || op == OP_NE) {
            if (tpl_tv_equal(r, left, right, &ok)) return -1;
            if (op == OP_NE) ok = !ok;
        } else if (op == CMP_IN || op == CMP_NOTIN) {
            if (tpl_tv_contains(r, e, right, left, &ok)) return -1;
            if (op == CMP_NOTIN) ok = !ok;
        } else {
            int c;
            if (tpl_tv_compare(r, e, tpl_op_text[op], left, right, &c)) return -1;
            ok = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
        }
        if (!ok) {
            *out = tv_bool(false);
            return 0;
        }
        left = right;
    }
    *out = tv_bool(true);
    return 0;
}

static int eval_unary(tpl_rt *r, const node *e, tv x, tv *out, int op) {
    if (op == 0) {
        *out = tv_bool(!tpl_tv_truthy(x));
        return 0;
    }
    if (x.kind == TV_UNDEF) return tpl_rt_undefined_error(r, e, x);
    bool neg = op == OP_SUB;
    if (x.kind == TV_BOOL || x.kind == TV_INT) {
        int64_t i = x.kind == TV_BOOL ? x.u.b : x.u.i;
        if (neg && i == INT64_MIN) return tpl_rt_error(r, e, "integer overflow");
        *out = tv_int(neg ? -i : i);
        return 0;
    }
    if (x.kind == TV_FLOAT) {
        *out = tv_float(neg ? -x.u.f : x.u.f);
        return 0;
    }
    return tpl_rt_error(r, e, "bad operand type for unary %s: '%s'", neg ? "-" : "+",
                        tpl_tv_type_name(x));
}

static int eval_container(tpl_rt *r, scope *s, const node *e, tv *out) {
    if (e->kind == N_DICT) {
        tdict *d = tpl_td_new(r->ar, (size_t)e->items.n);
        if (!d) return -1;
        for (int i = 0; i < e->items.n; i++) {
            tv k, v;
            if (eval(r, s, e->items.v[i], &k) || eval(r, s, e->items2.v[i], &v) ||
                tpl_td_set(r, d, k, v))
                return -1;
        }
        *out = tv_dict(d);
        return 0;
    }
    tlist *l = tpl_tl_new(r->ar, (size_t)e->items.n);
    if (!l) return -1;
    for (int i = 0; i < e->items.n; i++)
        if (eval(r, s, e->items.v[i], &l->v[i])) return -1;
    *out = tv_list(l, e->kind == N_TUPLE ? LIST_TUPLE : LIST_PLAIN);
    return 0;
}

static int eval_inner(tpl_rt *r, scope *s, const node *e, tv *out) {
    tv a, b;
    switch (e->kind) {
    case N_CONST:
        *out = e->cval;
        return 0;
    case N_NAME:
        if (scope_lookup(s, e->name, out)) return 0;
        if (tpl_global_find(r, e->name, out)) return 0;
        *out = tpl_rt_undef(r, "'%.*s' is undefined", (int)e->name.n, e->name.p);
        return 0;
    case N_LIST:
    case N_TUPLE:
    case N_DICT:
        return eval_container(r, s, e, out);
    case N_GETATTR:
        if (eval(r, s, e->a, &a)) return -1;
        return tpl_rt_getattr(r, e, a, e->name, out);
    case N_GETITEM:
        if (eval(r, s, e->a, &a)) return -1;
        if (e->b->kind == N_SLICE) {
            tv st = tv_none(), sp = tv_none(), step = tv_none();
            const node *sl = e->b;
            if ((sl->a && eval(r, s, sl->a, &st)) || (sl->b && eval(r, s, sl->b, &sp)) ||
                (sl->c && eval(r, s, sl->c, &step)))
                return -1;
            return tpl_tv_slice(r, e, a, st, sp, step, out) ||
                   tpl_taint_result(r, tpl_tv_tainted(a), a, out);
        }
        if (eval(r, s, e->b, &b)) return -1;
        return tpl_rt_getitem(r, e, a, b, out);
    case N_CALL: {
        targs args;
        if (eval(r, s, e->a, &a) || eval_args(r, s, e->args, &args)) return -1;
        return tpl_rt_call(r, e, a, &args, out);
    }
    case N_FILTER: {
        targs args;
        if (e->a) {
            if (eval(r, s, e->a, &a)) return -1;
        } else {
            a = r->filter_input;
        }
        if (eval_args(r, s, e->args, &args)) return -1;
        if (!e->fn.filter)
            return tpl_rt_error(r, e, "no filter named '%.*s'", (int)e->name.n, e->name.p);
        return tpl_rt_apply_filter(r, e, e->fn.filter, a, &args, out);
    }
    case N_TEST: {
        targs args;
        bool res;
        if (eval(r, s, e->a, &a) || eval_args(r, s, e->args, &args)) return -1;
        if (!e->fn.test)
            return tpl_rt_error(r, e, "no test named '%.*s'", (int)e->name.n, e->name.p);
        if (e->fn.test(r, e, a, &args, &res)) return -1;
        *out = tv_bool(e->op ? !res : res);
        return 0;
    }
    case N_UNARY:
        if (eval(r, s, e->a, &a)) return -1;
        return eval_unary(r, e, a, out, e->op);
    case N_BINOP:
        if (eval(r, s, e->a, &a) || eval(r, s, e->b, &b)) return -1;
        if ((e->flags & POW_NEGATED_BASE) &&
            ((a.kind == TV_INT && a.u.i < 0) || (a.kind == TV_FLOAT && signbit(a.u.f)))) {
            /* -(|a| ** b), as jinja2's generated Python computes it */
            tv pos;
            return eval_unary(r, e, a, &pos, OP_SUB) || tpl_tv_binop(r, e, OP_POW, pos, b, &a) ||
                   eval_unary(r, e, a, out, OP_SUB);
        }
        return tpl_tv_binop(r, e, e->op, a, b, out) || taint_binop(r, e->op, a, b, out);
    case N_AND:
    case N_OR:
        if (eval(r, s, e->a, &a)) return -1;
        if (tpl_tv_truthy(a) == (e->kind == N_OR)) {
            *out = a;
            return 0;
        }
        return eval(r, s, e->b, out);
    case N_COMPARE:
        return eval_compare(r, s, e, out);
    case N_COND:
        if (eval(r, s, e->a, &a)) return -1;
        if (tpl_tv_truthy(a)) return eval(r, s, e->b, out);
        if (e->c) return eval(r, s, e->c, out);
        *out = tpl_rt_undef(r,
                            "the inline if-expression on line %d evaluated to false and no else "
                            "section was defined.",
                            e->line);
        return 0;
    case N_CONCAT: {
        sbuf buf;
        ttaint *taint = tpl_ar_alloc(r->ar, sizeof *taint);
        if (!taint) return -1;
        tpl_sb_init(&buf, r->ar, TPL_MAX_OUTPUT);
        for (int i = 0; i < e->items.n; i++)
            if (eval(r, s, e->items.v[i], &a) || put_value(r, a, &buf, taint)) return -1;
        *out = tv_str(tpl_sb_str(&buf));
        out->taint = taint->n ? taint : NULL;
        return 0;
    }
    default:
        return tpl_rt_error(r, e, "this expression cannot be evaluated here");
    }
}

static int eval(tpl_rt *r, scope *s, const node *e, tv *out) {
    if (enter(r, e)) return -1;
    int rc = eval_inner(r, s, e, out);
    r->depth--;
    return rc;
}

/* --- assignment ---------------------------------------------------------------------- */

static int assign(tpl_rt *r, scope *s, const node *target, tv v) {
    if (target->kind == N_NAME) return scope_set(r, s, target->name, v);
    if (target->kind == N_NSREF) {
        tv ns;
        if (!scope_lookup(s, target->name, &ns) || ns.kind != TV_NS)
            return tpl_rt_error(r, target, "cannot assign attribute on non-namespace object");
        return tpl_tvars_set(r->ar, &ns.u.ns->attrs, target->name2, v);
    }
    /* tuple unpacking */
    tlist *items;
    if (tpl_tv_iterate(r, target, v, &items)) return -1;
    size_t want = (size_t)target->items.n;
    if (items->n > want)
        return tpl_rt_error(r, target, "too many values to unpack (expected %zu)", want);
    if (items->n < want)
        return tpl_rt_error(r, target, "not enough values to unpack (expected %zu, got %zu)", want,
                            items->n);
    for (size_t i = 0; i < want; i++)
        if (assign(r, s, target->items.v[i], items->v[i])) return -1;
    return 0;
}

/* --- statements -------------------------------------------------------------------- */

/* Renders a body into a string of its own (macros, set blocks, filter blocks). */
static int capture(tpl_rt *r, scope *s, const nodelist *body, tv *out) {
    sbuf buf, *saved = r->out;
    ttaint *saved_taint = r->out_taint, *taint = tpl_ar_alloc(r->ar, sizeof *taint);
    if (!taint) return -1;
    tpl_sb_init(&buf, r->ar, TPL_MAX_OUTPUT);
    r->out = &buf;
    r->out_taint = taint;
    int rc = exec_body(r, s, body);
    r->out = saved;
    r->out_taint = saved_taint;
    *out = tv_str(tpl_sb_str(&buf));
    out->taint = taint->n ? taint : NULL;
    return rc;
}

static int apply_filters(tpl_rt *r, scope *s, const node *chain, tv body, tv *out) {
    tv saved = r->filter_input;
    r->filter_input = body;
    int rc = eval(r, s, chain, out);
    r->filter_input = saved;
    return rc;
}

static int call_macro(tpl_rt *r, const node *at, tmacro *m, targs *a, tv *out) {
    const node *def = m->def;
    char mname[80];
    snprintf(mname, sizeof mname, "%.*s", (int)(def->name.n > 60 ? 60 : def->name.n),
             def->name.p ? def->name.p : "");
    if (enter(r, at)) return -1;
    int rc = -1;
    scope *s = scope_new(r, m->closure);
    if (!s) goto done;
    int np = def->nparams, nd = def->items2.n, npos = a->n;
    bool *kw_used = a->nk ? tpl_ar_alloc(r->ar, (size_t)a->nk) : NULL;
    if (a->nk && !kw_used) goto done;
    for (int i = 0; i < np; i++) {
        tv v;
        bool have = false;
        if (i < npos) {
            v = a->pos[i];
            have = true;
        } else {
            for (int k = 0; k < a->nk; k++)
                if (!kw_used[k] && tpl_tstr_eq(a->kname[k], def->params[i])) {
                    v = a->kval[k];
                    kw_used[k] = true;
                    have = true;
                    break;
                }
        }
        if (!have) {
            int d = i - (np - nd);
            if (d >= 0) {
                if (eval(r, s, def->items2.v[d], &v)) goto done;
            } else {
                v = tpl_rt_undef(r, "parameter '%.*s' was not provided", (int)def->params[i].n,
                                 def->params[i].p);
            }
        }
        if (scope_set(r, s, def->params[i], v)) goto done;
    }
    tdict *kwargs = tpl_td_new(r->ar, 0);
    if (!kwargs) goto done;
    for (int k = 0; k < a->nk; k++) {
        if (kw_used[k]) continue;
        if (!(def->flags & MACRO_KWARGS)) {
            tpl_rt_error(r, at, "macro '%s' takes no keyword argument '%.*s'", mname,
                         (int)a->kname[k].n, a->kname[k].p);
            goto done;
        }
        if (tpl_td_set(r, kwargs, tv_str(a->kname[k]), a->kval[k])) goto done;
    }
    if (def->flags & MACRO_KWARGS && scope_set(r, s, tstr_c("kwargs"), tv_dict(kwargs))) goto done;
    if (def->flags & MACRO_VARARGS) {
        int extra = npos > np ? npos - np : 0;
        tlist *va = tpl_tl_new(r->ar, (size_t)extra);
        if (!va) goto done;
        for (int i = 0; i < extra; i++)
            va->v[i] = a->pos[np + i];
        if (scope_set(r, s, tstr_c("varargs"), tv_list(va, LIST_TUPLE))) goto done;
    } else if (npos > np) {
        tpl_rt_error(r, at, "macro '%s' takes not more than %d argument(s)", mname, np);
        goto done;
    }
    tv text;
    int saved_ctl = r->ctl;
    r->ctl = CTL_NONE;
    rc = capture(r, s, &def->items, &text);
    r->ctl = saved_ctl;
    if (rc == 0) *out = text;
done:
    r->depth--;
    return rc;
}

static int exec_for(tpl_rt *r, scope *s, const node *n) {
    tv seq;
    tlist *items;
    if (eval(r, s, n->b, &seq) || tpl_tv_iterate(r, n->b, seq, &items)) return -1;
    if (n->c) {
        /* `for x in xs if cond`: filter first, so loop.length and loop.last see the result */
        tlist *kept = tpl_tl_new(r->ar, items->n);
        if (!kept) return -1;
        kept->n = 0;
        scope *fs = NULL;
        for (size_t i = 0; i < items->n; i++) {
            if (fs && !fs->captured)
                fs->vars.n = 0;
            else
                fs = scope_new(r, s);
            tv ok;
            if (!fs || tpl_rt_step(r, n) || assign(r, fs, n->a, items->v[i]) ||
                eval(r, fs, n->c, &ok))
                return -1;
            if (tpl_tv_truthy(ok)) kept->v[kept->n++] = items->v[i];
        }
        items = kept;
    }
    if (items->n == 0) {
        scope *es = scope_new(r, s);
        return es ? exec_body(r, es, &n->items2) : -1;
    }
    tloop *loop = tpl_ar_alloc(r->ar, sizeof *loop);
    if (!loop) return -1;
    loop->items = items;
    tv loopv = {TV_LOOP, 0, {.loop = loop}, NULL};
    scope *is = NULL;
    for (size_t i = 0; i < items->n; i++) {
        loop->index = i;
        /* each iteration starts with a fresh scope; reuse the last one's
         * memory unless a macro defined in it still refers to it */
        if (is && !is->captured)
            is->vars.n = 0;
        else
            is = scope_new(r, s);
        if (!is || tpl_rt_step(r, n) || scope_set(r, is, tstr_c("loop"), loopv) ||
            assign(r, is, n->a, items->v[i]) || exec_body(r, is, &n->items))
            return -1;
        if (r->ctl == CTL_BREAK) {
            r->ctl = CTL_NONE;
            break;
        }
        r->ctl = CTL_NONE;
    }
    return 0;
}

static int exec_stmt(tpl_rt *r, scope *s, const node *n) {
    r->line = n->line;
    tv v;
    switch (n->kind) {
    case N_TEXT:
        return tpl_sb_put(r->out, n->name.p, n->name.n);
    case N_OUTPUT:
        if (eval(r, s, n->a, &v)) return -1;
        return put_value(r, v, r->out, r->out_taint);
    case N_IF:
        if (eval(r, s, n->a, &v)) return -1;
        return exec_body(r, s, tpl_tv_truthy(v) ? &n->items : &n->items2);
    case N_FOR:
        return exec_for(r, s, n);
    case N_SET:
        if (eval(r, s, n->b, &v)) return -1;
        return assign(r, s, n->a, v);
    case N_SETBLOCK: {
        tv text;
        scope *bs = scope_new(r, s);
        if (!bs || capture(r, bs, &n->items, &text)) return -1;
        v = text;
        if (n->b && apply_filters(r, s, n->b, text, &v)) return -1;
        return assign(r, s, n->a, v);
    }
    case N_MACRO: {
        tmacro *m = tpl_ar_alloc(r->ar, sizeof *m);
        if (!m) return -1;
        m->def = n;
        m->closure = s;
        scope_capture(s);
        return scope_set(r, s, n->name, tpl_tv_macro_value(m));
    }
    case N_FILTERBLOCK: {
        tv text;
        scope *bs = scope_new(r, s);
        if (!bs || capture(r, bs, &n->items, &text) || apply_filters(r, s, n->b, text, &v))
            return -1;
        return put_value(r, v, r->out, r->out_taint);
    }
    case N_SCOPE: {
        scope *bs = scope_new(r, s);
        return bs ? exec_body(r, bs, &n->items) : -1;
    }
    case N_BREAK:
        r->ctl = CTL_BREAK;
        return 0;
    case N_CONTINUE:
        r->ctl = CTL_CONTINUE;
        return 0;
    default:
        return tpl_rt_error(r, n, "unexpected statement");
    }
}

static int exec_body(tpl_rt *r, scope *s, const nodelist *body) {
    if (enter(r, NULL)) return -1;
    int rc = 0;
    for (int i = 0; i < body->n && rc == 0; i++) {
        if (tpl_rt_step(r, body->v[i]) || exec_stmt(r, s, body->v[i]))
            rc = -1;
        else if (r->ctl != CTL_NONE)
            break;
    }
    r->depth--;
    return rc;
}

/* The context as the root scope's variables; when `mark`, every string in it
 * tainted but those under the top-level keys named in `trusted`. */
static int bind_context(tpl_rt *r, scope *root, json_t *context, bool mark, const char *const *trusted) {
    tv ctx;
    if (tpl_tv_from_json(r, context, &ctx, 0)) return -1;
    for (size_t i = 0; i < ctx.u.d->n; i++) {
        tv v = ctx.u.d->v[i];
        bool trust = !mark;
        for (const char *const *k = trusted; k && *k && !trust; k++)
            trust = tpl_tstr_eqc(ctx.u.d->k[i].u.s, *k);
        if ((!trust && tpl_taint_all(r, v, &v)) || scope_set(r, root, ctx.u.d->k[i].u.s, v)) return -1;
    }
    return 0;
}

static int copy_spans(const ttaint *t, chat_span **spans, size_t *nspans) {
    *spans = NULL;
    *nspans = 0;
    if (!t->n) return 0;
    if (!(*spans = malloc(t->n * sizeof **spans))) return err_oom("chat template: out of memory");
    for (size_t i = 0; i < t->n; i++)
        (*spans)[i] = (chat_span){t->v[i].off, t->v[i].len};
    *nspans = t->n;
    return 0;
}

char *tpl_render(const nodelist *body, json_t *context, const char *const *trusted, chat_span **spans,
                 size_t *nspans) {
    tpl_rt rt = {0};
    rt.ar = tpl_ar_new(TPL_RENDER_BUDGET);
    if (!rt.ar) return NULL;
    char *result = NULL;
    sbuf out;
    tpl_sb_init(&out, rt.ar, TPL_MAX_OUTPUT);
    rt.out = &out;
    rt.out_taint = tpl_ar_alloc(rt.ar, sizeof *rt.out_taint);
    scope *root = scope_new(&rt, NULL);
    if (!rt.out_taint || !root || bind_context(&rt, root, context, spans != NULL, trusted)) goto done;
    if (exec_body(&rt, root, body)) goto done;
    if (out.n && memchr(out.p, 0, out.n)) {
        err_set("chat template: the rendering contains a NUL character");
        goto done;
    }
    if (spans && copy_spans(rt.out_taint, spans, nspans)) goto done;
    result = malloc(out.n + 1);
    if (!result) {
        if (spans) free(*spans);
        err_oom("chat template: out of memory");
        goto done;
    }
    if (out.n) memcpy(result, out.p, out.n);
    result[out.n] = 0;
done:
    tpl_ar_free(rt.ar);
    return result;
}
