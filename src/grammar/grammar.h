/* The one grammar form every constraint compiles to: rules over bytes. A rule
 * is a list of alternatives; an alternative is a sequence of elements, each a
 * byte set (one byte out of up to 256) or a reference to a rule. Frontends
 * (GBNF, regex, choice, JSON schema: gbnf.c, regex.c, json_schema.c) build it
 * through grammar_builder; grammar_match.c recognizes it as a pushdown
 * automaton over bytes (a set of stacks, llama.cpp's scheme on bytes).
 *
 * Unicode character classes become byte sequences (UTF-8) at build time, so
 * the recognizer never decodes UTF-8 and a token ending inside a character
 * is matched byte by byte like any other. Left recursion is refused at build
 * time (the stack scheme would loop on it), and so are grammars past the
 * limits (rules, elements), so compile time and memory stay bounded. */
#ifndef CLLM_GRAMMAR_GRAMMAR_H
#define CLLM_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on one grammar: a request past them is refused (400). The
 * largest real schemas seen (Azure Pipelines' definitions, each holding
 * 259 task schemas: 1.3 MB of JSON) compile to about 95,000 rules and
 * 1,730,000 elements, in under half a second. */
#define GRAMMAR_MAX_DEPTH 512 /* stack frames of one recognizer stack */
#ifndef CLLM_FUZZ_LIMITS
#define GRAMMAR_MAX_RULES 100000
#define GRAMMAR_MAX_ELEMS 2000000
#define GRAMMAR_MAX_STACKS 2048 /* stacks of one recognizer state */
#else
/* The libFuzzer build: an ambiguous grammar at 2,048 stacks took half a
 * second per input under its sanitizers; fewer take the same paths, and
 * smaller grammars keep each input fast. */
#define GRAMMAR_MAX_RULES 20000
#define GRAMMAR_MAX_ELEMS 400000
#define GRAMMAR_MAX_STACKS 256
#endif

typedef struct {
    uint64_t bits[4];
} byte_set;

static inline bool byte_set_has(const byte_set *s, unsigned b) { return (s->bits[b >> 6] >> (b & 63)) & 1; }
static inline void byte_set_add_range(byte_set *s, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi && b < 256; b++) s->bits[b >> 6] |= 1ull << (b & 63);
}

enum { GE_BYTES = 0, GE_RULE = 1, GE_END = 2 };

typedef struct {
    uint32_t kind : 2;
    uint32_t arg : 30; /* GE_BYTES: index into sets; GE_RULE: rule id */
} gelem;

/* A finished grammar; immutable, shared by every sequence that uses it. */
typedef struct grammar {
    gelem *elems;       /* alternatives, each ended by GE_END */
    int n_elems;
    byte_set *sets;
    int n_sets;
    int32_t *alt_first; /* per rule: index into alts of its first alternative */
    int32_t *alt_count; /* per rule: how many */
    int32_t *alts;      /* start positions (in elems) of alternatives, grouped by rule */
    int n_rules;
    int root;
    bool *nullable;     /* per rule: derives the empty string */
    uint64_t id;        /* unique among the grammars this process builds */
} grammar;

void grammar_free(grammar *g);

/* ---- building (grammar_build.c) ---- */

typedef struct grammar_builder grammar_builder;

grammar_builder *gb_create(void);
void gb_free(grammar_builder *b);
/* The rule called `name`, created (empty) on first use. -1 past the limits. */
int gb_rule(grammar_builder *b, const char *name, size_t len);
/* A new rule with a generated name. */
int gb_fresh_rule(grammar_builder *b);
bool gb_rule_defined(const grammar_builder *b, int rule);
const char *gb_rule_name(const grammar_builder *b, int rule);
/* Alternatives are built element by element: gb_alt_begin starts one on
 * `rule`, gb_push_* append to it, gb_alt_end closes it. Alternatives of
 * different rules may not interleave, but a rule may be completed before the
 * alternative that refers to it is (the builder keeps an alternative stack). */
int gb_alt_begin(grammar_builder *b, int rule);
int gb_push_set(grammar_builder *b, const byte_set *s);
int gb_push_byte(grammar_builder *b, unsigned char c);
int gb_push_rule(grammar_builder *b, int rule);
int gb_alt_end(grammar_builder *b);
/* Pushes the UTF-8 bytes of `s`. */
int gb_push_literal(grammar_builder *b, const char *s, size_t n);
/* While on, code point classes produce what a JSON string must escape
 * escaped ('"' as \", '\\' as \\, newline as \n; also \t \r \b \f) and
 * leave out the other control characters: a regex inside a JSON string
 * (JSON Schema `pattern`) then never produces invalid JSON. */
void gb_set_json_string_mode(grammar_builder *b, bool on);
bool gb_json_string_mode(const grammar_builder *b);
/* Pushes one code point out of `ranges` (n pairs lo, hi; negated: every
 * valid code point outside them): a byte set when ASCII suffices, otherwise
 * a rule over the UTF-8 byte sequences (surrogates excluded). */
int gb_push_codepoints(grammar_builder *b, const uint32_t *ranges, int n, bool negated);
/* Pushes what is between begin and the end of the current alternative
 * repeated min..max times (max < 0: unbounded), replacing it: the elements
 * since `mark` (gb_mark) become a rule R and the repetition refers to it. */
size_t gb_mark(const grammar_builder *b);
int gb_repeat_since(grammar_builder *b, size_t mark, int min, int max);
/* Checks every referenced rule is defined and none is left-recursive, then
 * lays the grammar out with `root` as its start. NULL with err_get(). The
 * builder is spent either way. */
grammar *gb_finish(grammar_builder *b, int root);

/* ---- frontends ---- */

/* llama.cpp's GBNF; the start rule is `root`. Errors name line and column. */
grammar *grammar_from_gbnf(const char *text);

#endif
