/* Chat-template parser: tokens -> syntax tree, following jinja2's parser
 * (jinja2/parser.py) rule for rule, so precedence and the odd corners agree:
 * filters bind tighter than arithmetic (`'a' + x|trim`), unary minus applies
 * before a filter (`-x|length` is length(-x)), `**` is left-associative,
 * tests take one bare argument (`x is divisibleby 3`), `for ... if` filters
 * the loop.
 *
 * After parsing, a pass resolves filter and test names as jinja2's compiler
 * does: an unknown name is an error, except inside `if` statements and `x if
 * c else y` expressions, where jinja2 defers it to run time. */
#include "chat/template_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    tpl_arena *ar;
    const token *t;
    size_t n, i;
    int depth;
    int loop_depth; /* for break/continue; reset inside macros */
    node *macros[TPL_MAX_DEPTH];
    int nmacros;
} parser;

static const token *cur(parser *P) {
    return &P->t[P->i];
}
static const token *look(parser *P) {
    return &P->t[P->i + 1 < P->n ? P->i + 1 : P->i];
}
static void advance(parser *P) {
    if (P->i + 1 < P->n) P->i++;
}

static bool is_op(const token *t, int op) {
    return t->kind == T_OP && t->op == op;
}
static bool is_name(const token *t, const char *name) {
    return t->kind == T_NAME && tpl_tstr_eqc(t->s, name);
}

static void describe(const token *t, char *buf, size_t n) {
    switch (t->kind) {
    case T_EOF:
        snprintf(buf, n, "end of template");
        break;
    case T_DATA:
        snprintf(buf, n, "template data");
        break;
    case T_VAR_BEGIN:
        snprintf(buf, n, "begin of print statement");
        break;
    case T_VAR_END:
        snprintf(buf, n, "end of print statement");
        break;
    case T_BLOCK_BEGIN:
        snprintf(buf, n, "begin of statement block");
        break;
    case T_BLOCK_END:
        snprintf(buf, n, "end of statement block");
        break;
    case T_NAME:
        snprintf(buf, n, "'%.*s'", (int)(t->s.n > 40 ? 40 : t->s.n), t->s.p);
        break;
    case T_STRING:
        snprintf(buf, n, "string");
        break;
    case T_INT:
        snprintf(buf, n, "integer");
        break;
    case T_FLOAT:
        snprintf(buf, n, "float");
        break;
    case T_OP:
        snprintf(buf, n, "'%s'", tpl_op_text[t->op]);
        break;
    default:
        snprintf(buf, n, "token");
        break;
    }
}

static int perr(parser *P, int line, const char *fmt, ...) CLLM_PRINTF(3, 4);
static int perr(parser *P, int line, const char *fmt, ...) {
    (void)P;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set("chat template line %d: %s", line, msg);
}

static int unexpected(parser *P, const char *wanted) {
    char d[96];
    describe(cur(P), d, sizeof d);
    if (wanted) return perr(P, cur(P)->line, "expected %s, got %s", wanted, d);
    return perr(P, cur(P)->line, "unexpected %s", d);
}

static int expect_op(parser *P, int op) {
    if (!is_op(cur(P), op)) {
        char w[16];
        snprintf(w, sizeof w, "'%s'", tpl_op_text[op]);
        return unexpected(P, w);
    }
    advance(P);
    return 0;
}

static int expect_kind(parser *P, int kind, const char *what) {
    if (cur(P)->kind != kind) return unexpected(P, what);
    advance(P);
    return 0;
}

