/* See auth.h. */
#include "server/auth.h"

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

bool auth_path_protected(const char *path) {
    return !strncmp(path, "/v1/", 4) || !strcmp(path, "/v1") || !strcmp(path, "/tokenize") ||
           !strcmp(path, "/detokenize");
}
