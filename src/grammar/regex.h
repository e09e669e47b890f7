/* Regular expressions compiled to grammar rules (see regex.c for the subset). */
#ifndef CLLM_GRAMMAR_REGEX_H
#define CLLM_GRAMMAR_REGEX_H

#include "grammar/grammar.h"

/* Adds a rule matching exactly the strings of `pattern` (anchored) and
 * returns its id, or -1 with err_get() naming the position. */
int regex_to_rule(grammar_builder *b, const char *pattern);
/* A whole grammar for one regex. */
grammar *grammar_from_regex(const char *pattern);

#endif
