/* See webui.h. Assets are looked up by exact path in the generated table;
 * revalidation follows RFC 9110's If-None-Match (weak comparison, a list of
 * tags, or "*"), so a reload costs a 304 per file instead of its bytes. */
#include "server/webui.h"

#include <string.h>

const webui_asset *webui_find(const char *path) {
    if (!path) return NULL;
    if (!strcmp(path, "/index.html")) path = "/";
    for (size_t i = 0; i < webui_n_assets; i++)
        if (!strcmp(webui_assets[i].path, path)) return &webui_assets[i];
    return NULL;
}

bool webui_etag_matches(const char *if_none_match, const char *etag) {
    if (!if_none_match || !etag) return false;
    const size_t etag_len = strlen(etag);
    const char *p = if_none_match;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) return false;
        if (*p == '*') return true;
        if (!strncmp(p, "W/", 2)) p += 2;
        const char *start = p;
        if (*p == '"') {
            const char *close = strchr(p + 1, '"');
            if (!close) return false; /* an unterminated tag matches nothing */
            p = close + 1;
        } else {
            while (*p && *p != ',' && *p != ' ' && *p != '\t') p++; /* not a tag: skipped */
        }
        if ((size_t)(p - start) == etag_len && !memcmp(start, etag, etag_len)) return true;
    }
}

enum MHD_Result webui_reply(http_req *r, const webui_asset *a) {
    http_add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, a->cache_control);
    http_add_header(r, MHD_HTTP_HEADER_ETAG, a->etag);
    http_add_header(r, "X-Content-Type-Options", "nosniff");
    if (webui_etag_matches(http_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH), a->etag))
        return http_reply(r, MHD_HTTP_NOT_MODIFIED, NULL, "", 0);
    return http_reply(r, MHD_HTTP_OK, a->content_type, (const char *)a->data, a->len);
}
