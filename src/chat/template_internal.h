/* Private types of the chat-template interpreter (template*.c): the arena
 * every parse and render allocates from, the value type, the tokens, the
 * syntax tree, and the entry points one file offers the others.
 *
 * The pipeline is template_lex.c (source -> tokens, with jinja2's whitespace
 * control), template_parse.c (tokens -> tree), template_eval.c (tree + JSON
 * context -> text). Values (template_value.c) follow Python's semantics, as
 * jinja2 sees them: str() and repr(), ==, <, truthiness; Python's str
 * operations are template_str.c, its character classes template_unicode.c.
 * Filters, tests, and methods with globals live in template_filters.c,
 * template_tests.c, template_methods.c; json.dumps in template_json.c; the
 * arena in template_arena.c; the built-in templates in template_builtin.c.
 *
 * Memory: a parse owns one arena (the tree and its literals); a render owns
 * another (every value and string it makes) and frees it whole at the end, so
 * no evaluation path frees anything and an error can return from anywhere.
 * Each arena has a byte budget; exceeding it is an error, not a crash.
 *
 * All of this links into the one cllm library, so every name these files
 * export starts with tpl_ (the short tv_/tstr_c helpers here are inline). */
#ifndef CLLM_CHAT_TEMPLATE_INTERNAL_H
#define CLLM_CHAT_TEMPLATE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/template.h"
#include "util/error.h"

/* --- limits ----------------------------------------------------------------- */

#define TPL_MAX_DEPTH 400              /* nesting of statements and expressions */
#define TPL_MAX_EVAL_DEPTH 1000        /* evaluation frames, macro calls included */
#define TPL_PARSE_BUDGET (64u << 20)   /* bytes of tree per template */
#ifndef CLLM_FUZZ_LIMITS
#define TPL_RENDER_BUDGET (256u << 20) /* bytes a render may allocate */
#define TPL_MAX_OUTPUT (64u << 20)     /* bytes of rendered text */
#define TPL_MAX_STEPS 10000000L        /* statements, loop iterations, calls (~1 s) */
#else
/* The libFuzzer build (CLLM_FUZZ): under its sanitizers a template that runs
 * to the limits above takes 8 s per render, near the harness's timeout and
 * the time of thousands of ordinary inputs. Smaller limits take the same
 * paths. The budget stays 4x the output limit, so text that reaches the
 * output limit fails on that, not on memory. */
#define TPL_RENDER_BUDGET (4u << 20)
#define TPL_MAX_OUTPUT (1u << 20)
#define TPL_MAX_STEPS 100000L
#endif
#define TPL_MAX_RANGE 100000           /* jinja2's sandbox MAX_RANGE */

/* --- arena ------------------------------------------------------------------ */

typedef struct tpl_arena tpl_arena;
tpl_arena *tpl_ar_new(size_t budget);
void tpl_ar_free(tpl_arena *a);
/* NULL (with err_set) once the budget is spent. Memory is 16-byte aligned, zeroed. */
void *tpl_ar_alloc(tpl_arena *a, size_t n);
/* Grows an array to hold at least `need` elements of `size` bytes; *cap is updated. */
void *tpl_ar_grow(tpl_arena *a, void *p, size_t *cap, size_t need, size_t size);

/* Strings are UTF-8 byte ranges, never NUL-terminated by contract. */
typedef struct {
    const char *p;
    size_t n;
} tstr;

static inline tstr tstr_c(const char *s);
bool tpl_tstr_eq(tstr a, tstr b);
bool tpl_tstr_eqc(tstr a, const char *c);

/* A growable byte buffer in the arena (old storage is left to the arena). */
typedef struct {
    tpl_arena *ar;
    char *p;
    size_t n, cap, limit;
} sbuf;
void tpl_sb_init(sbuf *b, tpl_arena *a, size_t limit);
int tpl_sb_put(sbuf *b, const void *s, size_t n);
int tpl_sb_putc(sbuf *b, char c);
int tpl_sb_puts(sbuf *b, const char *s);
int tpl_sb_printf(sbuf *b, const char *fmt, ...) CLLM_PRINTF(2, 3);
int tpl_sb_put_cp(sbuf *b, uint32_t cp); /* one code point as UTF-8 */
static inline tstr tpl_sb_str(const sbuf *b) {
    return (tstr){b->p ? b->p : "", b->n};
}

