/* Taint: which bytes of a rendering came from the request rather than from
 * the template. A chat prompt is tokenized with control tokens parsed (the
 * template spells "<start_of_turn>" and the like as text), so a user message
 * that spells them would otherwise forge turns. The renderer marks every
 * string of the context (except the values the caller trusts, such as
 * bos_token) tainted, carries the marks through evaluation, and reports the
 * tainted byte ranges of the output; prompt.c then parses control tokens
 * only outside them.
 *
 * Propagation is conservative where it cannot be exact: a string a filter,
 * method, function, operator or slice makes from anything tainted is tainted
 * whole (tpl_taint_result at each of those call sites in template_eval.c);
 * concatenation, output, set blocks and macro bodies keep byte ranges, which
 * is what keeps the template's own markup around request text untainted.
 * Choosing between template literals by a tainted value (`if role ==
 * 'user'`, a literal dict indexed by the role) does not taint them: the
 * bytes are still the template's. */
#include "chat/template_internal.h"

#include <string.h>

/* Deeper than any real context; past it a value counts as tainted. */
#define TAINT_MAX_DEPTH 64

int tpl_taint_add(tpl_arena *a, ttaint *t, size_t off, size_t len) {
    if (len == 0) return 0;
    if (t->n > 0) {
        tspan *last = &t->v[t->n - 1];
        if (off <= last->off + last->len) {
            size_t end = off + len > last->off + last->len ? off + len : last->off + last->len;
            last->len = end - last->off;
            return 0;
        }
    }
    tspan *v = tpl_ar_grow(a, t->v, &t->cap, t->n + 1, sizeof *v);
    if (!v) return -1;
    t->v = v;
    t->v[t->n++] = (tspan){off, len};
    return 0;
}

int tpl_taint_add_shifted(tpl_arena *a, ttaint *t, const ttaint *src, size_t shift, size_t limit) {
    for (size_t i = 0; src && i < src->n; i++) {
        size_t off = src->v[i].off, len = src->v[i].len;
        if (off >= limit) break;
        if (len > limit - off) len = limit - off;
        if (tpl_taint_add(a, t, shift + off, len)) return -1;
    }
    return 0;
}

static bool tainted_depth(tv v, int depth) {
    if (depth > TAINT_MAX_DEPTH) return true;
    switch (v.kind) {
    case TV_STR:
        return v.taint != NULL && v.taint->n > 0;
    case TV_LIST:
        for (size_t i = 0; i < v.u.l->n; i++)
            if (tainted_depth(v.u.l->v[i], depth + 1)) return true;
        return false;
    case TV_DICT:
        for (size_t i = 0; i < v.u.d->n; i++)
            if (tainted_depth(v.u.d->k[i], depth + 1) || tainted_depth(v.u.d->v[i], depth + 1))
                return true;
        return false;
    case TV_GEN:
        for (size_t i = v.u.g->pos; i < v.u.g->src->n; i++)
            if (tainted_depth(v.u.g->src->v[i], depth + 1)) return true;
        return false;
    case TV_NS:
        for (size_t i = 0; i < v.u.ns->attrs.n; i++)
            if (tainted_depth(v.u.ns->attrs.v[i], depth + 1)) return true;
        return false;
    case TV_LOOP:
        return tainted_depth(tv_list(v.u.loop->items, LIST_PLAIN), depth + 1);
    case TV_FUNC:
        return tainted_depth(v.u.fn->self, depth + 1);
    default:
        return false;
    }
}

bool tpl_tv_tainted(tv v) {
    return tainted_depth(v, 0);
}

bool tpl_targs_tainted(const targs *a) {
    for (int i = 0; i < a->n; i++)
        if (tpl_tv_tainted(a->pos[i])) return true;
    for (int i = 0; i < a->nk; i++)
        if (tpl_tv_tainted(a->kval[i])) return true;
    return false;
}

static int taint_list(tpl_rt *r, const tlist *src, size_t from, const tv *source, tlist **out, int depth);

