/* See http.h. The access handler is called once with the headers, then with
 * each piece of the body, then once more with nothing: that call suspends the
 * connection and starts the request's handler thread, which stores its reply
 * in the request and resumes the connection; libmicrohttpd then calls the
 * access handler again, and the stored reply is queued (a response may only
 * be queued from the access handler). A body over the limit is read and
 * dropped (answering before the client has sent it all makes many clients see
 * a reset instead of the handler's 413). */
#include "server/http.h"

#include "server/sse.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static void count_response(http_server *h, int status) {
    const int cls = status / 100;
    if (cls >= 1 && cls <= 5) atomic_fetch_add(&h->responses[cls], 1);
}

void http_add_header(http_req *r, const char *name, const char *value) {
    if (r->n_extra_headers == HTTP_MAX_EXTRA_HEADERS) return; /* a handler's bug; the reply still goes out */
    r->extra_headers[r->n_extra_headers].name = name;
    r->extra_headers[r->n_extra_headers++].value = value;
}

static void add_extra_headers(http_req *r, struct MHD_Response *resp) {
    for (int i = 0; i < r->n_extra_headers; i++)
        MHD_add_response_header(resp, r->extra_headers[i].name, r->extra_headers[i].value);
}

/* Holds the reply until the handler returns (a second one replaces it). */
static enum MHD_Result keep_reply(http_req *r, int status, struct MHD_Response *resp) {
    if (r->reply) MHD_destroy_response(r->reply);
    r->reply = resp;
    r->reply_status = status;
    return MHD_YES;
}

enum MHD_Result http_reply(http_req *r, int status, const char *content_type, const char *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    if (content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    add_extra_headers(r, resp);
    return keep_reply(r, status, resp);
}

enum MHD_Result http_reply_json(http_req *r, int status, json_t *j) {
    char *s = j ? json_dumps(j, SERVER_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"cannot serialize the response\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":\"internal_error\"}}";
        return http_reply(r, 500, "application/json", oom, sizeof oom - 1);
    }
    enum MHD_Result rc = http_reply(r, status, "application/json", s, strlen(s));
    free(s);
    return rc;
}

enum MHD_Result http_reply_error(http_req *r, const api_error *e) {
    return http_reply_json(r, e->status, api_error_json(e));
}

enum MHD_Result http_reply_stream(http_req *r, const char *content_type, MHD_ContentReaderCallback read,
                                  void *cls, MHD_ContentReaderFreeCallback free_cls) {
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, read, cls, free_cls);
    if (!resp) {
        free_cls(cls);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    add_extra_headers(r, resp);
    return keep_reply(r, MHD_HTTP_OK, resp);
}

void http_pause(http_req *r) { MHD_suspend_connection(r->conn); }

void http_resume(http_req *r) { MHD_resume_connection(r->conn); }

static int conn_fd(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

struct pollfd http_client_pollfd(const http_req *r) {
    /* After an EOF, POLLRDHUP (and POLLIN) would fire at once forever; HUP
     * and ERR are reported whatever the events asked. */
    return (struct pollfd){.fd = conn_fd(r->conn), .events = r->client_eof ? 0 : POLLRDHUP};
}

bool http_client_gone(http_req *r, short revents) {
    if (revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (!(revents & POLLRDHUP) || r->client_eof) return false;
    r->client_eof = true;
    /* HTTP/1.0 clients must not get a 1xx; such a client is found gone only
     * when its answer cannot be written. */
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!r->http11) return false;
    const ssize_t n = send(conn_fd(r->conn), probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK;
}

const char *http_header(http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* U+0000 in a string value (JSON allows it: a client echoing back a reply
 * that held a byte-0 token sends one) becomes U+FFFD, the replacement
 * character: the server reads strings as C strings, where a NUL would
 * silently cut the rest of a message off. Object keys cannot hold one
 * (the parser refuses them). False when out of memory. The parser bounds
 * the depth of the recursion. */
static bool replace_nuls(json_t *j) {
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        const size_t n = json_string_length(j);
        if (strlen(s) == n) return true;
        buf out = {0};
        size_t at = 0;
        for (const char *z; (z = memchr(s + at, 0, n - at)); at = (size_t)(z - s) + 1) {
            buf_append(&out, s + at, (size_t)(z - s) - at);
            buf_append(&out, "\xEF\xBF\xBD", 3);
        }
        buf_append(&out, s + at, n - at);
        const bool ok = !out.oom && json_string_setn_nocheck(j, out.data, out.len) == 0;
        buf_free(&out);
        return ok;
    }
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) if (!replace_nuls(v)) return false;
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) if (!replace_nuls(v)) return false;
    }
    return true;
}

