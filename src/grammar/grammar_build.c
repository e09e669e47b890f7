/* Building a grammar (see grammar.h): rules with named or generated names,
 * alternatives appended element by element, repetition as right-recursive
 * helper rules, Unicode classes as UTF-8 byte sequences, and the final
 * checks (undefined rules, left recursion, size) before the flat layout. */
#include "grammar/grammar.h"

#include "util/error.h"
#include "util/utf8.h"
#include "util/array.h"

#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    gelem *items;
    size_t n, cap;
} elem_vec;

typedef struct {
    char *name;
    elem_vec *alts;
    size_t n_alts, cap_alts;
    bool defined;
} brule;

typedef struct {
    int rule;
    elem_vec seq;
} open_alt;

struct grammar_builder {
    brule *rules;
    size_t n_rules, cap_rules;
    byte_set *sets;
    size_t n_sets, cap_sets;
    open_alt *open;
    size_t n_open, cap_open;
    size_t n_elems; /* laid out so far, for the limit */
    int n_fresh;
    bool json_string_mode; /* classes leave out '"', '\\' and control characters */
};

grammar_builder *gb_create(void) { return calloc(1, sizeof(grammar_builder)); }

void gb_free(grammar_builder *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_rules; i++) {
        for (size_t a = 0; a < b->rules[i].n_alts; a++) free(b->rules[i].alts[a].items);
        free(b->rules[i].alts);
        free(b->rules[i].name);
    }
    for (size_t i = 0; i < b->n_open; i++) free(b->open[i].seq.items);
    free(b->rules);
    free(b->sets);
    free(b->open);
    free(b);
}

void grammar_free(grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->sets);
    free(g->alt_first);
    free(g->alt_count);
    free(g->alts);
    free(g->nullable);
    free(g);
}

