/* Deadlines for the parts of a request a client sends: its headers must be
 * complete within header_s of the connection's start (or of the end of the
 * previous response on a kept-alive connection), its body within body_s of
 * the headers. libmicrohttpd's own timeout only measures silence, so a client
 * that sends one byte every few seconds would hold a connection forever; a
 * thread here looks at every tracked connection four times a second and shuts
 * down the socket of one past its deadline (libmicrohttpd then reads EOF and
 * closes it). While a request is being answered it has no deadline. */
#ifndef CLLM_SERVER_HTTP_DEADLINES_H
#define CLLM_SERVER_HTTP_DEADLINES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum { CONN_AWAITING_HEADERS, CONN_AWAITING_BODY, CONN_ANSWERING } conn_phase;

typedef struct tracked_conn tracked_conn;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool running, stopping;
    double header_s, body_s;
    tracked_conn *head; /* a doubly linked list, guarded by mu */
    _Atomic uint64_t n_cut; /* connections shut down for missing a deadline */
} http_deadlines;

/* Starts the watching thread. Returns -1 with err_get() if it cannot start. */
int http_deadlines_start(http_deadlines *d, double header_s, double body_s);
/* Stops it; every connection must have been untracked or be closed anyway. */
void http_deadlines_stop(http_deadlines *d);

/* A new connection on socket fd, awaiting its headers; NULL when out of memory
 * (the connection then simply has no deadline). */
tracked_conn *http_deadlines_track(http_deadlines *d, int fd);
/* Before the socket is closed: the watcher never touches it again. */
void http_deadlines_untrack(http_deadlines *d, tracked_conn *c);
/* Moves a connection to `phase`; its deadline restarts from now. */
void http_deadlines_enter(http_deadlines *d, tracked_conn *c, conn_phase phase);

#endif
