/* json.dumps for the tojson filter, as Hugging Face's chat-template
 * environment defines it: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False). Python's output exactly: ", " and ": "
 * separators (item separator "," once indented), floats as repr(), keys of
 * any scalar type turned into strings, tuples as arrays, and the same
 * TypeError for what JSON cannot hold (Undefined, dict views, namespaces). */
#include "chat/template_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int put_string(sbuf *b, tstr s, bool ensure_ascii) {
    if (tpl_sb_putc(b, '"')) return -1;
    size_t i = 0;
    while (i < s.n) {
        size_t start = i;
        uint32_t cp = tpl_utf8_next(s.p, s.n, &i);
        int rc;
        switch (cp) {
        case '"':
            rc = tpl_sb_puts(b, "\\\"");
            break;
        case '\\':
            rc = tpl_sb_puts(b, "\\\\");
            break;
        case '\n':
            rc = tpl_sb_puts(b, "\\n");
            break;
        case '\r':
            rc = tpl_sb_puts(b, "\\r");
            break;
        case '\t':
            rc = tpl_sb_puts(b, "\\t");
            break;
        case '\b':
            rc = tpl_sb_puts(b, "\\b");
            break;
        case '\f':
            rc = tpl_sb_puts(b, "\\f");
            break;
        default:
            if (cp < 0x20) {
                rc = tpl_sb_printf(b, "\\u%04x", cp);
            } else if (cp >= 0x7F && ensure_ascii) {
                if (cp < 0x10000) {
                    rc = tpl_sb_printf(b, "\\u%04x", cp);
                } else {
                    uint32_t v = cp - 0x10000;
                    rc = tpl_sb_printf(b, "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                                       0xDC00 + (v & 0x3FF));
                }
            } else {
                rc = tpl_sb_put(b, s.p + start, i - start);
            }
        }
        if (rc) return -1;
    }
    return tpl_sb_putc(b, '"');
}

static int put_float(sbuf *b, double f) {
    if (isnan(f)) return tpl_sb_puts(b, "NaN");
    if (isinf(f)) return tpl_sb_puts(b, f < 0 ? "-Infinity" : "Infinity");
    char num[64];
    tpl_fmt_float(f, num, sizeof num);
    return tpl_sb_puts(b, num);
}

static int newline_indent(sbuf *b, const json_opts *o, int level) {
    if (tpl_sb_putc(b, '\n')) return -1;
    for (int i = 0; i < level; i++)
        if (tpl_sb_put(b, o->indent.p, o->indent.n)) return -1;
    return 0;
}

static int not_serializable(tpl_rt *r, const node *at, tv v) {
    return tpl_rt_error(r, at, "Object of type %s is not JSON serializable", tpl_tv_type_name(v));
}

/* A dict key as JSON: strings as they are, scalars converted as Python does. */
static int key_string(tpl_rt *r, const node *at, tv k, tstr *out) {
    char num[64];
    switch (k.kind) {
    case TV_STR:
        *out = k.u.s;
        return 0;
    case TV_BOOL:
        *out = tstr_c(k.u.b ? "true" : "false");
        return 0;
    case TV_NONE:
        *out = tstr_c("null");
        return 0;
    case TV_INT:
    case TV_FLOAT: {
        if (k.kind == TV_INT)
            snprintf(num, sizeof num, "%" PRId64, k.u.i);
        else if (isnan(k.u.f))
            snprintf(num, sizeof num, "NaN");
        else if (isinf(k.u.f))
            snprintf(num, sizeof num, k.u.f < 0 ? "-Infinity" : "Infinity");
        else
            tpl_fmt_float(k.u.f, num, sizeof num);
        sbuf b;
        tpl_sb_init(&b, tpl_rt_arena(r), 64);
        if (tpl_sb_puts(&b, num)) return -1;
        *out = tpl_sb_str(&b);
        return 0;
    }
    default:
        return tpl_rt_error(r, at, "keys must be str, int, float, bool or None, not %s",
                            tpl_tv_type_name(k));
    }
}

static int dump(tpl_rt *r, const node *at, tv v, const json_opts *o, sbuf *b, int level);

static int dump_dict(tpl_rt *r, const node *at, const tdict *d, const json_opts *o, sbuf *b,
                     int level) {
    if (d->n == 0) return tpl_sb_puts(b, "{}");
    size_t *order = tpl_ar_alloc(tpl_rt_arena(r), d->n * sizeof *order);
    tstr *keys = tpl_ar_alloc(tpl_rt_arena(r), d->n * sizeof *keys);
    if (!order || !keys) return -1;
    for (size_t i = 0; i < d->n; i++) {
        order[i] = i;
        if (key_string(r, at, d->k[i], &keys[i])) return -1;
    }
    if (o->sort_keys) {
        /* insertion sort on the original keys (Python sorts them, not their strings) */
        for (size_t i = 1; i < d->n; i++) {
            size_t x = order[i], j = i;
            while (j > 0) {
                int c;
                if (tpl_tv_compare(r, at, "<", d->k[order[j - 1]], d->k[x], &c)) return -1;
                if (c <= 0) break;
                order[j] = order[j - 1];
                j--;
            }
            order[j] = x;
        }
    }
    if (tpl_sb_putc(b, '{')) return -1;
    for (size_t i = 0; i < d->n; i++) {
        size_t k = order[i];
        if (i && tpl_sb_put(b, o->item_sep.p, o->item_sep.n)) return -1;
        if (o->has_indent && newline_indent(b, o, level + 1)) return -1;
        if (put_string(b, keys[k], o->ensure_ascii) || tpl_sb_put(b, o->key_sep.p, o->key_sep.n) ||
            dump(r, at, d->v[k], o, b, level + 1))
            return -1;
    }
    if (o->has_indent && newline_indent(b, o, level)) return -1;
    return tpl_sb_putc(b, '}');
}

static int dump(tpl_rt *r, const node *at, tv v, const json_opts *o, sbuf *b, int level) {
    if (level > TPL_MAX_DEPTH)
        return tpl_rt_error(r, at, "maximum recursion depth exceeded in tojson");
    switch (v.kind) {
    case TV_NONE:
        return tpl_sb_puts(b, "null");
    case TV_BOOL:
        return tpl_sb_puts(b, v.u.b ? "true" : "false");
    case TV_INT:
        return tpl_sb_printf(b, "%" PRId64, v.u.i);
    case TV_FLOAT:
        return put_float(b, v.u.f);
    case TV_STR:
        return put_string(b, v.u.s, o->ensure_ascii);
    case TV_DICT:
        return dump_dict(r, at, v.u.d, o, b, level);
    case TV_LIST:
        if (v.sub != LIST_PLAIN && v.sub != LIST_TUPLE) return not_serializable(r, at, v);
        if (v.u.l->n == 0) return tpl_sb_puts(b, "[]");
        if (tpl_sb_putc(b, '[')) return -1;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && tpl_sb_put(b, o->item_sep.p, o->item_sep.n)) return -1;
            if (o->has_indent && newline_indent(b, o, level + 1)) return -1;
            if (dump(r, at, v.u.l->v[i], o, b, level + 1)) return -1;
        }
        if (o->has_indent && newline_indent(b, o, level)) return -1;
        return tpl_sb_putc(b, ']');
    default:
        return not_serializable(r, at, v);
    }
}

int tpl_json_dumps(tpl_rt *r, const node *at, tv v, const json_opts *o, sbuf *b) {
    return dump(r, at, v, o, b, 0);
}