static int new_rule(grammar_builder *b, char *name) {
    if (b->n_rules >= GRAMMAR_MAX_RULES) {
        free(name);
        return err_set("grammar too large: more than %d rules", GRAMMAR_MAX_RULES);
    }
    if (array_reserve((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) {
        free(name);
        return -1;
    }
    b->rules[b->n_rules] = (brule){.name = name};
    return (int)b->n_rules++;
}

int gb_rule(grammar_builder *b, const char *name, size_t len) {
    for (size_t i = 0; i < b->n_rules; i++)
        if (strlen(b->rules[i].name) == len && !memcmp(b->rules[i].name, name, len)) return (int)i;
    char *copy = malloc(len + 1);
    if (!copy) return err_oom("grammar: out of memory");
    memcpy(copy, name, len);
    copy[len] = 0;
    return new_rule(b, copy);
}

int gb_fresh_rule(grammar_builder *b) {
    char name[32];
    snprintf(name, sizeof name, "_%d", b->n_fresh++);
    char *copy = malloc(strlen(name) + 1);
    if (!copy) return err_oom("grammar: out of memory");
    strcpy(copy, name);
    return new_rule(b, copy);
}

void gb_set_json_string_mode(grammar_builder *b, bool on) { b->json_string_mode = on; }
bool gb_json_string_mode(const grammar_builder *b) { return b->json_string_mode; }

bool gb_rule_defined(const grammar_builder *b, int rule) { return b->rules[rule].defined; }
const char *gb_rule_name(const grammar_builder *b, int rule) { return b->rules[rule].name; }

static int vec_push(grammar_builder *b, elem_vec *v, gelem e) {
    if (++b->n_elems > GRAMMAR_MAX_ELEMS)
        return err_set("grammar too large: more than %d elements", GRAMMAR_MAX_ELEMS);
    if (array_reserve((void **)&v->items, &v->cap, v->n + 1, sizeof *v->items)) return -1;
    v->items[v->n++] = e;
    return 0;
}

/* Appends a finished alternative (taking its items) to a rule. */
static int add_alt(grammar_builder *b, int rule, elem_vec seq) {
    brule *r = &b->rules[rule];
    if (array_reserve((void **)&r->alts, &r->cap_alts, r->n_alts + 1, sizeof *r->alts)) {
        free(seq.items);
        return -1;
    }
    r->alts[r->n_alts++] = seq;
    r->defined = true;
    b->n_elems++; /* its GE_END */
    return 0;
}

int gb_alt_begin(grammar_builder *b, int rule) {
    if (array_reserve((void **)&b->open, &b->cap_open, b->n_open + 1, sizeof *b->open)) return -1;
    b->open[b->n_open++] = (open_alt){.rule = rule};
    b->rules[rule].defined = true;
    return 0;
}

int gb_alt_end(grammar_builder *b) {
    open_alt o = b->open[--b->n_open];
    return add_alt(b, o.rule, o.seq);
}

static int push_elem(grammar_builder *b, gelem e) { return vec_push(b, &b->open[b->n_open - 1].seq, e); }

static int intern_set(grammar_builder *b, const byte_set *s) {
    for (size_t i = 0; i < b->n_sets; i++)
        if (!memcmp(&b->sets[i], s, sizeof *s)) return (int)i;
    if (array_reserve((void **)&b->sets, &b->cap_sets, b->n_sets + 1, sizeof *b->sets)) return -1;
    b->sets[b->n_sets] = *s;
    return (int)b->n_sets++;
}

int gb_push_set(grammar_builder *b, const byte_set *s) {
    const int id = intern_set(b, s);
    if (id < 0) return -1;
    return push_elem(b, (gelem){.kind = GE_BYTES, .arg = (uint32_t)id});
}

int gb_push_byte(grammar_builder *b, unsigned char c) {
    byte_set s = {{0}};
    byte_set_add_range(&s, c, c);
    return gb_push_set(b, &s);
}

int gb_push_rule(grammar_builder *b, int rule) { return push_elem(b, (gelem){.kind = GE_RULE, .arg = (uint32_t)rule}); }

int gb_push_literal(grammar_builder *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (gb_push_byte(b, (unsigned char)s[i])) return -1;
    return 0;
}

/* ---- code point ranges as UTF-8 byte sequences ---- */

/* Adds to `rule` alternatives matching exactly the UTF-8 encodings of the
 * code points lo..hi (all >= 0x80): split until every byte position is one
 * range (the scheme of RE2's and Rust's utf8-ranges). */
static int add_utf8_range(grammar_builder *b, int rule, uint32_t lo, uint32_t hi) {
    if (lo > hi) return 0;
    static const uint32_t len_max[] = {0x7FF, 0xFFFF};
    for (int i = 0; i < 2; i++)
        if (lo <= len_max[i] && hi > len_max[i])
            return add_utf8_range(b, rule, lo, len_max[i]) || add_utf8_range(b, rule, len_max[i] + 1, hi) ? -1 : 0;
    if (lo <= 0xDFFF && hi >= 0xD800) /* surrogates are not characters */
        return add_utf8_range(b, rule, lo, 0xD7FF) || add_utf8_range(b, rule, 0xE000, hi) ? -1 : 0;
    char el[4], eh[4];
    const int n = utf8_encode(el, lo);
    for (int i = 1; i < n; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) return add_utf8_range(b, rule, lo, lo | m) || add_utf8_range(b, rule, (lo | m) + 1, hi) ? -1 : 0;
            if ((hi & m) != m)
                return add_utf8_range(b, rule, lo, (hi & ~m) - 1) || add_utf8_range(b, rule, hi & ~m, hi) ? -1 : 0;
        }
    }
    utf8_encode(eh, hi);
    if (gb_alt_begin(b, rule)) return -1;
    for (int i = 0; i < n; i++) {
        byte_set s = {{0}};
        byte_set_add_range(&s, (unsigned char)el[i], (unsigned char)eh[i]);
        if (gb_push_set(b, &s)) return -1;
    }
    return gb_alt_end(b);
}

