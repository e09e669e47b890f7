/* See auth.h. */
#include "server/auth.h"

#include "util/error.h"
#include "util/file.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool auth_equal_ct(const char *a, size_t an, const char *b, size_t bn) {
    /* Every byte of b is visited whatever a holds; a shorter a is read
     * cyclically so no branch depends on the secret's content. */
    volatile unsigned char diff = (unsigned char)(an != bn);
    for (size_t i = 0; i < bn; i++) {
        const unsigned char x = an ? (unsigned char)a[i % an] : 0;
        diff |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

bool auth_check(const char *header, const char *key) {
    if (!key || !*key) return true;
    if (!header) return false;
    while (*header == ' ' || *header == '\t') header++;
    if (strncasecmp(header, "Bearer", 6) || (header[6] != ' ' && header[6] != '\t')) return false;
    header += 6;
    while (*header == ' ' || *header == '\t') header++;
    size_t n = strlen(header);
    while (n && (header[n - 1] == ' ' || header[n - 1] == '\t')) n--;
    return auth_equal_ct(header, n, key, strlen(key));
}

bool auth_path_protected(const char *path, bool metrics_protected) {
    return !strncmp(path, "/v1/", 4) || !strcmp(path, "/v1") || !strcmp(path, "/tokenize") ||
           !strcmp(path, "/detokenize") || (metrics_protected && !strcmp(path, "/metrics"));
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

char *auth_key_from_file(const char *path) {
    size_t len = 0;
    char *text = file_read_all(path, &len);
    if (!text) return NULL;
    char *nl = memchr(text, '\n', len);
    size_t end = nl ? (size_t)(nl - text) : len, start = 0;
    while (start < end && is_blank(text[start])) start++;
    while (end > start && is_blank(text[end - 1])) end--;
    for (size_t i = start; i < end; i++) {
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
            free(text);
            err_set("%s: the API key holds a control character (byte %zu)", path, i);
            return NULL;
        }
    }
    if (end == start) {
        free(text);
        err_set("%s: no API key in the file (its first line is empty)", path);
        return NULL;
    }
    memmove(text, text + start, end - start);
    text[end - start] = 0;
    return text;
}
