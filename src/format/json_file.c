/* See json_file.h. */
#include "format/json_file.h"

#include "util/error.h"
#include "util/file.h"

#include <errno.h>
#include <stdlib.h>

json_t *json_file_load(const char *path, size_t flags, bool *absent) {
    if (absent) *absent = false;
    size_t len = 0;
    char *text = file_read_all(path, &len);
    if (!text) {
        if (absent && errno == ENOENT) {
            *absent = true;
            err_clear();
        }
        return NULL;
    }
    json_error_t jerr;
    json_t *j = json_loadb(text, len, flags, &jerr);
    free(text);
    if (!j) err_set("%s: not valid JSON: %s (line %d)", path, jerr.text, jerr.line);
    return j;
}