static node *mk(parser *P, int kind, int line) {
    node *n = tpl_ar_alloc(P->ar, sizeof *n);
    if (!n) return NULL;
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

static int push(parser *P, nodelist *l, node *n) {
    /* nodelists grow by doubling; capacity is implied by n (powers of two) */
    size_t cap = 0;
    if (l->n) {
        cap = 1;
        while (cap < (size_t)l->n)
            cap *= 2;
    }
    node **v = tpl_ar_grow(P->ar, l->v, &cap, (size_t)l->n + 1, sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->v[l->n++] = n;
    return 0;
}

static int enter(parser *P) {
    if (++P->depth > TPL_MAX_DEPTH)
        return perr(P, cur(P)->line, "template nested too deeply (more than %d levels)",
                    TPL_MAX_DEPTH);
    return 0;
}

/* --- expressions --------------------------------------------------------------- */

static node *parse_expression(parser *P, bool with_condexpr);
static node *parse_tuple(parser *P, bool simplified, bool with_condexpr,
                         const char *const *extra_end, bool explicit_parens);
static node *parse_primary(parser *P);
static node *parse_postfix(parser *P, node *n);
static node *parse_filter(parser *P, node *n, bool start_inline);
static node *parse_unary(parser *P, bool with_filter);

static void note_name(parser *P, tstr name) {
    int flag = tpl_tstr_eqc(name, "varargs")  ? MACRO_VARARGS
               : tpl_tstr_eqc(name, "kwargs") ? MACRO_KWARGS
                                              : 0;
    if (flag)
        for (int k = 0; k < P->nmacros; k++)
            P->macros[k]->flags |= (uint8_t)flag;
}

static int parse_call_args(parser *P, callargs **out) {
    int line = cur(P)->line;
    if (expect_op(P, OP_LPAREN)) return -1;
    callargs *a = tpl_ar_alloc(P->ar, sizeof *a);
    if (!a) return -1;
    size_t kwcap = 0, kvcap = 0;
    bool require_comma = false;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (require_comma) {
            if (expect_op(P, OP_COMMA)) return -1;
            if (is_op(cur(P), OP_RPAREN)) break;
        }
        if (is_op(cur(P), OP_MUL)) {
            if (a->star || a->dstar)
                return perr(P, line, "invalid syntax for function call expression");
            advance(P);
            if (!(a->star = parse_expression(P, true))) return -1;
        } else if (is_op(cur(P), OP_POW)) {
            if (a->dstar) return perr(P, line, "invalid syntax for function call expression");
            advance(P);
            if (!(a->dstar = parse_expression(P, true))) return -1;
        } else if (cur(P)->kind == T_NAME && is_op(look(P), OP_ASSIGN)) {
            if (a->dstar) return perr(P, line, "invalid syntax for function call expression");
            tstr key = cur(P)->s;
            advance(P);
            advance(P);
            node *v = parse_expression(P, true);
            if (!v) return -1;
            tstr *kw = tpl_ar_grow(P->ar, a->kw, &kwcap, (size_t)a->nkw + 1, sizeof *kw);
            if (!kw) return -1;
            a->kw = kw;
            node **kv = tpl_ar_grow(P->ar, a->kwv, &kvcap, (size_t)a->nkw + 1, sizeof *kv);
            if (!kv) return -1;
            a->kwv = kv;
            a->kw[a->nkw] = key;
            a->kwv[a->nkw++] = v;
        } else {
            if (a->star || a->dstar || a->nkw)
                return perr(P, line, "invalid syntax for function call expression");
            node *v = parse_expression(P, true);
            if (!v || push(P, &a->pos, v)) return -1;
        }
        require_comma = true;
    }
    if (expect_op(P, OP_RPAREN)) return -1;
    *out = a;
    return 0;
}

static node *parse_subscribed(parser *P) {
    int line = cur(P)->line;
    node *args[3] = {NULL, NULL, NULL};
    if (is_op(cur(P), OP_COLON)) {
        advance(P);
    } else {
        node *e = parse_expression(P, true);
        if (!e) return NULL;
        if (!is_op(cur(P), OP_COLON)) return e;
        advance(P);
        args[0] = e;
    }
    if (!is_op(cur(P), OP_COLON) && !is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA)) {
        if (!(args[1] = parse_expression(P, true))) return NULL;
    }
    if (is_op(cur(P), OP_COLON)) {
        advance(P);
        if (!is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA))
            if (!(args[2] = parse_expression(P, true))) return NULL;
    }
    node *s = mk(P, N_SLICE, line);
    if (!s) return NULL;
    s->a = args[0];
    s->b = args[1];
    s->c = args[2];
    return s;
}

static node *parse_subscript(parser *P, node *obj) {
    const token *t = cur(P);
    int line = t->line;
    advance(P);
    if (is_op(t, OP_DOT)) {
        const token *attr = cur(P);
        advance(P);
        if (attr->kind == T_NAME) {
            node *g = mk(P, N_GETATTR, line);
            if (!g) return NULL;
            g->a = obj;
            g->name = attr->s;
            return g;
        }
        if (attr->kind != T_INT) {
            perr(P, attr->line, "expected name or number");
            return NULL;
        }
        node *k = mk(P, N_CONST, line), *g = mk(P, N_GETITEM, line);
        if (!k || !g) return NULL;
        k->cval = tv_int(attr->i);
        g->a = obj;
        g->b = k;
        return g;
    }
    /* '[' */
    nodelist args = {0};
    while (!is_op(cur(P), OP_RBRACKET)) {
        if (args.n && expect_op(P, OP_COMMA)) return NULL;
        node *e = parse_subscribed(P);
        if (!e || push(P, &args, e)) return NULL;
    }
    if (expect_op(P, OP_RBRACKET)) return NULL;
    node *g = mk(P, N_GETITEM, line);
    if (!g) return NULL;
    g->a = obj;
    if (args.n == 1) {
        g->b = args.v[0];
    } else {
        node *tup = mk(P, N_TUPLE, line);
        if (!tup) return NULL;
        tup->items = args;
        g->b = tup;
    }
    return g;
}

static node *parse_call(parser *P, node *fn) {
    node *c = mk(P, N_CALL, cur(P)->line);
    if (!c) return NULL;
    c->a = fn;
    if (parse_call_args(P, &c->args)) return NULL;
    return c;
}

