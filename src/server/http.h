/* The HTTP layer over libmicrohttpd: one http_req per request (its body
 * gathered up to the size limit), handed to the router once complete, and the
 * helpers handlers answer with. Handlers run on the connection's own thread
 * and may block. */
#ifndef CLLM_SERVER_HTTP_H
#define CLLM_SERVER_HTTP_H

#include "server/errors.h"
#include "server/server.h"
#include "util/buf.h"

#include <jansson.h>
#include <microhttpd.h>

typedef struct {
    server *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    buf body;
    bool too_large;
} http_req;

enum MHD_Result http_reply(http_req *r, int status, const char *content_type, const char *body, size_t len);
/* Takes ownership of j. */
enum MHD_Result http_reply_json(http_req *r, int status, json_t *j);
enum MHD_Result http_reply_error(http_req *r, const api_error *e);
/* A callback-driven (chunked) response, for SSE. */
enum MHD_Result http_reply_stream(http_req *r, const char *content_type, MHD_ContentReaderCallback read,
                                  void *cls, MHD_ContentReaderFreeCallback free_cls);
/* The client's socket, for noticing a disconnect while a handler waits. */
int http_conn_fd(http_req *r);
const char *http_header(http_req *r, const char *name);
/* Parses the body as a JSON value; on failure fills *e (400) and returns NULL. */
json_t *http_body_json(http_req *r, api_error *e);
/* Counts a response by status class (for /metrics). */
void http_count(server *s, int status);

/* The router (routes.c). */
enum MHD_Result route_request(http_req *r);

#endif