json_t *http_body_json(http_req *r, api_error *e) {
    if (r->body.len == 0) {
        api_fail(e, 400, "invalid_json", NULL, "The request body is empty; a JSON object is expected");
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(r->body.data, r->body.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j) {
        api_fail(e, 400, "invalid_json", NULL, "We could not parse the JSON body of your request: %s (line %d, column %d)",
                 je.text, je.line, je.column);
        return NULL;
    }
    /* Only a body that spells the escape can hold a NUL: no walk otherwise. */
    if (memmem(r->body.data, r->body.len, "\\u0000", 6) && !replace_nuls(j)) {
        json_decref(j);
        api_fail(e, 500, "out_of_memory", NULL, "out of memory reading the request body");
        return NULL;
    }
    return j;
}

/* ---- the daemon ---- */

static tracked_conn *tracked(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    http_server *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        *socket_context = http_deadlines_track(&h->deadlines, conn_fd(conn));
    else
        http_deadlines_untrack(&h->deadlines, *socket_context);
}

static void *handler_thread(void *arg) {
    http_req *r = arg;
    http_server *h = r->http;
    r->hang_up = h->handler(h->user, r) == MHD_NO;
    r->stage = REQ_HANDLED;
    /* From here the I/O thread owns r (it may free it at once). */
    MHD_resume_connection(r->conn);
    atomic_fetch_sub(&h->n_handling, 1);
    return NULL;
}

/* Called again once the handler thread resumed the connection. */
static enum MHD_Result send_reply(http_req *r) {
    if (r->hang_up || !r->reply) return MHD_NO;
    const enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)r->reply_status, r->reply);
    count_response(r->http, r->reply_status);
    MHD_destroy_response(r->reply);
    r->reply = NULL;
    return rc;
}

/* The final call of a complete request: its handler runs on a thread of its
 * own while the connection waits suspended. */