/* --- UTF-8 and Python character classes -------------------------------------- */

/* Decodes one code point at s[*i] (advancing *i); input is valid UTF-8. */
uint32_t tpl_utf8_next(const char *s, size_t n, size_t *i);
size_t tpl_utf8_len(tstr s); /* code points */
bool tpl_py_isspace(uint32_t cp);     /* str.isspace() */
bool tpl_py_isprintable(uint32_t cp); /* str.isprintable(), approximately */
/* A decimal digit's value (any script: what int() and float() read), or -1. */
int tpl_py_decimal(uint32_t cp);
bool tpl_py_iscased(uint32_t cp);          /* Lu, Ll, Lt: what str.title() looks at */
bool tpl_py_iscase_ignorable(uint32_t cp); /* Unicode Case_Ignorable (final sigma) */
/* Appends the upper/title/lower case of cp (may be several code points: 'ß'). */
int tpl_py_upper_cp(sbuf *b, uint32_t cp);
int tpl_py_title_cp(sbuf *b, uint32_t cp);
int tpl_py_lower_cp(sbuf *b, uint32_t cp);

/* --- values ----------------------------------------------------------------- */

typedef enum {
    TV_UNDEF, /* jinja2's Undefined: renders empty, falsy; most other uses raise u.undef */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_LIST, /* list, tuple, dict view, range: see tv_sub */
    TV_DICT,
    TV_GEN,  /* a one-shot iterator (generator, reversed()) */
    TV_NS,   /* namespace(): the only mutable object */
    TV_LOOP, /* a for loop's `loop` */
    TV_MACRO,
    TV_FUNC, /* a built-in function or bound method */
} tv_kind;

enum { LIST_PLAIN, LIST_TUPLE, LIST_ITEMS, LIST_KEYS, LIST_VALUES, LIST_RANGE };
/* TV_STR's sub: a plain str, or markupsafe's Markup (what `safe` and `escape`
 * make). Autoescaping is off in chat templates, so Markup prints as itself,
 * but it escapes what is added to it: ('<a>'|safe) + '<' is '<a>&lt;'. */
enum { STR_PLAIN, STR_MARKUP };

typedef struct tlist tlist;
typedef struct tdict tdict;
typedef struct ttaint ttaint;
typedef struct tgen tgen;
typedef struct tns tns;
typedef struct tloop tloop;
typedef struct tmacro tmacro;
typedef struct tfunc tfunc;

typedef struct tv {
    uint8_t kind;
    uint8_t sub; /* TV_LIST: LIST_* */
    union {
        bool b;
        int64_t i;
        double f;
        tstr s;
        tlist *l;
        tdict *d;
        tgen *g;
        tns *ns;
        tloop *loop;
        tmacro *m;
        tfunc *fn;
        const char *undef; /* the message an Undefined raises when used */
    } u;
    /* TV_STR: the byte ranges of the string that came from the request (see
     * template_taint.c); NULL when none did. Other kinds: unused, their
     * taint is that of what they hold. */
    const ttaint *taint;
} tv;

struct tlist {
    size_t n;
    tv *v;
    int64_t start, stop, step; /* LIST_RANGE only, for repr */
};
struct tdict {
    size_t n, cap;
    tv *k, *v;
};
struct tgen {
    tlist *src;
    size_t pos;
    const char *type; /* "generator", "list_reverseiterator" */
    const char *err;  /* a lazy filter's error, raised when the generator is consumed */
};
/* Named values: a scope's variables, a namespace's attributes. */
typedef struct {
    size_t n, cap;
    tstr *k;
    tv *v;
} tvars;
/* Sets name (replacing, or appending in order); -1 when out of memory. */
int tpl_tvars_set(tpl_arena *a, tvars *t, tstr name, tv v);
bool tpl_tvars_get(const tvars *t, tstr name, tv *out);

struct tns {
    tvars attrs;
};