static int cmp_u32_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

int gb_push_codepoints(grammar_builder *b, const uint32_t *ranges, int n, bool negated) {
    /* Normalize: sorted, merged, then complemented when negated. */
    uint32_t *r = malloc(((size_t)n + 1) * 2 * sizeof *r);
    if (!r) return err_oom("grammar: out of memory");
    if (n > 0) { /* an empty class "[]" or "[^]" passes no ranges at all */
        memcpy(r, ranges, (size_t)n * 2 * sizeof *r);
        qsort(r, (size_t)n, 2 * sizeof *r, cmp_u32_pair);
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1]) r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i], r[2 * m + 1] = r[2 * i + 1], m++;
        }
    }
    if (negated) {
        uint32_t *c = malloc(((size_t)m + 1) * 2 * sizeof *c);
        if (!c) {
            free(r);
            return err_oom("grammar: out of memory");
        }
        int k = 0;
        uint32_t next = 0;
        for (int i = 0; i < m; i++) {
            if (r[2 * i] > next) c[2 * k] = next, c[2 * k + 1] = r[2 * i] - 1, k++;
            next = r[2 * i + 1] + 1;
        }
        if (next <= 0x10FFFF) c[2 * k] = next, c[2 * k + 1] = 0x10FFFF, k++;
        free(r);
        r = c, m = k;
    }
    /* Inside a JSON string: what JSON escapes is produced escaped (see below). */
    char escapes[8];
    int n_escapes = 0;
    if (b->json_string_mode) {
        static const struct {
            uint32_t cp;
            char esc;
        } json_escapes[] = {{'"', '"'}, {'\\', '\\'}, {'\n', 'n'}, {'\t', 't'}, {'\r', 'r'}, {'\b', 'b'}, {'\f', 'f'}};
        for (size_t e = 0; e < sizeof json_escapes / sizeof *json_escapes; e++)
            for (int i = 0; i < m; i++)
                if (r[2 * i] <= json_escapes[e].cp && json_escapes[e].cp <= r[2 * i + 1]) {
                    escapes[n_escapes++] = json_escapes[e].esc;
                    break;
                }
        /* Cut out 0x00-0x1F, '"' and '\\': m ranges minus them are at most 3m. */
        uint32_t *c = malloc(((size_t)m * 3 + 1) * 2 * sizeof *c);
        if (!c) {
            free(r);
            return err_oom("grammar: out of memory");
        }
        static const uint32_t keep[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
        int k = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < 3; j++) {
                const uint32_t lo = r[2 * i] > keep[j][0] ? r[2 * i] : keep[j][0];
                const uint32_t hi = r[2 * i + 1] < keep[j][1] ? r[2 * i + 1] : keep[j][1];
                if (lo <= hi) c[2 * k] = lo, c[2 * k + 1] = hi, k++;
            }
        free(r);
        r = c, m = k;
    }
    byte_set ascii = {{0}};
    bool wide = false, any_ascii = false;
    for (int i = 0; i < m; i++) {
        if (r[2 * i + 1] > 0x10FFFF) r[2 * i + 1] = 0x10FFFF;
        if (r[2 * i] < 0x80) {
            byte_set_add_range(&ascii, r[2 * i], r[2 * i + 1] < 0x7F ? r[2 * i + 1] : 0x7F), any_ascii = true;
        }
        if (r[2 * i + 1] >= 0x80) wide = true;
    }
    int rc = 0;
    if (!wide && !n_escapes) {
        if (!any_ascii) rc = err_set("grammar: a character class that matches nothing");
        else rc = gb_push_set(b, &ascii);
    } else {
        const int rule = gb_fresh_rule(b);
        rc = rule < 0;
        if (!rc && any_ascii) rc = gb_alt_begin(b, rule) || gb_push_set(b, &ascii) || gb_alt_end(b);
        for (int e = 0; e < n_escapes && !rc; e++) {
            const char esc[2] = {'\\', escapes[e]};
            rc = gb_alt_begin(b, rule) || gb_push_literal(b, esc, 2) || gb_alt_end(b);
        }
        for (int i = 0; i < m && !rc; i++)
            if (r[2 * i + 1] >= 0x80) rc = add_utf8_range(b, rule, r[2 * i] < 0x80 ? 0x80 : r[2 * i], r[2 * i + 1]);
        if (!rc) rc = gb_push_rule(b, rule);
    }
    free(r);
    return rc ? -1 : 0;
}