/* Chains like a.b.c, x|f|g and a + b + c nest to the left; each link counts
 * against the depth budget until the chain ends, so the tree stays shallow
 * enough for the recursive passes over it. */
static bool chain_link(parser *P, int *links) {
    if (enter(P)) return false;
    ++*links;
    return true;
}

static node *parse_postfix(parser *P, node *n) {
    int links = 0;
    while (n) {
        bool sub = is_op(cur(P), OP_DOT) || is_op(cur(P), OP_LBRACKET);
        if (!sub && !is_op(cur(P), OP_LPAREN)) break;
        if (!chain_link(P, &links)) return NULL;
        n = sub ? parse_subscript(P, n) : parse_call(P, n);
    }
    P->depth -= links;
    return n;
}

static int parse_dotted_name(parser *P, tstr *name) {
    if (cur(P)->kind != T_NAME) return unexpected(P, "name");
    *name = cur(P)->s;
    advance(P);
    if (!is_op(cur(P), OP_DOT)) return 0;
    sbuf b;
    tpl_sb_init(&b, P->ar, 4096);
    if (tpl_sb_put(&b, name->p, name->n)) return -1;
    while (is_op(cur(P), OP_DOT)) {
        advance(P);
        if (cur(P)->kind != T_NAME) return unexpected(P, "name");
        if (tpl_sb_putc(&b, '.') || tpl_sb_put(&b, cur(P)->s.p, cur(P)->s.n)) return -1;
        advance(P);
    }
    *name = tpl_sb_str(&b);
    return 0;
}

static node *parse_filter(parser *P, node *n, bool start_inline) {
    int links = 0;
    while (is_op(cur(P), OP_PIPE) || start_inline) {
        if (!chain_link(P, &links)) return NULL;
        if (!start_inline) advance(P);
        node *f = mk(P, N_FILTER, cur(P)->line);
        if (!f || parse_dotted_name(P, &f->name)) return NULL;
        if (is_op(cur(P), OP_LPAREN) && parse_call_args(P, &f->args)) return NULL;
        f->a = n;
        n = f;
        start_inline = false;
    }
    P->depth -= links;
    return n;
}

static node *parse_test(parser *P, node *n) {
    int line = cur(P)->line;
    advance(P); /* 'is' */
    bool negated = false;
    if (is_name(cur(P), "not")) {
        advance(P);
        negated = true;
    }
    node *t = mk(P, N_TEST, line);
    if (!t || parse_dotted_name(P, &t->name)) return NULL;
    t->a = n;
    t->op = negated;
    const token *c = cur(P);
    if (is_op(c, OP_LPAREN)) {
        if (parse_call_args(P, &t->args)) return NULL;
    } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT ||
                c->kind == T_FLOAT || is_op(c, OP_LBRACKET) || is_op(c, OP_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) {
            perr(P, c->line, "you cannot chain multiple tests with is");
            return NULL;
        }
        node *arg = parse_postfix(P, parse_primary(P));
        if (!arg) return NULL;
        t->args = tpl_ar_alloc(P->ar, sizeof *t->args);
        if (!t->args || push(P, &t->args->pos, arg)) return NULL;
    }
    return t;
}

static node *parse_filter_expr(parser *P, node *n) {
    int links = 0;
    while (n) {
        bool pipe = is_op(cur(P), OP_PIPE), test = is_name(cur(P), "is");
        if (!pipe && !test && !is_op(cur(P), OP_LPAREN)) break;
        if (!chain_link(P, &links)) return NULL;
        n = pipe ? parse_filter(P, n, false) : test ? parse_test(P, n) : parse_call(P, n);
    }
    P->depth -= links;
    return n;
}

static node *parse_list(parser *P) {
    node *l = mk(P, N_LIST, cur(P)->line);
    if (!l || expect_op(P, OP_LBRACKET)) return NULL;
    while (!is_op(cur(P), OP_RBRACKET)) {
        if (l->items.n && expect_op(P, OP_COMMA)) return NULL;
        if (is_op(cur(P), OP_RBRACKET)) break;
        node *e = parse_expression(P, true);
        if (!e || push(P, &l->items, e)) return NULL;
    }
    return expect_op(P, OP_RBRACKET) ? NULL : l;
}

static node *parse_dict(parser *P) {
    node *d = mk(P, N_DICT, cur(P)->line);
    if (!d || expect_op(P, OP_LBRACE)) return NULL;
    while (!is_op(cur(P), OP_RBRACE)) {
        if (d->items.n && expect_op(P, OP_COMMA)) return NULL;
        if (is_op(cur(P), OP_RBRACE)) break;
        node *k = parse_expression(P, true);
        if (!k || expect_op(P, OP_COLON)) return NULL;
        node *v = parse_expression(P, true);
        if (!v || push(P, &d->items, k) || push(P, &d->items2, v)) return NULL;
    }
    return expect_op(P, OP_RBRACE) ? NULL : d;
}