static inline tv tv_undef(const char *msg) {
    tv v = {TV_UNDEF, 0, {.undef = msg}, NULL};
    return v;
}
static inline tv tv_none(void) {
    tv v = {TV_NONE, 0, {.i = 0}, NULL};
    return v;
}
static inline tv tv_bool(bool b) {
    tv v = {TV_BOOL, 0, {.b = b}, NULL};
    return v;
}
static inline tv tv_int(int64_t i) {
    tv v = {TV_INT, 0, {.i = i}, NULL};
    return v;
}
static inline tv tv_float(double f) {
    tv v = {TV_FLOAT, 0, {.f = f}, NULL};
    return v;
}
static inline tv tv_str(tstr s) {
    tv v = {TV_STR, 0, {.s = s}, NULL};
    return v;
}
static inline tv tv_markup(tstr s) {
    tv v = {TV_STR, STR_MARKUP, {.s = s}, NULL};
    return v;
}
static inline bool tv_is_markup(tv v) {
    return v.kind == TV_STR && v.sub == STR_MARKUP;
}
/* s as a str of the same type as `like` (Markup in, Markup out). */
static inline tv tv_str_as(tv like, tstr s) {
    return tv_is_markup(like) ? tv_markup(s) : tv_str(s);
}
static inline tv tv_list(tlist *l, int sub) {
    tv v = {TV_LIST, (uint8_t)sub, {.l = l}, NULL};
    return v;
}
static inline tv tv_dict(tdict *d) {
    tv v = {TV_DICT, 0, {.d = d}, NULL};
    return v;
}

static inline tstr tstr_c(const char *s) {
    tstr t = {s, 0};
    while (s[t.n])
        t.n++;
    return t;
}

/* --- taint: which bytes of a rendering came from the request ---------------- */

/* Sorted, disjoint byte ranges of one string or output buffer. A string's
 * taint is immutable once a value carries it; a buffer's grows as it is
 * written. The rule (template_taint.c) is conservative: every string made by
 * a filter, method, function, operator or slice from a value that holds
 * tainted bytes is tainted whole; only concatenation (+, ~), output and
 * captured blocks keep byte ranges, so template text next to request text
 * stays template text. */
typedef struct {
    size_t off, len;
} tspan;
struct ttaint {
    size_t n, cap;
    tspan *v;
};
/* --- tokens ----------------------------------------------------------------- */

typedef enum {
    T_EOF,
    T_DATA,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
} tok_kind;

/* Operators (T_OP), in the lexer's longest-match order. */
typedef enum {
    OP_FLOORDIV,
    OP_POW,
    OP_EQ,
    OP_NE,
    OP_GE,
    OP_LE,
    OP_ADD,
    OP_SUB,
    OP_DIV,
    OP_MUL,
    OP_MOD,
    OP_TILDE,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_GT,
    OP_LT,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMICOLON,
    OP_COUNT
} op_kind;
extern const char *const tpl_op_text[OP_COUNT];

typedef struct {
    uint8_t kind;
    uint8_t op;
    int line;
    tstr s;    /* T_DATA, T_NAME, T_STRING (unescaped) */
    int64_t i; /* T_INT */
    double f;  /* T_FLOAT */
} token;

/* Lexes normalized source into tokens (arena). -1 with err_set on a lexical error. */
int tpl_lex(tpl_arena *a, const char *src, size_t n, token **out, size_t *nout);

/* --- syntax tree ------------------------------------------------------------ */

typedef enum {
    /* expressions */
    N_CONST,   /* cval */
    N_NAME,    /* name */
    N_LIST,    /* items */
    N_TUPLE,   /* items */
    N_DICT,    /* items (keys), items2 (values) */
    N_GETATTR, /* a.name */
    N_GETITEM, /* a[b] */
    N_SLICE,   /* a:b:c, each may be NULL (only as N_GETITEM's b) */
    N_CALL,    /* a(args) */
    N_FILTER,  /* a|name(args); a is NULL inside filter blocks */
    N_TEST,    /* a is [not] name(args); op = 1 when negated */
    N_UNARY,   /* op a: OP_SUB, OP_ADD, or 0 for `not` */
    N_BINOP,   /* a op b */
    N_AND,     /* a and b */
    N_OR,      /* a or b */
    N_COMPARE, /* a ops[0] items[0] ops[1] items[1] ... */
    N_COND,    /* b if a else c (c may be NULL) */
    N_CONCAT,  /* items joined by ~ */
    N_NSREF,   /* name.name2 as an assignment target */
    /* statements */
    N_TEXT,        /* name: the text */
    N_OUTPUT,      /* {{ a }} */
    N_IF,          /* if a: items else items2 */
    N_FOR,         /* for a in b if c: items else items2 */
    N_SET,         /* set a = b */
    N_SETBLOCK,    /* set a | b: items endset */
    N_MACRO,       /* macro name(params = defaults): items */
    N_FILTERBLOCK, /* filter b: items */
    N_SCOPE,       /* generation: items */
    N_BREAK,
    N_CONTINUE,
} node_kind;

