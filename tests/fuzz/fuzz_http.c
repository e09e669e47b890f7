/* libFuzzer harness: raw bytes from a client through the HTTP layer
 * (src/server/http.c over libmicrohttpd): a live server on a loopback port,
 * started once, gets each input on a new TCP connection, the client's
 * sending side then shut; the harness reads until the server closes. What
 * runs is ours as the real server runs it: the accept path, request
 * gathering with the body size limit, the header/body deadlines, handler
 * threads with suspended connections, plain, JSON and streamed replies, and
 * the half-close handling. The handler routes by path, as routes.c does,
 * without an engine behind it:
 *   /json    the body through http_body_json, echoed back (or its 400)
 *   /stream  a chunked reply of a few SSE events, paused and resumed from
 *            another thread between events
 *   other    a 404 carrying the method, the path and a header's value
 * Fails on a crash, a leak or a sanitizer report. */
#include "server/http.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long the harness waits for more of the reply after shutting its
 * sending side. A complete request is answered within a millisecond, and a
 * streamed reply pauses well under one between events. A request the input
 * left incomplete gets no answer (the server cuts it only at its header or
 * body deadline, 1 s here), nor does a keep-alive connection close after its
 * answer; waiting for either would cost a second per input, so the harness
 * closes its side once nothing came for REPLY_IDLE_MS, and after
 * REPLY_MAX_MS in any case. A third of the inputs end that way, so this wait
 * sets the harness's rate; a reply that comes after it meets a closed
 * socket, a path worth running too. Whether the deadlines cut every stalled
 * connection is tested by tests/integration/test_server_slow_clients.py,
 * not here. */
#define REPLY_IDLE_MS 1
#define REPLY_MAX_MS 50

typedef struct {
    http_req *r;
    int sent, total;
    pthread_mutex_t mu;
    bool ready; /* the next event may be sent */
} sse_stream;

static void *resume_later(void *arg) {
    sse_stream *s = arg;
    usleep(200);
    pthread_mutex_lock(&s->mu);
    s->ready = true;
    pthread_mutex_unlock(&s->mu);
    http_resume(s->r);
    return NULL;
}

static ssize_t read_event(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    sse_stream *s = cls;
    pthread_mutex_lock(&s->mu);
    const bool ready = s->ready;
    s->ready = false;
    pthread_mutex_unlock(&s->mu);
    if (s->sent == s->total) return MHD_CONTENT_READER_END_OF_STREAM;
    if (!ready) {
        http_pause(s->r);
        pthread_t t;
        if (pthread_create(&t, NULL, resume_later, s) == 0) {
            pthread_detach(t);
        } else {
            s->ready = true;
            http_resume(s->r);
        }
        return 0;
    }
    const int n = snprintf(out, max, "data: {\"event\": %d}\n\n", s->sent++);
    return n < 0 || (size_t)n >= max ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void free_stream(void *cls) {
    sse_stream *s = cls;
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static enum MHD_Result handle(void *user, http_req *r) {
    (void)user;
    if (!strcmp(r->path, "/json")) {
        api_error e;
        memset(&e, 0, sizeof e);
        json_t *body = http_body_json(r, &e);
        if (!body) return http_reply_error(r, &e);
        return http_reply_json(r, 200, json_pack("{s:o, s:b}", "echo", body, "too_large", r->too_large));
    }
    if (!strcmp(r->path, "/stream")) {
        sse_stream *s = calloc(1, sizeof *s);
        if (!s) return MHD_NO;
        s->r = r;
        s->total = 3;
        s->ready = true;
        pthread_mutex_init(&s->mu, NULL);
        return http_reply_stream(r, "text/event-stream", read_event, s, free_stream);
    }
    const char *agent = http_header(r, "User-Agent");
    char text[512];
    const int n = snprintf(text, sizeof text, "%s %s not found (agent %s)", r->method, r->path, agent ? agent : "-");
    /* snprintf returns the untruncated length: a long path or agent exceeds text */
    const size_t len = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
    return http_reply(r, 404, "text/plain", text, len);
}

static http_server server;
static int server_port;

static void start_server(void) {
    const http_limits limits = {
        .max_body_bytes = 4096,
        .keep_alive_s = 2,
        .header_timeout_s = 1,
        .body_timeout_s = 1,
        .max_per_client = 0,
        .max_connections = 2048, /* inputs left incomplete linger up to a deadline */
        .io_threads = 2,
    };
    if (http_server_start(&server, "127.0.0.1", 0, &limits, handle, NULL) != 0) abort();
    server_port = server.port;
}

/* libFuzzer's timeout alarm (SIGALRM, every few seconds) interrupts
 * whatever call the harness is in; each call here goes on after EINTR. */

/* Connects to the server; false when it cannot. */
static bool connect_server(int fd) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return true;
    if (errno != EINTR) return false;
    /* The interrupted connect goes on in the kernel: wait for its result. */
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int rc;
    while ((rc = poll(&p, 1, 1000)) < 0 && errno == EINTR) {}
    int err = 0;
    socklen_t len = sizeof err;
    return rc > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

/* Sends what the socket takes now; a server that closed early is fine. */
static void send_all(int fd, const uint8_t *data, size_t size) {
    while (size > 0) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        const int ready = poll(&p, 1, 1000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return;
        const ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        data += n;
        size -= (size_t)n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start_server);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    if (!connect_server(fd)) {
        perror("fuzz_http: connect");
        abort();
    }
    send_all(fd, data, size);
    shutdown(fd, SHUT_WR);
    const double start = now_seconds(), last_call = start + REPLY_MAX_MS / 1000.0;
    double give_up = start + REPLY_IDLE_MS / 1000.0;
    char sink[4096];
    for (;;) {
        const double left = give_up - now_seconds();
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)ceil(left * 1000)) <= 0) continue;
        const ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* closed (or reset) by the server */
        give_up = now_seconds() + REPLY_IDLE_MS / 1000.0;
        if (give_up > last_call) give_up = last_call;
    }
    close(fd);
    return 0;
}