static node *parse_primary(parser *P) {
    const token *t = cur(P);
    if (enter(P)) return NULL;
    node *n = NULL;
    if (t->kind == T_NAME) {
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") ||
            is_name(t, "False")) {
            if ((n = mk(P, N_CONST, t->line)))
                n->cval = tv_bool(t->s.p[0] == 't' || t->s.p[0] == 'T');
        } else if (is_name(t, "none") || is_name(t, "None")) {
            if ((n = mk(P, N_CONST, t->line))) n->cval = tv_none();
        } else if ((n = mk(P, N_NAME, t->line))) {
            n->name = t->s;
            note_name(P, t->s);
        }
        advance(P);
    } else if (t->kind == T_STRING) {
        tstr s = t->s;
        advance(P);
        if (cur(P)->kind == T_STRING) {
            sbuf b;
            tpl_sb_init(&b, P->ar, TPL_PARSE_BUDGET);
            if (tpl_sb_put(&b, s.p, s.n)) return NULL;
            while (cur(P)->kind == T_STRING) {
                if (tpl_sb_put(&b, cur(P)->s.p, cur(P)->s.n)) return NULL;
                advance(P);
            }
            s = tpl_sb_str(&b);
        }
        if ((n = mk(P, N_CONST, t->line))) n->cval = tv_str(s);
    } else if (t->kind == T_INT || t->kind == T_FLOAT) {
        if ((n = mk(P, N_CONST, t->line)))
            n->cval = t->kind == T_INT ? tv_int(t->i) : tv_float(t->f);
        advance(P);
    } else if (is_op(t, OP_LPAREN)) {
        advance(P);
        n = parse_tuple(P, false, true, NULL, true);
        if (n && expect_op(P, OP_RPAREN)) n = NULL;
    } else if (is_op(t, OP_LBRACKET)) {
        n = parse_list(P);
    } else if (is_op(t, OP_LBRACE)) {
        n = parse_dict(P);
    } else {
        unexpected(P, NULL);
    }
    P->depth--;
    return n;
}