/* Whether s lies inside source's bytes: then it is those bytes (trim, strip,
 * a slice, split's parts), and keeps their taint exactly. */
static bool within(tstr s, const tv *source) {
    if (!source || source->kind != TV_STR || s.n == 0 || !source->u.s.p || !s.p) return false;
    uintptr_t p = (uintptr_t)s.p, lo = (uintptr_t)source->u.s.p;
    return p >= lo && p + s.n <= lo + source->u.s.n;
}

static int taint_depth(tpl_rt *r, tv v, const tv *source, tv *out, int depth) {
    tpl_arena *a = tpl_rt_arena(r);
    if (depth > TAINT_MAX_DEPTH) return tpl_rt_error(r, NULL, "value nested too deeply");
    *out = v;
    switch (v.kind) {
    case TV_STR: {
        if (within(v.u.s, source)) {
            const size_t from = (size_t)(v.u.s.p - source->u.s.p);
            ttaint *t = tpl_ar_alloc(a, sizeof *t);
            if (!t) return -1;
            for (size_t i = 0; source->taint && i < source->taint->n; i++) {
                const tspan sp = source->taint->v[i];
                size_t lo = sp.off > from ? sp.off : from, hi = sp.off + sp.len;
                if (hi > from + v.u.s.n) hi = from + v.u.s.n;
                if (lo < hi && tpl_taint_add(a, t, lo - from, hi - lo)) return -1;
            }
            out->taint = t->n ? t : NULL;
            return 0;
        }
        ttaint *t = tpl_ar_alloc(a, sizeof *t);
        /* an empty string gets an empty range too: it still counts as tainted */
        tspan *s = tpl_ar_alloc(a, sizeof *s);
        if (!t || !s) return -1;
        *s = (tspan){0, v.u.s.n};
        *t = (ttaint){1, 1, s};
        out->taint = t;
        return 0;
    }
    case TV_LIST: {
        tlist *l;
        if (taint_list(r, v.u.l, 0, source, &l, depth)) return -1;
        l->start = v.u.l->start;
        l->stop = v.u.l->stop;
        l->step = v.u.l->step;
        out->u.l = l;
        return 0;
    }
    case TV_DICT: {
        tdict *d = tpl_td_new(a, v.u.d->n);
        if (!d) return -1;
        for (size_t i = 0; i < v.u.d->n; i++)
            if (taint_depth(r, v.u.d->k[i], source, &d->k[i], depth + 1) ||
                taint_depth(r, v.u.d->v[i], source, &d->v[i], depth + 1))
                return -1;
        d->n = v.u.d->n;
        out->u.d = d;
        return 0;
    }
    case TV_GEN: {
        tgen *g = tpl_ar_alloc(a, sizeof *g);
        if (!g) return -1;
        *g = *v.u.g;
        g->pos = 0;
        if (taint_list(r, v.u.g->src, v.u.g->pos, source, &g->src, depth)) return -1;
        out->u.g = g;
        return 0;
    }
    default:
        /* namespaces are mutable and shared: what is assigned into them
         * carries its own taint; numbers, macros and the rest hold no text */
        return 0;
    }
}

static int taint_list(tpl_rt *r, const tlist *src, size_t from, const tv *source, tlist **out, int depth) {
    tlist *l = tpl_tl_new(tpl_rt_arena(r), src->n - from);
    if (!l) return -1;
    for (size_t i = from; i < src->n; i++)
        if (taint_depth(r, src->v[i], source, &l->v[i - from], depth + 1)) return -1;
    *out = l;
    return 0;
}

int tpl_taint_all(tpl_rt *r, tv v, tv *out) {
    return taint_depth(r, v, NULL, out, 0);
}

int tpl_taint_result(tpl_rt *r, bool tainted_in, tv source, tv *out) {
    return tainted_in ? taint_depth(r, *out, &source, out, 0) : 0;
}
