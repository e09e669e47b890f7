/* JSON files read in one go and parsed in memory: jansson's json_load_file
 * takes its FILE one fgetc call per byte, which costs 5-15% of the load of a
 * 9 MB tokenizer.json (measured here) and more under the sanitizers, where
 * the hf_folder fuzz harness pays it for every file of every input. */
#ifndef CLLM_FORMAT_JSON_FILE_H
#define CLLM_FORMAT_JSON_FILE_H

#include <jansson.h>
#include <stdbool.h>

/* The JSON value in the file at path (jansson's decoding flags), or NULL.
 * Where absent is not NULL, a path that does not exist is not an error: NULL
 * with *absent true and nothing set in err_get(), so that a reader of an
 * optional file needs no probe of its own. Otherwise err_get() says what was
 * wrong: "PATH: cannot open: REASON" (an absent file when absent is NULL) or
 * "PATH: not valid JSON: TEXT (line N)". */
json_t *json_file_load(const char *path, size_t flags, bool *absent);

#endif