static node *parse_unary(parser *P, bool with_filter) {
    const token *t = cur(P);
    if (enter(P)) return NULL;
    node *n;
    if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
        advance(P);
        node *x = parse_unary(P, false);
        n = x ? mk(P, N_UNARY, t->line) : NULL;
        if (n) {
            n->op = t->op;
            n->a = x;
        }
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static node *binop(parser *P, int kind, int op, int line, node *a, node *b) {
    if (!a || !b) return NULL;
    node *n = mk(P, kind, line);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

/* Whether jinja2's optimizer folds an expression to a constant (its
 * as_const): literals and operators, lookups, filters and tests over
 * constants, except the filters that need the render context. */
static bool foldable(const node *n);

static bool foldable_list(const nodelist *l) {
    for (int k = 0; k < l->n; k++)
        if (!foldable(l->v[k])) return false;
    return true;
}

static bool foldable(const node *n) {
    if (!n) return true;
    switch (n->kind) {
    case N_CONST:
        return true;
    case N_UNARY:
    case N_BINOP:
    case N_AND:
    case N_OR:
    case N_GETATTR:
    case N_GETITEM:
    case N_SLICE:
        return foldable(n->a) && foldable(n->b) && foldable(n->c);
    case N_COND:
        return n->c && foldable(n->a) && foldable(n->b) && foldable(n->c);
    case N_COMPARE:
    case N_CONCAT:
    case N_LIST:
    case N_TUPLE:
    case N_DICT:
        return foldable(n->a) && foldable_list(&n->items) && foldable_list(&n->items2);
    case N_FILTER:
    case N_TEST: {
        static const char *const context_filters[] = {"map", "select", "reject", "selectattr",
                                                      "rejectattr"};
        if (!n->a) return false;
        if (n->kind == N_FILTER)
            for (size_t k = 0; k < sizeof context_filters / sizeof *context_filters; k++)
                if (tpl_tstr_eqc(n->name, context_filters[k])) return false;
        const callargs *a = n->args;
        if (a && (!foldable_list(&a->pos) || !foldable(a->star) || !foldable(a->dstar)))
            return false;
        for (int k = 0; a && k < a->nkw; k++)
            if (!foldable(a->kwv[k])) return false;
        return foldable(n->a);
    }
    default:
        return false;
    }
}

/* jinja2 writes a folded negative constant into its generated Python without
 * parentheses, so `-2 ** x` runs as -(2 ** x) when x does not fold. Such
 * powers are marked; the evaluator applies it when the base is negative. */
static node *parse_pow(parser *P) {
    node *left = parse_unary(P, true);
    int links = 0;
    while (left && is_op(cur(P), OP_POW)) {
        int line = cur(P)->line;
        if (!chain_link(P, &links)) return NULL;
        advance(P);
        node *right = parse_unary(P, true);
        bool quirk = right && foldable(left) && !foldable(right);
        left = binop(P, N_BINOP, OP_POW, line, left, right);
        if (left && quirk) left->flags = POW_NEGATED_BASE;
    }
    P->depth -= links;
    return left;
}

static node *parse_math2(parser *P) {
    node *left = parse_pow(P);
    int links = 0;
    while (left && (is_op(cur(P), OP_MUL) || is_op(cur(P), OP_DIV) || is_op(cur(P), OP_FLOORDIV) ||
                    is_op(cur(P), OP_MOD))) {
        const token *t = cur(P);
        if (!chain_link(P, &links)) return NULL;
        advance(P);
        left = binop(P, N_BINOP, t->op, t->line, left, parse_pow(P));
    }
    P->depth -= links;
    return left;
}

static node *parse_concat(parser *P) {
    int line = cur(P)->line;
    node *first = parse_math2(P);
    if (!first || !is_op(cur(P), OP_TILDE)) return first;
    node *c = mk(P, N_CONCAT, line);
    if (!c || push(P, &c->items, first)) return NULL;
    while (is_op(cur(P), OP_TILDE)) {
        advance(P);
        node *e = parse_math2(P);
        if (!e || push(P, &c->items, e)) return NULL;
    }
    return c;
}

static node *parse_math1(parser *P) {
    node *left = parse_concat(P);
    int links = 0;
    while (left && (is_op(cur(P), OP_ADD) || is_op(cur(P), OP_SUB))) {
        const token *t = cur(P);
        if (!chain_link(P, &links)) return NULL;
        advance(P);
        left = binop(P, N_BINOP, t->op, t->line, left, parse_concat(P));
    }
    P->depth -= links;
    return left;
}

static node *parse_compare(parser *P) {
    int line = cur(P)->line;
    node *first = parse_math1(P);
    if (!first) return NULL;
    node *c = NULL;
    size_t opcap = 0;
    for (;;) {
        const token *t = cur(P);
        int op;
        if (t->kind == T_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT ||
                                t->op == OP_LE || t->op == OP_GT || t->op == OP_GE)) {
            op = t->op;
            advance(P);
        } else if (is_name(t, "in")) {
            op = CMP_IN;
            advance(P);
        } else if (is_name(t, "not") && is_name(look(P), "in")) {
            op = CMP_NOTIN;
            advance(P);
            advance(P);
        } else {
            break;
        }
        if (!c) {
            if (!(c = mk(P, N_COMPARE, line))) return NULL;
            c->a = first;
        }
        node *e = parse_math1(P);
        if (!e) return NULL;
        uint8_t *ops = tpl_ar_grow(P->ar, c->ops, &opcap, (size_t)c->items.n + 1, 1);
        if (!ops) return NULL;
        c->ops = ops;
        c->ops[c->items.n] = (uint8_t)op;
        if (push(P, &c->items, e)) return NULL;
    }
    return c ? c : first;
}

static node *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        int line = cur(P)->line;
        advance(P);
        if (enter(P)) return NULL;
        node *x = parse_not(P);
        P->depth--;
        if (!x) return NULL;
        node *n = mk(P, N_UNARY, line);
        if (n) n->a = x; /* op 0: not */
        return n;
    }
    return parse_compare(P);
}

static node *parse_and(parser *P) {
    node *left = parse_not(P);
    int links = 0;
    while (left && is_name(cur(P), "and")) {
        int line = cur(P)->line;
        if (!chain_link(P, &links)) return NULL;
        advance(P);
        left = binop(P, N_AND, 0, line, left, parse_not(P));
    }
    P->depth -= links;
    return left;
}

static node *parse_or(parser *P) {
    node *left = parse_and(P);
    int links = 0;
    while (left && is_name(cur(P), "or")) {
        int line = cur(P)->line;
        if (!chain_link(P, &links)) return NULL;
        advance(P);
        left = binop(P, N_OR, 0, line, left, parse_and(P));
    }
    P->depth -= links;
    return left;
}

static node *parse_condexpr(parser *P) {
    node *e1 = parse_or(P);
    int links = 0;
    while (e1 && is_name(cur(P), "if")) {
        int line = cur(P)->line;
        if (!chain_link(P, &links)) return NULL;
        advance(P);
        node *e2 = parse_or(P), *e3 = NULL;
        if (!e2) return NULL;
        if (is_name(cur(P), "else")) {
            advance(P);
            if (enter(P)) return NULL;
            e3 = parse_condexpr(P);
            P->depth--;
            if (!e3) return NULL;
        }
        node *c = mk(P, N_COND, line);
        if (!c) return NULL;
        c->a = e2;
        c->b = e1;
        c->c = e3;
        e1 = c;
    }
    P->depth -= links;
    return e1;
}

static node *parse_expression(parser *P, bool with_condexpr) {
    if (enter(P)) return NULL;
    node *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    P->depth--;
    return n;
}

