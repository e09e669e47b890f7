/* The HTTP layer over libmicrohttpd: one http_req per request (its body
 * gathered up to the size limit), handed once complete to the handler given
 * to http_server_start, and the helpers a handler answers with. It knows no
 * routes and no server state: the router (routes.c) is such a handler, so
 * routes depend on http and not the reverse. Handlers run on the
 * connection's own thread and may block. */
#ifndef CLLM_SERVER_HTTP_H
#define CLLM_SERVER_HTTP_H

#include "server/errors.h"
#include "util/buf.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct http_req http_req;
/* Answers one complete request (user: what was given to http_server_start). */
typedef enum MHD_Result (*http_handler)(void *user, http_req *r);

typedef struct {
    struct MHD_Daemon *daemon;
    int port; /* the port bound */
    size_t max_body_bytes;
    http_handler handler;
    void *user;
    _Atomic uint64_t responses[6]; /* by status class: [2] = 2xx ... [5] = 5xx */
} http_server;

#define HTTP_MAX_EXTRA_HEADERS 2

struct http_req {
    http_server *http;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    buf body;
    bool too_large; /* the body was over max_body_bytes and was dropped */
    struct {
        const char *name, *value;
    } extra_headers[HTTP_MAX_EXTRA_HEADERS];
    int n_extra_headers;
};

/* Listens on host:port (0: any free port) with a thread per connection.
 * Returns -1 with err_get() when the address cannot be bound. */
int http_server_start(http_server *h, const char *host, int port, size_t max_body_bytes, int max_connections,
                      http_handler handler, void *user);
/* Stops accepting connections; open ones are still served. */
void http_server_quiesce(http_server *h);
/* Closes every connection and joins the threads. */
void http_server_stop(http_server *h);

/* Adds a header to the response this request gets (e.g. Allow on a 405);
 * name and value must live until the reply is queued. */
void http_add_header(http_req *r, const char *name, const char *value);
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

#endif