/* ---- repetition ---- */

size_t gb_mark(const grammar_builder *b) { return b->open[b->n_open - 1].seq.n; }

static int seq_copy(grammar_builder *b, elem_vec *dst, const gelem *items, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (vec_push(b, dst, items[i])) return -1;
    return 0;
}

int gb_repeat_since(grammar_builder *b, size_t mark, int min, int max) {
    elem_vec *cur = &b->open[b->n_open - 1].seq;
    const size_t n = cur->n - mark;
    if (n == 0) return 0;
    /* The item x: the one element, or a rule holding the sequence. */
    gelem x = cur->items[mark];
    if (n > 1) {
        const int r = gb_fresh_rule(b);
        if (r < 0) return -1;
        elem_vec seq = {0};
        cur = &b->open[b->n_open - 1].seq;
        if (seq_copy(b, &seq, cur->items + mark, n) || add_alt(b, r, seq)) return -1;
        x = (gelem){.kind = GE_RULE, .arg = (uint32_t)r};
    }
    b->open[b->n_open - 1].seq.n = mark;
    if (max >= 0 && (max < min || max > 10000)) return err_set("repetition {%d,%d} is out of range", min, max);
    if (min > 10000) return err_set("repetition {%d,} is out of range", min);
    for (int i = 0; i < min; i++)
        if (push_elem(b, x)) return -1;
    if (max == min) return 0;
    if (max < 0) { /* S ::= x S | (empty) */
        const int s = gb_fresh_rule(b);
        if (s < 0) return -1;
        elem_vec seq = {0}, empty = {0};
        if (vec_push(b, &seq, x) || vec_push(b, &seq, (gelem){.kind = GE_RULE, .arg = (uint32_t)s}) ||
            add_alt(b, s, seq) || add_alt(b, s, empty))
            return -1;
        return push_elem(b, (gelem){.kind = GE_RULE, .arg = (uint32_t)s});
    }
    /* Up to k more: O_k ::= x O_{k-1} | (empty), O_1 ::= x | (empty). */
    int prev = -1;
    for (int k = 1; k <= max - min; k++) {
        const int o = gb_fresh_rule(b);
        if (o < 0) return -1;
        elem_vec seq = {0}, empty = {0};
        if (vec_push(b, &seq, x)) return -1;
        if (prev >= 0 && vec_push(b, &seq, (gelem){.kind = GE_RULE, .arg = (uint32_t)prev})) return -1;
        if (add_alt(b, o, seq) || add_alt(b, o, empty)) return -1;
        prev = o;
    }
    return push_elem(b, (gelem){.kind = GE_RULE, .arg = (uint32_t)prev});
}

/* ---- checks and layout ---- */

static bool elem_nullable(const grammar_builder *b, const bool *nullable, gelem e) {
    (void)b;
    return e.kind == GE_RULE && nullable[e.arg];
}

/* 0: unvisited, 1: on the DFS path, 2: done. */
static int left_rec_dfs(const grammar_builder *b, const bool *nullable, char *mark, int r) {
    mark[r] = 1;
    const brule *ru = &b->rules[r];
    for (size_t a = 0; a < ru->n_alts; a++) {
        const elem_vec *s = &ru->alts[a];
        for (size_t i = 0; i < s->n; i++) {
            const gelem e = s->items[i];
            if (e.kind != GE_RULE) break;
            if (mark[e.arg] == 1) return (int)e.arg;
            if (mark[e.arg] == 0) {
                const int c = left_rec_dfs(b, nullable, mark, (int)e.arg);
                if (c >= 0) return c;
            }
            if (!elem_nullable(b, nullable, e)) break;
        }
    }
    mark[r] = 2;
    return -1;
}