static bool is_tuple_end(parser *P, const char *const *extra_end) {
    const token *t = cur(P);
    if (t->kind == T_VAR_END || t->kind == T_BLOCK_END || is_op(t, OP_RPAREN)) return true;
    for (int k = 0; extra_end && extra_end[k]; k++)
        if (is_name(t, extra_end[k])) return true;
    return false;
}

static node *parse_tuple(parser *P, bool simplified, bool with_condexpr,
                         const char *const *extra_end, bool explicit_parens) {
    int line = cur(P)->line;
    nodelist items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n && expect_op(P, OP_COMMA)) return NULL;
        if (is_tuple_end(P, extra_end)) break;
        node *e = simplified ? parse_primary(P) : parse_expression(P, with_condexpr);
        if (!e || push(P, &items, e)) return NULL;
        if (is_op(cur(P), OP_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) {
            unexpected(P, "an expression");
            return NULL;
        }
    }
    node *t = mk(P, N_TUPLE, line);
    if (t) t->items = items;
    return t;
}

/* --- statements ---------------------------------------------------------------- */

static int subparse(parser *P, const char *const *end_names, nodelist *body);

static bool can_assign(const node *n) {
    if (n->kind == N_NAME || n->kind == N_NSREF) return true;
    if (n->kind != N_TUPLE) return false;
    for (int k = 0; k < n->items.n; k++)
        if (!can_assign(n->items.v[k])) return false;
    return true;
}

static node *parse_assign_target(parser *P, bool with_namespace, bool name_only,
                                 const char *const *extra_end) {
    const token *t = cur(P);
    node *target;
    if (with_namespace && t->kind == T_NAME && is_op(look(P), OP_DOT)) {
        target = mk(P, N_NSREF, t->line);
        if (!target) return NULL;
        target->name = t->s;
        advance(P);
        advance(P);
        if (cur(P)->kind != T_NAME) {
            unexpected(P, "name");
            return NULL;
        }
        target->name2 = cur(P)->s;
        advance(P);
    } else if (name_only) {
        if (t->kind != T_NAME) {
            unexpected(P, "name");
            return NULL;
        }
        target = mk(P, N_NAME, t->line);
        if (!target) return NULL;
        target->name = t->s;
        advance(P);
    } else {
        target = parse_tuple(P, true, true, extra_end, false);
        if (!target) return NULL;
    }
    if (!can_assign(target)) {
        perr(P, t->line, "can't assign to this expression");
        return NULL;
    }
    if (target->kind == N_NAME &&
        (tpl_tstr_eqc(target->name, "true") || tpl_tstr_eqc(target->name, "false") ||
         tpl_tstr_eqc(target->name, "none"))) {
        perr(P, t->line, "can't assign to a constant");
        return NULL;
    }
    return target;
}

/* `:`? then %} then the body up to one of end_names (left current unless drop). */
static int parse_statements(parser *P, const char *const *end_names, bool drop_needle,
                            nodelist *body) {
    if (is_op(cur(P), OP_COLON)) advance(P);
    if (expect_kind(P, T_BLOCK_END, "end of statement block")) return -1;
    if (subparse(P, end_names, body)) return -1;
    if (cur(P)->kind == T_EOF) {
        char want[160] = "";
        for (int k = 0; end_names[k]; k++) {
            size_t len = strlen(want);
            snprintf(want + len, sizeof want - len, "%s'%s'", k ? " or " : "", end_names[k]);
        }
        return perr(P, cur(P)->line, "unexpected end of template, expected %s", want);
    }
    if (drop_needle) advance(P);
    return 0;
}

static int parse_signature(parser *P, node *n) {
    if (expect_op(P, OP_LPAREN)) return -1;
    size_t cap = 0;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (n->nparams && expect_op(P, OP_COMMA)) return -1;
        node *arg = parse_assign_target(P, false, true, NULL);
        if (!arg) return -1;
        tstr *params = tpl_ar_grow(P->ar, n->params, &cap, (size_t)n->nparams + 1, sizeof *params);
        if (!params) return -1;
        n->params = params;
        n->params[n->nparams++] = arg->name;
        if (is_op(cur(P), OP_ASSIGN)) {
            advance(P);
            node *d = parse_expression(P, true);
            if (!d || push(P, &n->items2, d)) return -1;
        } else if (n->items2.n) {
            return perr(P, arg->line, "non-default argument follows default argument");
        }
    }
    for (int k = 0; k < n->nparams; k++)
        if (tpl_tstr_eqc(n->params[k], "caller") && k < n->nparams - n->items2.n)
            return perr(P, n->line,
                        "when defining macros or call blocks the special \"caller\" argument "
                        "must be omitted or be given a default");
    return expect_op(P, OP_RPAREN);
}

