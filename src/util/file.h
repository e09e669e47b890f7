/* Reading a whole file into memory, for the small text inputs every layer
 * takes from disk (chat templates, calibration text, prompts). */
#ifndef CLLM_UTIL_FILE_H
#define CLLM_UTIL_FILE_H

#include <stddef.h>

/* The contents of path, NUL-terminated (the NUL not counted in *len; len may
 * be NULL), to be freed by the caller. NULL with err_get() naming the path and
 * what went wrong ("PATH: cannot open: No such file or directory"); when it
 * could not be opened, errno says why (ENOENT: there is no such file). */
char *file_read_all(const char *path, size_t *len);

/* The last component of a path, trailing slashes ignored, malloc'd:
 * "models/Qwen2-0.5B/" -> "Qwen2-0.5B". NULL when out of memory. */
char *path_last_name(const char *path);

#endif
