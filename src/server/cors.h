/* Cross-origin access (CORS) as vLLM configures it: --allowed-origins,
 * --allowed-methods and --allowed-headers, each a JSON list of strings where
 * "*" allows everything. With no origins (the default) no cross-origin
 * access is granted and no CORS header is ever sent.
 *
 * Every response to a request whose Origin is allowed carries
 * Access-Control-Allow-Origin (the origin itself) and Vary: Origin, errors
 * and streams included. A preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) is answered by the router before the API
 * key is checked, since browsers send no credentials on a preflight: 200
 * with the Access-Control-Allow-* headers, or 400 naming what is not
 * allowed. */
#ifndef CLLM_SERVER_CORS_H
#define CLLM_SERVER_CORS_H

#include "server/http.h"

#include <stdbool.h>

typedef struct {
    char **origins, **methods, **headers; /* NULL-terminated lists; "*" matches all */
    char *methods_text, *headers_text;    /* ", "-joined, for the preflight's answer */
} cors_config;

/* Parses the three JSON lists (NULL: the default, no origins, every method
 * and header). Returns -1 with err_get() naming the flag on a bad list. */
int cors_config_parse(cors_config *c, const char *origins_json, const char *methods_json, const char *headers_json);
void cors_config_free(cors_config *c);

/* Whether the request is a CORS preflight. */
bool cors_is_preflight(http_req *r);
/* Adds Access-Control-Allow-Origin and Vary to r's response when its Origin
 * is allowed. */
void cors_annotate(const cors_config *c, http_req *r);
/* Answers a preflight: 200 with the Access-Control-Allow-* headers, or a 400
 * saying which of origin, method or headers is not allowed. */
enum MHD_Result cors_answer_preflight(const cors_config *c, http_req *r);

#endif