static node *parse_for(parser *P, int line) {
    static const char *const in_end[] = {"in", NULL};
    static const char *const rec_end[] = {"recursive", NULL};
    static const char *const body_end[] = {"endfor", "else", NULL};
    static const char *const else_end[] = {"endfor", NULL};
    node *n = mk(P, N_FOR, line);
    if (!n || !(n->a = parse_assign_target(P, false, false, in_end))) return NULL;
    if (!is_name(cur(P), "in")) {
        unexpected(P, "'in'");
        return NULL;
    }
    advance(P);
    if (!(n->b = parse_tuple(P, false, false, rec_end, false))) return NULL;
    if (is_name(cur(P), "if")) {
        advance(P);
        if (!(n->c = parse_expression(P, true))) return NULL;
    }
    if (is_name(cur(P), "recursive")) {
        perr(P, cur(P)->line, "recursive loops are not supported");
        return NULL;
    }
    P->loop_depth++;
    int rc = parse_statements(P, body_end, false, &n->items);
    P->loop_depth--;
    if (rc) return NULL;
    bool has_else = is_name(cur(P), "else");
    advance(P);
    if (has_else && parse_statements(P, else_end, true, &n->items2)) return NULL;
    return n;
}

static node *parse_if(parser *P, int line) {
    static const char *const body_end[] = {"elif", "else", "endif", NULL};
    static const char *const else_end[] = {"endif", NULL};
    node *result = mk(P, N_IF, line), *n = result;
    if (!n) return NULL;
    int links = 0; /* each elif nests one level deeper */
    for (;;) {
        if (!(n->a = parse_tuple(P, false, false, NULL, false))) return NULL;
        if (parse_statements(P, body_end, false, &n->items)) return NULL;
        const token *t = cur(P);
        advance(P);
        if (is_name(t, "elif")) {
            node *e = chain_link(P, &links) ? mk(P, N_IF, t->line) : NULL;
            if (!e || push(P, &n->items2, e)) return NULL;
            n = e;
            continue;
        }
        if (is_name(t, "else") && parse_statements(P, else_end, true, &n->items2)) return NULL;
        break;
    }
    P->depth -= links;
    return result;
}

static node *parse_set(parser *P, int line) {
    static const char *const end[] = {"endset", NULL};
    node *target = parse_assign_target(P, true, false, NULL);
    if (!target) return NULL;
    if (is_op(cur(P), OP_ASSIGN)) {
        advance(P);
        node *n = mk(P, N_SET, line);
        if (!n) return NULL;
        n->a = target;
        n->b = parse_tuple(P, false, true, NULL, false);
        return n->b ? n : NULL;
    }
    node *n = mk(P, N_SETBLOCK, line);
    if (!n) return NULL;
    n->a = target;
    if (is_op(cur(P), OP_PIPE) && !(n->b = parse_filter(P, NULL, false))) return NULL;
    if (parse_statements(P, end, true, &n->items)) return NULL;
    return n;
}

static node *parse_macro_like(parser *P, node *n, const char *end_name) {
    const char *const end[] = {end_name, NULL};
    if (P->nmacros >= TPL_MAX_DEPTH) {
        perr(P, n->line, "macros nested too deeply");
        return NULL;
    }
    P->macros[P->nmacros++] = n;
    int saved_loops = P->loop_depth;
    P->loop_depth = 0;
    int rc = parse_statements(P, end, true, &n->items);
    P->loop_depth = saved_loops;
    P->nmacros--;
    return rc ? NULL : n;
}

static node *parse_macro(parser *P, int line) {
    node *n = mk(P, N_MACRO, line);
    if (!n) return NULL;
    node *name = parse_assign_target(P, false, true, NULL);
    if (!name) return NULL;
    n->name = name->name;
    if (parse_signature(P, n)) return NULL;
    return parse_macro_like(P, n, "endmacro");
}

static node *parse_filter_block(parser *P, int line) {
    static const char *const end[] = {"endfilter", NULL};
    node *n = mk(P, N_FILTERBLOCK, line);
    if (!n || !(n->b = parse_filter(P, NULL, true))) return NULL;
    return parse_statements(P, end, true, &n->items) ? NULL : n;
}

