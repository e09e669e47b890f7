/* See spec_tree.h. */
#include "engine/spec_tree.h"

#include "model/medusa.h"
#include "util/error.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    int len;
    int8_t r[SPEC_MAX_TOKENS];
} path;

static const char *skip_ws(const char *s) {
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

static void path_text(const path *p, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < p->len && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, i ? ", %d" : "%d", p->r[i]);
    if (n < cap) snprintf(out + n, cap - n, p->len == 1 ? ",)" : ")");
}

static bool same_prefix(const path *a, const path *b, int len) {
    if (a->len < len || b->len < len) return false;
    return !memcmp(a->r, b->r, (size_t)len);
}

/* One "(r, r, ...)" at *s; advances *s. */
static int parse_path(const char **s, path *p) {
    const char *c = skip_ws(*s);
    if (*c != '(') return err_set("expected '(' at \"%.12s\"", c);
    c = skip_ws(c + 1);
    p->len = 0;
    while (*c != ')') {
        if (!isdigit((unsigned char)*c))
            return err_set("expected a candidate rank at \"%.12s\"", c);
        long v = 0;
        while (isdigit((unsigned char)*c) && v < 1000)
            v = v * 10 + (*c++ - '0');
        if (v >= SPEC_TREE_MAX_RANK)
            return err_set("candidate rank %ld is out of range (ranks 0..%d)", v,
                           SPEC_TREE_MAX_RANK - 1);
        if (p->len == SPEC_MAX_TOKENS) return err_set("a path longer than %d", SPEC_MAX_TOKENS);
        p->r[p->len++] = (int8_t)v;
        c = skip_ws(c);
        if (*c == ',')
            c = skip_ws(c + 1);
        else if (*c != ')')
            return err_set("expected ',' or ')' at \"%.12s\"", c);
    }
    if (p->len == 0) return err_set("an empty path \"()\"");
    *s = c + 1;
    return 0;
}

/* Paths in breadth-first order (stable: shorter first, listed order among
 * equals), the first max_nodes of them, with their parents. */
static int build(path *paths, int n, int max_nodes, spec_tree *t) {
    for (int i = 1; i < n; i++) /* insertion sort by length, stable */
        for (int j = i; j > 0 && paths[j - 1].len > paths[j].len; j--) {
            const path x = paths[j];
            paths[j] = paths[j - 1], paths[j - 1] = x;
        }
    if (n > max_nodes) n = max_nodes;
    t->n = n;
    for (int j = 0; j < n; j++) {
        t->depth[j] = (int8_t)(paths[j].len - 1);
        t->rank[j] = paths[j].r[paths[j].len - 1];
        t->parent[j] = -1;
        if (paths[j].len == 1) continue;
        for (int i = 0; i < j; i++)
            if (paths[i].len == paths[j].len - 1 && same_prefix(&paths[i], &paths[j], paths[i].len))
                t->parent[j] = (int8_t)i;
        if (t->parent[j] < 0) {
            char text[96];
            path_text(&paths[j], text, sizeof text);
            return err_set(
                "path %s has no parent in the tree (each path's prefix must be listed too)", text);
        }
    }
    return 0;
}

int spec_tree_parse(const char *text, int max_nodes, spec_tree *t) {
    path paths[SPEC_MAX_TOKENS];
    int n = 0;
    const char *c = skip_ws(text);
    if (*c != '[')
        return err_set(
            "speculative_token_tree: expected a list of paths like \"[(0,), (1,), (0, 0)]\"");
    c = skip_ws(c + 1);
    while (*c != ']') {
        if (n == SPEC_MAX_TOKENS)
            return err_set("speculative_token_tree: more than %d paths", SPEC_MAX_TOKENS);
        if (parse_path(&c, &paths[n])) return err_prefix("speculative_token_tree: ");
        for (int i = 0; i < n; i++)
            if (paths[i].len == paths[n].len && same_prefix(&paths[i], &paths[n], paths[n].len)) {
                char p[96];
                path_text(&paths[n], p, sizeof p);
                return err_set("speculative_token_tree: path %s is listed twice", p);
            }
        n++;
        c = skip_ws(c);
        if (*c == ',')
            c = skip_ws(c + 1);
        else if (*c != ']')
            return err_set("speculative_token_tree: expected ',' or ']' at \"%.12s\"", c);
    }
    if (*skip_ws(c + 1)) return err_set("speculative_token_tree: text after the list's ']'");
    if (n == 0) return err_set("speculative_token_tree: the list is empty");
    if (build(paths, n, max_nodes < 1 ? 1 : max_nodes, t))
        return err_prefix("speculative_token_tree: ");
    return 0;
}

