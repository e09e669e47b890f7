/* The HTTP layer over libmicrohttpd: one http_req per request (its body
 * gathered up to the size limit), handed once complete to the handler given
 * to http_server_start, and the helpers a handler answers with. It knows no
 * routes and no server state: the router (routes.c) is such a handler, so
 * routes depend on http and not the reverse.
 *
 * Connection model: a few I/O threads (libmicrohttpd's epoll thread pool)
 * read and write every socket without blocking, so a connection costs a
 * socket and some memory, not a thread, and thousands of slow clients cannot
 * starve the others. Each complete request gets a handler thread of its own
 * (it may block: tokenizing, waiting for the engine) while its connection is
 * suspended; the reply it makes goes out when it returns. A streamed reply's
 * reader runs on an I/O thread and must never block: with nothing to send it
 * calls http_pause and returns 0, and whoever produces data calls
 * http_resume. Slow or idle clients are cut off by the limits below. */
#ifndef CLLM_SERVER_HTTP_H
#define CLLM_SERVER_HTTP_H

#include "server/errors.h"
#include "server/http_deadlines.h"
#include "util/buf.h"

#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct http_req http_req;
/* Answers one complete request (user: what was given to http_server_start).
 * Returns MHD_NO to close the connection without an answer. */
typedef enum MHD_Result (*http_handler)(void *user, http_req *r);

typedef struct {
    size_t max_body_bytes;
    unsigned keep_alive_s;      /* a connection silent this long is closed (idle, or stalled mid-request) */
    unsigned header_timeout_s;  /* request line and headers complete within this */
    unsigned body_timeout_s;    /* the body complete within this after the headers */
    unsigned max_per_client;    /* connections per client address; 0: no limit */
    unsigned max_connections;   /* 0: what the open-file limit allows */
    unsigned io_threads;        /* 0: 4 */
} http_limits;

typedef struct {
    struct MHD_Daemon *daemon;
    int port; /* the port bound */
    http_limits limits;
    http_handler handler;
    void *user;
    http_deadlines deadlines;
    _Atomic int n_handling; /* handler threads running */
    _Atomic bool stopping;  /* http_server_stop began: requests get 503 on the I/O thread */
    _Atomic bool quiesced;  /* http_server_quiesce called: new connections are closed at once */
    _Atomic uint64_t responses[6]; /* by status class: [2] = 2xx ... [5] = 5xx */
} http_server;

#define HTTP_MAX_EXTRA_HEADERS 8

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
    /* Set by the handler thread, read by the I/O thread once it resumes. */
    enum { REQ_RECEIVING, REQ_HANDLING, REQ_HANDLED } stage;
    struct MHD_Response *reply;
    int reply_status;
    bool hang_up; /* the handler returned MHD_NO */
    bool http11;
    bool client_eof; /* the client shut its sending side while we answered */
};

/* Listens on host:port (0: any free port). Returns -1 with err_get() when the
 * address cannot be bound. */
int http_server_start(http_server *h, const char *host, int port, const http_limits *limits,
                      http_handler handler, void *user);
/* From now a new connection is closed as soon as it is accepted (the client
 * sees it reset, as a load balancer sees a refusal); open ones are still
 * served. */
void http_server_quiesce(http_server *h);
/* Closes every connection and joins the threads. New requests get 503 on
 * the I/O threads from now, and handler threads get 2 s to return: none may
 * still run, nor a stream be paused, when libmicrohttpd stops (it aborts the
 * process then), so the caller first waits for its requests to end. */
void http_server_stop(http_server *h);
/* Handler threads still running (e.g. tokenizing, or waiting for the engine). */
int http_server_handling(http_server *h);

/* Adds a header to the response this request gets (e.g. Allow on a 405);
 * name and value must live until the reply is queued. */
void http_add_header(http_req *r, const char *name, const char *value);
enum MHD_Result http_reply(http_req *r, int status, const char *content_type, const char *body, size_t len);
/* Takes ownership of j. */
enum MHD_Result http_reply_json(http_req *r, int status, json_t *j);
enum MHD_Result http_reply_error(http_req *r, const api_error *e);
/* A callback-driven (chunked) response, for SSE. The reader runs on an I/O
 * thread: see http_pause. */
enum MHD_Result http_reply_stream(http_req *r, const char *content_type, MHD_ContentReaderCallback read,
                                  void *cls, MHD_ContentReaderFreeCallback free_cls);
/* From a stream's reader that has nothing to send: stops polling the
 * connection until http_resume (the reader then returns 0). */
void http_pause(http_req *r);
/* Any thread: the paused stream's reader is called again soon. */
void http_resume(http_req *r);

/* For a handler that waits (its connection is its own meanwhile): the
 * client's socket to poll beside what it waits for, and after poll reported
 * revents on it, whether the client has gone. A reset or error means gone. A
 * read EOF alone may be a client that shut down only its sending side and
 * still reads its answer, so it is not taken as gone: an HTTP/1.1 client is
 * sent one interim "100 Continue" (which HTTP clients skip), and a client
 * that closed entirely answers that with a reset, seen by the next poll. */
struct pollfd http_client_pollfd(const http_req *r);
bool http_client_gone(http_req *r, short revents);

const char *http_header(http_req *r, const char *name);
/* Parses the body as a JSON value, U+0000 in its strings replaced by U+FFFD;
 * on failure fills *e (400; 500 out of memory) and returns NULL. */
json_t *http_body_json(http_req *r, api_error *e);

#endif