/* Comparison operators of N_COMPARE beyond op_kind's. */
enum { CMP_IN = OP_COUNT, CMP_NOTIN };

typedef struct node node;
typedef struct {
    int n;
    node **v;
} nodelist;

typedef struct tpl_rt tpl_rt;
typedef struct targs targs;
typedef int (*tpl_filter_fn)(tpl_rt *r, const node *at, tv v, targs *a, tv *out);
typedef int (*tpl_test_fn)(tpl_rt *r, const node *at, tv v, targs *a, bool *out);
typedef int (*tpl_func_fn)(tpl_rt *r, const node *at, tv self, targs *a, tv *out);

typedef struct {
    nodelist pos;
    int nkw;
    tstr *kw;
    node **kwv;
    node *star, *dstar; /* *args, **kwargs */
} callargs;

enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2 };
/* N_BINOP `**` whose base jinja2 folds to a constant (see template_parse.c) */
enum { POW_NEGATED_BASE = 1 };

struct node {
    uint8_t kind;
    uint8_t op;
    uint8_t flags; /* N_MACRO: MACRO_*; N_BINOP: POW_NEGATED_BASE */
    int line;
    node *a, *b, *c;
    nodelist items, items2;
    tstr name, name2;
    tstr *params; /* N_MACRO: parameter names (defaults in items2, last ones) */
    int nparams;
    uint8_t *ops;   /* N_COMPARE */
    callargs *args; /* N_CALL, N_FILTER, N_TEST */
    union {
        tpl_filter_fn filter;
        tpl_test_fn test;
    } fn;
    tv cval;
};

/* Parses tokens into the template body. -1 with err_set. */
int tpl_parse(tpl_arena *a, const token *toks, size_t ntoks, nodelist *body);
/* Renders the body (template_eval.c); see chat_template_render_marked. */
char *tpl_render(const nodelist *body, json_t *context, const char *const *trusted, chat_span **spans,
                 size_t *nspans);

/* --- runtime ---------------------------------------------------------------- */

struct targs {
    int n;
    tv *pos;
    int nk;
    tstr *kname;
    tv *kval;
};

struct tmacro {
    const node *def; /* N_MACRO */
    struct scope *closure;
};

/* How a str method treats a Markup self (markupsafe's wrappers): MK_NONE
 * returns what str's does (startswith, find, ...); the others return Markup
 * (a list or tuple of Markup), after escaping the second argument
 * (replace's new) or each item of the first (join). */
enum { MK_NONE, MK_RESULT, MK_ESCAPE_ARG1, MK_ESCAPE_ITEMS };

struct tfunc {
    tpl_func_fn fn;
    const char *name;
    tv self;
    uint8_t markup; /* MK_*: a str method bound to a Markup */
};

struct tloop {
    tlist *items;
    size_t index; /* 0-based */
};

/* Raises a runtime error at a node: "chat template line N: ...". Returns -1. */
int tpl_rt_error(tpl_rt *r, const node *at, const char *fmt, ...) CLLM_PRINTF(3, 4);
tpl_arena *tpl_rt_arena(tpl_rt *r);
/* Counts one unit of work; -1 past TPL_MAX_STEPS. */
int tpl_rt_step(tpl_rt *r, const node *at);
/* Calls any callable (macro, function) with arguments. */
int tpl_rt_call(tpl_rt *r, const node *at, tv fn, targs *a, tv *out);
/* Attribute and item lookup as jinja2's sandbox does it (undefined when missing). */
int tpl_rt_getattr(tpl_rt *r, const node *at, tv obj, tstr name, tv *out);
int tpl_rt_getitem(tpl_rt *r, const node *at, tv obj, tv key, tv *out);
/* Raises the error an undefined value carries. */
int tpl_rt_undefined_error(tpl_rt *r, const node *at, tv u);
/* Applies a filter. jinja2's map/select/reject/selectattr/rejectattr/unique/
 * items/batch are lazy generators, so their errors surface only when the
 * result is consumed; here they are computed at once and an error is kept in
 * the generator until then. */
