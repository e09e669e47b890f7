/* See http_deadlines.h. The fd a tracked connection names stays valid while
 * it is in the list: libmicrohttpd reports a connection closed (and we
 * untrack it under the same mutex the watcher holds) before it closes the
 * socket, so the watcher never shuts down a reused descriptor. */
#include "server/http_deadlines.h"

#include "util/error.h"
#include "util/time.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

struct tracked_conn {
    tracked_conn *prev, *next;
    int fd;
    conn_phase phase;
    double deadline; /* now_seconds() clock; meaningless while answering */
};

#define WATCH_PERIOD_S 0.25

static void sweep(http_deadlines *d, double now) {
    for (tracked_conn *c = d->head; c; c = c->next) {
        if (c->phase == CONN_ANSWERING || now < c->deadline) continue;
        /* Counted first: the peer may see the cut (and a test read the
         * count) before this thread runs another instruction. */
        atomic_fetch_add(&d->n_cut, 1);
        shutdown(c->fd, SHUT_RDWR);
        c->phase = CONN_ANSWERING; /* once is enough; it closes soon */
    }
}

static void *watch(void *arg) {
    http_deadlines *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        sweep(d, now_seconds());
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(WATCH_PERIOD_S * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&d->wake, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int http_deadlines_start(http_deadlines *d, double header_s, double body_s) {
    *d = (http_deadlines){.header_s = header_s, .body_s = body_s};
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->wake, NULL);
    if (pthread_create(&d->thread, NULL, watch, d)) return err_set("cannot start the request deadline thread");
    d->running = true;
    return 0;
}

void http_deadlines_stop(http_deadlines *d) {
    if (!d->running) return;
    pthread_mutex_lock(&d->mu);
    d->stopping = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    d->running = false;
    for (tracked_conn *c = d->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    d->head = NULL;
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->mu);
}

static void set_phase(http_deadlines *d, tracked_conn *c, conn_phase phase) {
    c->phase = phase;
    c->deadline = now_seconds() + (phase == CONN_AWAITING_HEADERS ? d->header_s : d->body_s);
}

tracked_conn *http_deadlines_track(http_deadlines *d, int fd) {
    tracked_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    set_phase(d, c, CONN_AWAITING_HEADERS);
    pthread_mutex_lock(&d->mu);
    c->next = d->head;
    if (d->head) d->head->prev = c;
    d->head = c;
    pthread_mutex_unlock(&d->mu);
    return c;
}

void http_deadlines_untrack(http_deadlines *d, tracked_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&d->mu);
    if (c->prev) c->prev->next = c->next;
    else d->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&d->mu);
    free(c);
}

void http_deadlines_enter(http_deadlines *d, tracked_conn *c, conn_phase phase) {
    if (!c) return;
    pthread_mutex_lock(&d->mu);
    set_phase(d, c, phase);
    pthread_mutex_unlock(&d->mu);
}
