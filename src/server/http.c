/* See http.h. The access handler is called once with the headers, then with
 * each piece of the body, then once more with nothing: that last call hands
 * the request to the handler. A body over the limit is read and dropped
 * (answering before the client has sent it all makes many clients see a
 * reset instead of the handler's 413). */
#include "server/http.h"

#include "server/sse.h"
#include "util/error.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

enum MHD_Result http_reply(http_req *r, int status, const char *content_type, const char *body, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    if (content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    add_extra_headers(r, resp);
    enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    count_response(r->http, status);
    return rc;
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
    enum MHD_Result rc = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    count_response(r->http, 200);
    return rc;
}

int http_conn_fd(http_req *r) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

const char *http_header(http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

json_t *http_body_json(http_req *r, api_error *e) {
    if (r->body.len == 0) {
        api_fail(e, 400, "invalid_json", NULL, "The request body is empty; a JSON object is expected");
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(r->body.data, r->body.len, JSON_DECODE_ANY, &je);
    if (!j)
        api_fail(e, 400, "invalid_json", NULL, "We could not parse the JSON body of your request: %s (line %d, column %d)",
                 je.text, je.line, je.column);
    return j;
}

/* ---- the daemon ---- */

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
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!r->too_large && r->body.len + *upload_data_size > h->max_body_bytes) {
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
        return http_reply_error(r, &e);
    }
    return h->handler(h->user, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    http_req *r = *con_cls;
    if (!r) return;
    buf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

int http_server_start(http_server *h, const char *host, int port, size_t max_body_bytes, int max_connections,
                      http_handler handler, void *user) {
    memset(h, 0, sizeof *h);
    h->max_body_bytes = max_body_bytes;
    h->handler = handler;
    h->user = user;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    int gai = getaddrinfo(host, port_text, &hints, &ai);
    if (gai) return err_set("cannot resolve host '%s': %s", host, gai_strerror(gai));
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_CONNECTION_LIMIT, (unsigned)max_connections, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        1024u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)256 * 1024, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) return err_set("cannot listen on %s:%d (address in use or not available?)", host, port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : port;
    return 0;
}

void http_server_quiesce(http_server *h) {
    if (!h->daemon) return;
    MHD_socket fd = MHD_quiesce_daemon(h->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void http_server_stop(http_server *h) {
    if (h->daemon) MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
}