/* ---- the most likely paths ---- */

typedef struct {
    double p;
    path at;
} cand;

/* a before b: likelier, then shorter, then lower ranks. */
static bool better(const cand *a, const cand *b) {
    if (a->p != b->p) return a->p > b->p;
    if (a->at.len != b->at.len) return a->at.len < b->at.len;
    return memcmp(a->at.r, b->at.r, (size_t)a->at.len) < 0;
}

typedef struct {
    double prob[MEDUSA_MAX_HEADS][5];
    int n_heads, want, n;
    cand best[SPEC_MAX_TOKENS]; /* best first */
} search;

static void offer(search *s, const cand *c) {
    if (s->n == s->want && !better(c, &s->best[s->n - 1])) return;
    int i = s->n < s->want ? s->n++ : s->want - 1;
    while (i > 0 && better(c, &s->best[i - 1]))
        s->best[i] = s->best[i - 1], i--;
    s->best[i] = *c;
}

/* Offers every extension of c; a path no likelier than the worst kept one
 * (with the list full) has no descendant worth keeping. */
static void grow(search *s, const cand *c) {
    if (c->at.len == s->n_heads) return;
    for (int r = 0; r < 5; r++) {
        cand x = *c;
        x.p *= s->prob[c->at.len][r];
        x.at.r[x.at.len++] = (int8_t)r;
        if (s->n == s->want && !better(&x, &s->best[s->n - 1])) continue;
        offer(s, &x);
        grow(s, &x);
    }
}

void spec_tree_auto(const float *top1, const float *top5, int n_heads, int n_nodes, spec_tree *t) {
    search s = {.n_heads = n_heads < MEDUSA_MAX_HEADS ? n_heads : MEDUSA_MAX_HEADS,
                .want = n_nodes < 1                 ? 1
                        : n_nodes > SPEC_MAX_TOKENS ? SPEC_MAX_TOKENS
                                                    : n_nodes};
    for (int d = 0; d < s.n_heads; d++) {
        const double p1 = top1[d] < 0 ? 0 : top1[d] > 1 ? 1 : top1[d];
        double rest = (top5[d] - p1) / 4;
        rest = rest < 0 ? 0 : rest;
        s.prob[d][0] = p1;
        for (int r = 1; r < 5; r++)
            s.prob[d][r] = rest;
    }
    const cand root = {.p = 1.0};
    grow(&s, &root);
    path paths[SPEC_MAX_TOKENS];
    for (int i = 0; i < s.n; i++)
        paths[i] = s.best[i].at;
    build(paths, s.n, s.n, t); /* the kept paths are closed under prefixes: cannot fail */
}

int spec_walk(int n, const int32_t *tok, const int8_t *parent, spec_row_sampler sample, void *user,
              int *path) {
    int accepted = 0, at = -1;
    for (;;) {
        bool stop = false;
        const int32_t x = sample(user, at + 1, &stop);
        int next = -1;
        for (int j = 0; j < n && x >= 0 && next < 0; j++) /* siblings hold distinct tokens */
            if ((parent ? parent[j] : j - 1) == at && tok[j] == x) next = j;
        if (next < 0) return accepted; /* the bonus, an error, or a rejection */
        path[accepted++] = at = next;
        if (stop) return accepted; /* a stop condition inside the accepted run */
    }
}

int spec_tree_depth(const spec_tree *t) {
    int d = 0;
    for (int j = 0; j < t->n; j++)
        if (t->depth[j] + 1 > d) d = t->depth[j] + 1;
    return d;
}
