/* Chat-template tests (`x is defined`, `x is string`, `n is divisibleby 3`,
 * `selectattr('role', 'equalto', 'user')`): jinja2's built-in tests
 * (jinja2/tests.py) with Python's type model - a bool is a number but not an
 * integer, a dict is a sequence, Undefined is iterable and a sequence.
 * Tests no chat template needs (lower, upper, sameas, callable, escaped,
 * filter, test) are left out; see tests/data/templates/README.md. */
#include "chat/template_internal.h"

static int arg1(tpl_rt *r, const node *at, const char *name, targs *a, tv *out) {
    static const char *const names[] = {"other"};
    bool given;
    if (tpl_args_bind(r, at, name, a, names, 1, out, &given)) return -1;
    if (!given) return tpl_rt_error(r, at, "test '%s' needs an argument", name);
    return 0;
}

#define SIMPLE_TEST(fn, name, expr)                                                                \
    static int fn(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {                          \
        if (no_args(r, at, name, a)) return -1;                                                    \
        *out = (expr);                                                                             \
        return 0;                                                                                  \
    }

SIMPLE_TEST(t_defined, "defined", v.kind != TV_UNDEF)
SIMPLE_TEST(t_undefined, "undefined", v.kind == TV_UNDEF)
SIMPLE_TEST(t_none, "none", v.kind == TV_NONE)
SIMPLE_TEST(t_boolean, "boolean", v.kind == TV_BOOL)
SIMPLE_TEST(t_true, "true", v.kind == TV_BOOL && v.u.b)
SIMPLE_TEST(t_false, "false", v.kind == TV_BOOL && !v.u.b)
SIMPLE_TEST(t_integer, "integer", v.kind == TV_INT)
SIMPLE_TEST(t_float, "float", v.kind == TV_FLOAT)
SIMPLE_TEST(t_number, "number", v.kind == TV_INT || v.kind == TV_FLOAT || v.kind == TV_BOOL)
SIMPLE_TEST(t_string, "string", v.kind == TV_STR)
SIMPLE_TEST(t_mapping, "mapping", v.kind == TV_DICT)
SIMPLE_TEST(t_iterable, "iterable",
            v.kind == TV_STR || v.kind == TV_LIST || v.kind == TV_DICT || v.kind == TV_UNDEF ||
                v.kind == TV_GEN || v.kind == TV_LOOP)
SIMPLE_TEST(t_sequence, "sequence",
            v.kind == TV_STR || v.kind == TV_DICT || v.kind == TV_UNDEF ||
                (v.kind == TV_LIST && v.sub != LIST_ITEMS && v.sub != LIST_KEYS &&
                 v.sub != LIST_VALUES))

/* value % n == want, with Python's % (so undefined and strings raise). */
static int mod_test(tpl_rt *r, const node *at, tv v, tv n, int64_t want, bool *out) {
    tv m;
    if (tpl_tv_binop(r, at, OP_MOD, v, n, &m)) return -1;
    return tpl_tv_equal(r, m, tv_int(want), out);
}

static int t_odd(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    if (no_args(r, at, "odd", a)) return -1;
    return mod_test(r, at, v, tv_int(2), 1, out);
}

static int t_even(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    if (no_args(r, at, "even", a)) return -1;
    return mod_test(r, at, v, tv_int(2), 0, out);
}

static int t_divisibleby(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    static const char *const names[] = {"num"};
    tv n;
    bool given;
    if (tpl_args_bind(r, at, "divisibleby", a, names, 1, &n, &given)) return -1;
    if (!given) return tpl_rt_error(r, at, "test 'divisibleby' needs an argument");
    return mod_test(r, at, v, n, 0, out);
}

static int t_in(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    tv seq;
    if (arg1(r, at, "in", a, &seq)) return -1;
    return tpl_tv_contains(r, at, seq, v, out);
}

static int t_eq(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    tv o;
    if (arg1(r, at, "eq", a, &o)) return -1;
    return tpl_tv_equal(r, v, o, out);
}

static int t_ne(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    tv o;
    if (arg1(r, at, "ne", a, &o) || tpl_tv_equal(r, v, o, out)) return -1;
    *out = !*out;
    return 0;
}

static int order_test(tpl_rt *r, const node *at, tv v, targs *a, const char *op, bool *out) {
    tv o;
    int c;
    if (arg1(r, at, op, a, &o) || tpl_tv_compare(r, at, op, v, o, &c)) return -1;
    *out = op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
    return 0;
}

static int t_lt(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    return order_test(r, at, v, a, "<", out);
}
static int t_le(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    return order_test(r, at, v, a, "<=", out);
}
static int t_gt(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    return order_test(r, at, v, a, ">", out);
}
static int t_ge(tpl_rt *r, const node *at, tv v, targs *a, bool *out) {
    return order_test(r, at, v, a, ">=", out);
}

static const struct {
    const char *name;
    tpl_test_fn fn;
} tests[] = {
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"false", t_false},
    {"true", t_true},
    {"integer", t_integer},
    {"float", t_float},
    {"string", t_string},
    {"mapping", t_mapping},
    {"number", t_number},
    {"sequence", t_sequence},
    {"iterable", t_iterable},
    {"in", t_in},
    {"==", t_eq},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"!=", t_ne},
    {"ne", t_ne},
    {">", t_gt},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">=", t_ge},
    {"ge", t_ge},
    {"<", t_lt},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<=", t_le},
    {"le", t_le},
};

tpl_test_fn tpl_test_find(tstr name) {
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (tpl_tstr_eqc(name, tests[i].name)) return tests[i].fn;
    return NULL;
}