int tpl_rt_apply_filter(tpl_rt *r, const node *at, tpl_filter_fn f, tv v, targs *a, tv *out);
/* The error a failed lazy filter left, when a generator is consumed. */
int tpl_rt_gen_check(tpl_rt *r, const node *at, tv g);
/* Calls the filter/test named by a string value (for map(), select(), ...). */
int tpl_rt_call_filter_named(tpl_rt *r, const node *at, tstr name, tv v, targs *a, tv *out);
int tpl_rt_call_test_named(tpl_rt *r, const node *at, tstr name, tv v, targs *a, bool *out);
/* An Undefined with a formatted message (arena). */
tv tpl_rt_undef(tpl_rt *r, const char *fmt, ...) CLLM_PRINTF(2, 3);
/* raise_exception(): marks the error as the template's own message. */
int tpl_rt_raise(tpl_rt *r, const node *at, tstr msg);

/* Appends a range (merged with the last when they touch); -1 out of memory. */
int tpl_taint_add(tpl_arena *a, ttaint *t, size_t off, size_t len);
/* Appends src's ranges shifted by `shift`, clipped to `limit` bytes past shift. */
int tpl_taint_add_shifted(tpl_arena *a, ttaint *t, const ttaint *src, size_t shift, size_t limit);
/* Whether v holds tainted bytes anywhere: a string's own, or any string inside
 * a list, dict, generator, namespace, loop or a bound method's self. */
bool tpl_tv_tainted(tv v);
/* v with every string in it tainted whole (containers are copied, so shared
 * values such as template constants are never changed). */
int tpl_taint_all(tpl_rt *r, tv v, tv *out);
/* When `tainted_in` (the result of an operation on tainted inputs), every
 * string in `*out` tainted: those that lie inside `source` (a string the
 * operation read: trim's, split's, a slice's) with its taint at those bytes,
 * the rest whole. */
int tpl_taint_result(tpl_rt *r, bool tainted_in, tv source, tv *out);
bool tpl_targs_tainted(const targs *a);

/* Value helpers (template_value.c). Those that can fail take the runtime. */
bool tpl_tv_truthy(tv v);
const char *tpl_tv_type_name(tv v); /* Python type name: 'str', 'int', 'dict', ... */
int tpl_tv_equal(tpl_rt *r, tv a, tv b, bool *eq);
/* Python ordering: <0, 0, >0, or a TypeError naming `op` for unorderable types. */
int tpl_tv_compare(tpl_rt *r, const node *at, const char *op, tv a, tv b, int *cmp);
int tpl_tv_to_str(tpl_rt *r, tv v, sbuf *b);       /* str(v) */
int tpl_tv_repr(tpl_rt *r, tv v, sbuf *b);         /* repr(v) */
int tpl_tv_stringify(tpl_rt *r, tv v, tstr *out);  /* str(v) as an arena string */
void tpl_fmt_float(double f, char *buf, size_t n); /* Python repr(float) */
tlist *tpl_tl_new(tpl_arena *a, size_t n);
tdict *tpl_td_new(tpl_arena *a, size_t cap);
int tpl_td_set(tpl_rt *r, tdict *d, tv k, tv v); /* insert or replace; keeps first position */
bool tpl_td_get_str(const tdict *d, tstr k, tv *out);
int tpl_td_get(tpl_rt *r, const tdict *d, tv k, tv *out, bool *found);
/* Items to iterate over: list items, dict keys, string characters, the rest of
 * a generator (consumed); undefined gives none; other types are an error. */
int tpl_tv_iterate(tpl_rt *r, const node *at, tv v, tlist **out);
int tpl_tv_length(tpl_rt *r, const node *at, tv v, int64_t *n);
/* Characters of a string as single-character strings. */
tlist *tpl_str_chars(tpl_arena *a, tstr s);
/* Converts a JSON value (strings point into it; it must outlive the render). */
int tpl_tv_from_json(tpl_rt *r, json_t *j, tv *out, int depth);
/* Python's `in`. */
int tpl_tv_contains(tpl_rt *r, const node *at, tv container, tv item, bool *out);
/* Python slicing of a list or string. */
int tpl_tv_slice(tpl_rt *r, const node *at, tv obj, tv start, tv stop, tv step, tv *out);
/* Python's binary arithmetic (+ - * / // % **). */
int tpl_tv_binop(tpl_rt *r, const node *at, int op, tv a, tv b, tv *out);
tv tpl_tv_macro_value(tmacro *m);
/* printf-style `fmt % args` (the % operator on strings, the format filter);
 * a Markup fmt escapes what %s and %r insert and gives Markup. */
