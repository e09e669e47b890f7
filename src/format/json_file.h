/* JSON files read in one go and parsed in memory: jansson's json_load_file
 * takes its FILE one fgetc call per byte, which costs 5-15% of the load of a
 * 9 MB tokenizer.json (measured here) and more under the sanitizers, where
 * the hf_folder fuzz harness pays it for every file of every input. */
#ifndef CLLM_FORMAT_JSON_FILE_H
#define CLLM_FORMAT_JSON_FILE_H

#include <jansson.h>

/* json_load_file's contract: the value in the file at path, or NULL with
 * *error filled (a file that cannot be opened or read: "PATH: cannot open:
 * REASON", line -1). */
json_t *json_file_load(const char *path, size_t flags, json_error_t *error);

#endif
