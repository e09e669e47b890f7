/* See json_file.h. */
#include "format/json_file.h"

#include "util/error.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>

json_t *json_file_load(const char *path, size_t flags, json_error_t *error) {
    size_t len = 0;
    char *text = file_read_all(path, &len);
    if (!text) {
        snprintf(error->text, sizeof error->text, "%s", err_get()); /* "PATH: cannot open: REASON" */
        snprintf(error->source, sizeof error->source, "%s", path);
        error->line = error->column = -1;
        error->position = 0;
        return NULL;
    }
    json_t *j = json_loadb(text, len, flags, error);
    free(text);
    return j;
}
