/* A compiled constraint: the entry point for everything above the grammar
 * layer (the server's request fields, `cllm generate`, tool calling). A
 * constraint is a grammar plus its token-mask cache; it is immutable apart
 * from that cache, reference-counted, and shared by every request that asks
 * for the same thing: compiles are cached (LRU) on the canonical text of
 * the constraint (kind + compact JSON or the text).
 *
 * Per sequence, a constraint_state follows the output: constraint_mask gives
 * the tokens allowed next (a bit per vocabulary id; end-of-generation tokens
 * only where the grammar may end), constraint_accept advances by a chosen
 * token, and a state copies as a value (the rollback point for speculative
 * decoding). */
#ifndef CLLM_GRAMMAR_CONSTRAINT_H
#define CLLM_GRAMMAR_CONSTRAINT_H

#include "grammar/grammar.h"
#include "grammar/grammar_match.h"
#include "grammar/json_schema.h"
#include "grammar/token_vocab.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
    CONSTRAINT_JSON_SCHEMA, /* spec: the schema (json) */
    CONSTRAINT_JSON_OBJECT, /* any JSON object; no spec */
    CONSTRAINT_REGEX,       /* spec: a string */
    CONSTRAINT_CHOICE,      /* spec: an array of strings; the output is one of them */
    CONSTRAINT_GBNF,        /* spec: a string in llama.cpp's GBNF */
    CONSTRAINT_TOOL_CALL,   /* spec: {"prefix": s, "schema": o, "suffix": s}: the literal prefix, one JSON
                               value valid under the schema, the literal suffix (a forced tool call) */
} constraint_kind;

typedef struct constraint constraint;

/* Compiles (or finds in the cache) a constraint; the caller owns one
 * reference. NULL with err_get() saying what is wrong and where (a 400 for a
 * server), or err_is_oom(). `spec` is borrowed. */
constraint *constraint_compile(constraint_kind kind, json_t *spec, const json_schema_options *opt);
/* The same for a JSON schema; the entry point for tool calling. */
constraint *constraint_from_json_schema(json_t *schema);
constraint *constraint_retain(constraint *c);
void constraint_release(constraint *c);
const grammar *constraint_grammar(const constraint *c);
/* Compiled-constraint cache counters (hits, misses) since start. */
void constraint_cache_stats(uint64_t *hits, uint64_t *misses);

typedef struct {
    constraint *c;
    gstate st;
} constraint_state;

/* A state at the start of the output. -1 with err_get(). */
int constraint_state_init(constraint_state *s, constraint *c);
void constraint_state_free(constraint_state *s);
int constraint_state_copy(constraint_state *dst, const constraint_state *src);
/* Sets mask[id / 32] bit id % 32 for every token allowed next (mask has
 * (n_vocab + 31) / 32 words). Uses and fills the constraint's mask cache.
 * -1 with err_get() on a grammar past its limits or out of memory. */
int constraint_mask(constraint_state *s, const token_vocab *v, uint32_t *mask);
/* Advances by a token: 1 accepted, 0 refused (the state is unchanged), -1
 * error. An end-of-generation token is accepted where the grammar may end. */
int constraint_accept(constraint_state *s, const token_vocab *v, int32_t token);
/* Whether new states' masks come from the vocabulary's token classes
 * (token_mask_class.h; the default) or from a walk of the whole vocabulary
 * (grammar_bench compares the two). */
void constraint_use_token_classes(bool on);
/* Classifies the vocabulary against the inside of a JSON string, the state
 * nearly every schema meets and the costliest to classify, so that the
 * first request's strings find it done (token_mask_class.h). -1 with
 * err_get(). */
int constraint_warm_token_classes(const token_vocab *v);
/* Masks of new states computed since start (the cache did not hold them). */
uint64_t constraint_masks_computed(void);
/* Whether the output may end here (an end-of-generation token is allowed). */
bool constraint_can_end(const constraint_state *s);
/* Whether the grammar allows nothing more: only ending is possible. */
bool constraint_must_end(const constraint_state *s);


#endif