int tpl_format_percent(tpl_rt *r, const node *at, tv fmt, tv args, tv *out);
/* markupsafe.escape(v): Markup unchanged, anything else str(v) with & < > ' "
 * replaced, as Markup. */
int tpl_escape(tpl_rt *r, tv v, tv *out);
/* Calls a str method bound to a Markup (f->markup != MK_NONE). */
int tpl_markup_call(tpl_rt *r, const node *at, const tfunc *f, targs *a, tv *out);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) (template_json.c). */
typedef struct {
    bool ensure_ascii;
    bool has_indent;
    tstr indent;
    tstr item_sep, key_sep;
    bool sort_keys;
} json_opts;
int tpl_json_dumps(tpl_rt *r, const node *at, tv v, const json_opts *o, sbuf *b);

/* Python str operations shared by filters and methods (template_str.c). */
int tpl_str_lower(tpl_rt *r, tstr s, tstr *out);
/* Appends s[from:].lower() where Greek final sigma looks at all of s, as
 * Python's lower(), capitalize() and title() do. */
int tpl_str_lower_from(sbuf *b, tstr s, size_t from);
int tpl_str_upper(tpl_rt *r, tstr s, tstr *out);
int tpl_str_capitalize(tpl_rt *r, tstr s, tstr *out);
/* strip/lstrip/rstrip: mode 1 left, 2 right, 3 both; chars none = whitespace. */
int tpl_str_strip(tpl_rt *r, tstr s, tv chars, int mode, tstr *out);
int tpl_str_replace(tpl_rt *r, const node *at, tstr s, tstr old, tstr rep, int64_t count,
                    tstr *out);
int tpl_str_splitlines(tpl_rt *r, tstr s, bool keepends, tlist **out);
/* Python's int(s, base) and float(s) on strings; -1 when Python raises ValueError. */
int tpl_py_parse_int(tstr s, int base, int64_t *out);
int tpl_py_parse_float(tstr s, double *out);

/* Built-in tables (template_filters.c, template_tests.c, template_methods.c,
 * template_str.c). */
tpl_filter_fn tpl_filter_find(tstr name);
bool tpl_filter_is_lazy(tpl_filter_fn f);
tpl_test_fn tpl_test_find(tstr name);
/* A method of a str/dict/list value, or false (an unsafe one yields an error undefined). */
bool tpl_method_find(tpl_rt *r, tv self, tstr name, tv *out);
/* A global function (range, namespace, dict, raise_exception, ...). */
bool tpl_global_find(tpl_rt *r, tstr name, tv *out);
/* Binds call arguments to parameter names; given[i] says whether names[i] was passed. */
int tpl_args_bind(tpl_rt *r, const node *at, const char *fname, targs *a, const char *const *names,
                  int nnames, tv *vals, bool *given);

/* In a built-in `(tpl_rt *r, const node *at, ..., targs *a, ...)`: binds the
 * arguments to the parameter names given, into p[i] (passed when g[i]). */
#define BIND(fname, ...)                                                                           \
    static const char *const names_[] = {__VA_ARGS__};                                             \
    enum { NN_ = sizeof names_ / sizeof names_[0] };                                               \
    tv p[NN_];                                                                                     \
    bool g[NN_];                                                                                   \
    if (tpl_args_bind(r, at, fname, a, names_, NN_, p, g)) return -1

/* A built-in that takes no arguments. */
static inline int no_args(tpl_rt *r, const node *at, const char *fname, targs *a) {
    return tpl_args_bind(r, at, fname, a, NULL, 0, NULL, NULL);
}

/* A method of a built-in type; fn NULL: it would mutate, so the sandbox refuses it. */
typedef struct {
    const char *name;
    tpl_func_fn fn;
    uint8_t markup; /* MK_*: what the method does on a Markup */
} tpl_method;
extern const tpl_method tpl_str_methods[];
extern const size_t tpl_str_methods_count;

#endif