static int check(grammar_builder *b, bool *nullable) {
    for (size_t r = 0; r < b->n_rules; r++)
        if (!b->rules[r].defined) return err_set("undefined rule '%s'", b->rules[r].name);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < b->n_rules; r++) {
            if (nullable[r]) continue;
            for (size_t a = 0; a < b->rules[r].n_alts && !nullable[r]; a++) {
                const elem_vec *s = &b->rules[r].alts[a];
                size_t i = 0;
                while (i < s->n && elem_nullable(b, nullable, s->items[i])) i++;
                if (i == s->n) nullable[r] = changed = true;
            }
        }
    }
    char *mark = calloc(b->n_rules, 1);
    if (!mark) return err_oom("grammar: out of memory");
    int bad = -1;
    for (size_t r = 0; r < b->n_rules && bad < 0; r++)
        if (!mark[r]) bad = left_rec_dfs(b, nullable, mark, (int)r);
    free(mark);
    if (bad >= 0) return err_set("rule '%s' is left-recursive (not supported)", b->rules[bad].name);
    return 0;
}

grammar *gb_finish(grammar_builder *b, int root) {
    grammar *g = NULL;
    bool *nullable = calloc(b->n_rules ? b->n_rules : 1, sizeof *nullable);
    if (!nullable) goto oom;
    if (b->n_open) {
        err_set("grammar: unfinished alternative");
        goto fail;
    }
    if (check(b, nullable)) goto fail;
    g = calloc(1, sizeof *g);
    if (!g) goto oom;
    size_t n_alts = 0, n_elems = 0;
    for (size_t r = 0; r < b->n_rules; r++) {
        n_alts += b->rules[r].n_alts;
        for (size_t a = 0; a < b->rules[r].n_alts; a++) n_elems += b->rules[r].alts[a].n + 1;
    }
    g->elems = malloc(n_elems * sizeof *g->elems);
    g->alts = malloc((n_alts ? n_alts : 1) * sizeof *g->alts);
    g->alt_first = malloc(b->n_rules * sizeof *g->alt_first);
    g->alt_count = malloc(b->n_rules * sizeof *g->alt_count);
    g->sets = malloc((b->n_sets ? b->n_sets : 1) * sizeof *g->sets);
    if (!g->elems || !g->alts || !g->alt_first || !g->alt_count || !g->sets) goto oom;
    if (b->n_sets) memcpy(g->sets, b->sets, b->n_sets * sizeof *g->sets);
    g->n_sets = (int)b->n_sets;
    size_t ai = 0, ei = 0;
    for (size_t r = 0; r < b->n_rules; r++) {
        g->alt_first[r] = (int32_t)ai;
        g->alt_count[r] = (int32_t)b->rules[r].n_alts;
        for (size_t a = 0; a < b->rules[r].n_alts; a++) {
            g->alts[ai++] = (int32_t)ei;
            if (b->rules[r].alts[a].n) /* an empty alternative has no items array */
                memcpy(g->elems + ei, b->rules[r].alts[a].items, b->rules[r].alts[a].n * sizeof *g->elems);
            ei += b->rules[r].alts[a].n;
            g->elems[ei++] = (gelem){.kind = GE_END};
        }
    }
    g->n_elems = (int)ei;
    g->n_rules = (int)b->n_rules;
    g->root = root;
    g->nullable = nullable;
    static atomic_uint_fast64_t next_id = 1;
    g->id = atomic_fetch_add(&next_id, 1);
    gb_free(b);
    return g;
oom:
    err_oom("grammar: out of memory");
fail:
    free(nullable);
    grammar_free(g);
    gb_free(b);
    return NULL;
}