static enum MHD_Result start_handler(http_server *h, http_req *r) {
    r->stage = REQ_HANDLING;
    http_deadlines_enter(&h->deadlines, tracked(r->conn), CONN_ANSWERING);
    /* Counted before stopping is read, as http_server_stop sets stopping
     * before it reads the count: one of the two sees the other. */
    atomic_fetch_add(&h->n_handling, 1);
    if (atomic_load(&h->stopping)) { /* no connection may be suspended from now */
        atomic_fetch_sub(&h->n_handling, 1);
        api_error e;
        api_fail(&e, 503, "shutting_down", NULL, "The server is shutting down");
        http_reply_error(r, &e);
        return send_reply(r);
    }
    MHD_suspend_connection(r->conn);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    const int failed = pthread_create(&t, &attr, handler_thread, r);
    pthread_attr_destroy(&attr);
    if (failed) {
        atomic_fetch_sub(&h->n_handling, 1);
        api_error e;
        api_fail(&e, 503, "server_busy", NULL, "The server cannot start a thread for this request (%s); retry later",
                 strerror(failed));
        http_reply_error(r, &e);
        r->stage = REQ_HANDLED;
        MHD_resume_connection(r->conn);
    }
    return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
    http_server *h = cls;
    http_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->http = h;
        r->conn = conn;
        r->method = method;
        r->path = url;
        r->http11 = !strcmp(version, MHD_HTTP_VERSION_1_1);
        *con_cls = r;
        http_deadlines_enter(&h->deadlines, tracked(conn), CONN_AWAITING_BODY);
        return MHD_YES;
    }
    if (r->stage == REQ_HANDLED) return send_reply(r);
    if (*upload_data_size) {
        if (!r->too_large && r->body.len + *upload_data_size > h->limits.max_body_bytes) {
            r->too_large = true;
            buf_free(&r->body);
        }
        if (!r->too_large) buf_append(&r->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->body.oom) {
        api_error e;
        api_fail(&e, 500, "out_of_memory", NULL, "out of memory reading the request body");
        http_reply_error(r, &e);
        return send_reply(r);
    }
    return start_handler(h, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    http_server *h = cls;
    (void)toe;
    http_req *r = *con_cls;
    if (!r) return;
    if (r->reply) MHD_destroy_response(r->reply);
    buf_free(&r->body);
    free(r);
    *con_cls = NULL;
    /* A kept-alive connection now awaits its next request's headers. */
    http_deadlines_enter(&h->deadlines, tracked(conn), CONN_AWAITING_HEADERS);
}

/* libmicrohttpd's own MHD_quiesce_daemon is not used: in 0.9.75 it removes
 * the listen socket from each epoll worker's set while that worker may be
 * removing it too, and the loser's ENOENT aborts the process ("Failed to
 * remove listen FD from epoll set", seen on SIGTERM while deadlines were
 * cutting connections). The accept policy below needs no shared state but
 * this flag. */
void http_server_quiesce(http_server *h) { atomic_store(&h->quiesced, true); }

static enum MHD_Result on_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addr;
    (void)addrlen;
    http_server *h = cls;
    return atomic_load(&h->quiesced) ? MHD_NO : MHD_YES;
}

/* Room for connections under the open-file limit, less some for the model,
 * the engine and the handlers' eventfds. */
static unsigned connections_allowed(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY) return 65536;
    return rl.rlim_cur > 512 ? (unsigned)(rl.rlim_cur - 256) : (unsigned)(rl.rlim_cur / 2);
}

int http_server_start(http_server *h, const char *host, int port, const http_limits *limits,
                      http_handler handler, void *user) {
    memset(h, 0, sizeof *h);
    h->limits = *limits;
    if (!h->limits.max_connections) h->limits.max_connections = connections_allowed();
    if (!h->limits.io_threads) h->limits.io_threads = 4;
    h->handler = handler;
    h->user = user;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    int gai = getaddrinfo(host, port_text, &hints, &ai);
    if (gai) return err_set("cannot resolve host '%s': %s", host, gai_strerror(gai));
    if (http_deadlines_start(&h->deadlines, h->limits.header_timeout_s, h->limits.body_timeout_s)) {
        freeaddrinfo(ai);
        return -1;
    }
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(
        flags, 0, on_accept_policy, h, on_access, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_THREAD_POOL_SIZE,
        h->limits.io_threads, MHD_OPTION_CONNECTION_LIMIT, h->limits.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->limits.max_per_client, MHD_OPTION_CONNECTION_TIMEOUT,
        h->limits.keep_alive_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)256 * 1024, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) {
        http_deadlines_stop(&h->deadlines);
        return err_set("cannot listen on %s:%d (address in use or not available?)", host, port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : port;
    return 0;
}

/* How long http_server_stop waits for handler threads that already started
 * (answering 503 while draining takes microseconds). */
#define STOP_WAIT_S 2.0

void http_server_stop(http_server *h) {
    atomic_store(&h->stopping, true);
    const double give_up = now_seconds() + STOP_WAIT_S;
    while (atomic_load(&h->n_handling) > 0 && now_seconds() < give_up) usleep(2000);
    if (h->daemon) MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
    http_deadlines_stop(&h->deadlines);
}

int http_server_handling(http_server *h) { return atomic_load(&h->n_handling); }
