/* See file.h. The bytes gather in a util/buf, which keeps them NUL-terminated
 * and remembers a failed allocation. */
#include "util/file.h"

#include "util/buf.h"
#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

char *file_read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        const int why = errno;
        err_set("%s: cannot open: %s", path, strerror(why));
        errno = why; /* callers tell an absent file (ENOENT) apart */
        return NULL;
    }
    buf b = {0};
    buf_append(&b, "", 0); /* an empty file is an empty string, not NULL */
    char chunk[16384];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&b, chunk, n);
    const bool read_error = ferror(f);
    fclose(f);
    if (read_error || b.oom) {
        if (read_error) err_set("%s: read error after %zu bytes", path, b.len);
        else err_oom("%s: out of memory after reading %zu bytes", path, b.len);
        buf_free(&b);
        return NULL;
    }
    if (len) *len = b.len;
    return b.data;
}

char *path_last_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    return strndup(path + b, n - b);
}
