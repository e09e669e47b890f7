/* The chat page `cllm serve` answers GET / with: its files (webui/ and the
 * Markdown and highlighting libraries of Debian's libjs-marked and
 * libjs-highlight.js) are embedded in the binary at build time by
 * cmake/webui.cmake, which generates the table below; nothing is read from
 * disk or fetched from the network when the page is served. The page and its
 * assets need no API key: the page asks for the key itself when the API
 * answers 401. */
#ifndef CLLM_SERVER_WEBUI_H
#define CLLM_SERVER_WEBUI_H

#include "server/http.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *path;          /* the URL path it is served at, e.g. "/webui/app.js" */
    const char *content_type;  /* e.g. "text/javascript; charset=utf-8" */
    const char *cache_control; /* "no-cache" for the page's own files, a max-age for the libraries */
    const char *etag;          /* quoted, from the file's SHA-256 */
    const unsigned char *data;
    size_t len;
} webui_asset;

/* Generated (build/webui_assets.c). */
extern const webui_asset webui_assets[];
extern const size_t webui_n_assets;

/* The asset served at a URL path ("/" and "/index.html" are the page), or NULL. */
const webui_asset *webui_find(const char *path);
/* Whether an If-None-Match header's value (NULL: none) names this ETag: a
 * comma-separated list of entity tags, weak ("W/") ones compared weakly, or "*". */
bool webui_etag_matches(const char *if_none_match, const char *etag);
/* Answers a GET or HEAD of an asset: 200 with its bytes, or 304 when the
 * browser's copy is current. */
enum MHD_Result webui_reply(http_req *r, const webui_asset *a);

#endif