static node *parse_statement(parser *P) {
    const token *t = cur(P);
    if (t->kind != T_NAME) {
        unexpected(P, "tag name");
        return NULL;
    }
    if (enter(P)) return NULL;
    int line = t->line;
    node *n = NULL;
    advance(P);
    if (is_name(t, "for")) {
        n = parse_for(P, line);
    } else if (is_name(t, "if")) {
        n = parse_if(P, line);
    } else if (is_name(t, "set")) {
        n = parse_set(P, line);
    } else if (is_name(t, "macro")) {
        n = parse_macro(P, line);
    } else if (is_name(t, "filter")) {
        n = parse_filter_block(P, line);
    } else if (is_name(t, "print")) {
        if ((n = mk(P, N_OUTPUT, line)) && !(n->a = parse_tuple(P, false, true, NULL, false)))
            n = NULL;
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (P->loop_depth == 0)
            perr(P, line, "'%.*s' outside loop", (int)t->s.n, t->s.p);
        else
            n = mk(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, line);
    } else if (is_name(t, "generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        if ((n = mk(P, N_SCOPE, line)) && parse_statements(P, end, true, &n->items)) n = NULL;
    } else if (is_name(t, "block") || is_name(t, "extends") || is_name(t, "include") ||
               is_name(t, "import") || is_name(t, "from") || is_name(t, "autoescape") ||
               is_name(t, "do") || is_name(t, "call") || is_name(t, "with")) {
        perr(P, line, "the '%.*s' tag is not supported in chat templates", (int)t->s.n, t->s.p);
    } else {
        perr(P, line, "encountered unknown tag '%.*s'", (int)(t->s.n > 40 ? 40 : t->s.n), t->s.p);
    }
    P->depth--;
    return n;
}

static int subparse(parser *P, const char *const *end_names, nodelist *body) {
    for (;;) {
        const token *t = cur(P);
        if (t->kind == T_EOF) return 0;
        if (t->kind == T_DATA) {
            node *n = mk(P, N_TEXT, t->line);
            if (!n) return -1;
            n->name = t->s;
            if (push(P, body, n)) return -1;
            advance(P);
        } else if (t->kind == T_VAR_BEGIN) {
            advance(P);
            node *n = mk(P, N_OUTPUT, t->line);
            if (!n || !(n->a = parse_tuple(P, false, true, NULL, false))) return -1;
            if (expect_kind(P, T_VAR_END, "end of print statement")) return -1;
            if (push(P, body, n)) return -1;
        } else if (t->kind == T_BLOCK_BEGIN) {
            advance(P);
            for (int k = 0; end_names && end_names[k]; k++)
                if (is_name(cur(P), end_names[k])) return 0;
            node *n = parse_statement(P);
            if (!n) return -1;
            if (expect_kind(P, T_BLOCK_END, "end of statement block")) return -1;
            if (push(P, body, n)) return -1;
        } else {
            return unexpected(P, NULL);
        }
    }
}

/* --- name resolution ---------------------------------------------------------- */

static int resolve(node *n, bool soft);

static int resolve_list(nodelist *l, bool soft) {
    for (int k = 0; k < l->n; k++)
        if (l->v[k] && resolve(l->v[k], soft)) return -1;
    return 0;
}

static int resolve_args(callargs *a, bool soft) {
    if (!a) return 0;
    if (resolve_list(&a->pos, soft)) return -1;
    for (int k = 0; k < a->nkw; k++)
        if (resolve(a->kwv[k], soft)) return -1;
    if (a->star && resolve(a->star, soft)) return -1;
    if (a->dstar && resolve(a->dstar, soft)) return -1;
    return 0;
}

static int resolve(node *n, bool soft) {
    if (n->kind == N_FILTER) {
        n->fn.filter = tpl_filter_find(n->name);
        if (!n->fn.filter && !soft)
            return err_set("chat template line %d: no filter named '%.*s'", n->line, (int)n->name.n,
                           n->name.p);
    } else if (n->kind == N_TEST) {
        n->fn.test = tpl_test_find(n->name);
        if (!n->fn.test && !soft)
            return err_set("chat template line %d: no test named '%.*s'", n->line, (int)n->name.n,
                           n->name.p);
    }
    /* jinja2 compiles `if` statements and `a if b else c` in a "soft" frame;
     * loops, macros and blocks open a fresh one. */
    bool inner = soft;
    if (n->kind == N_IF || n->kind == N_COND) inner = true;
    if (n->kind == N_FOR || n->kind == N_MACRO || n->kind == N_SCOPE || n->kind == N_FILTERBLOCK)
        inner = false;
    if (n->kind == N_FOR) {
        /* the iterable is evaluated in the enclosing frame */
        if (n->b && resolve(n->b, soft)) return -1;
        if (n->a && resolve(n->a, false)) return -1;
        if (n->c && resolve(n->c, false)) return -1;
    } else {
        if (n->a && resolve(n->a, inner)) return -1;
        if (n->b && resolve(n->b, n->kind == N_SETBLOCK ? soft : inner)) return -1;
        if (n->c && resolve(n->c, inner)) return -1;
    }
    if (resolve_list(&n->items, inner) || resolve_list(&n->items2, inner)) return -1;
    return resolve_args(n->args, inner);
}

int tpl_parse(tpl_arena *a, const token *toks, size_t ntoks, nodelist *body) {
    parser P = {0};
    P.ar = a;
    P.t = toks;
    P.n = ntoks;
    body->n = 0;
    body->v = NULL;
    if (subparse(&P, NULL, body)) return -1;
    if (cur(&P)->kind != T_EOF) return unexpected(&P, NULL);
    return resolve_list(body, false);
}
