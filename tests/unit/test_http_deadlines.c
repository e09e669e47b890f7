/* The request deadlines (server/http_deadlines.c) on socket pairs: a
 * connection past its header or body deadline is shut down (its peer reads
 * EOF), however recently it moved to that phase's start; one being answered
 * is never cut off; an untracked one is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/http_deadlines.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int server, client;
} sock_pair;

static sock_pair make_pair(void) {
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    return (sock_pair){fds[0], fds[1]};
}

static void close_pair(sock_pair p) {
    close(p.server);
    close(p.client);
}

/* Whether the client end reads EOF within ms milliseconds. */
static bool client_sees_eof(sock_pair p, int ms) {
    struct pollfd pf = {.fd = p.client, .events = POLLIN};
    if (poll(&pf, 1, ms) <= 0) return false;
    char c;
    return read(p.client, &c, 1) == 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_headers_past_their_deadline_are_cut_off(void **state) {
    (void)state;
    http_deadlines d;
    assert_int_equal(http_deadlines_start(&d, 0.3, 5), 0);
    sock_pair p = make_pair();
    tracked_conn *c = http_deadlines_track(&d, p.server);
    assert_non_null(c);
    assert_false(client_sees_eof(p, 100));
    assert_true(client_sees_eof(p, 1500));
    assert_int_equal(atomic_load(&d.n_cut), 1);
    http_deadlines_untrack(&d, c);
    http_deadlines_stop(&d);
    close_pair(p);
}

static void test_body_deadline_counts_from_the_headers(void **state) {
    (void)state;
    http_deadlines d;
    assert_int_equal(http_deadlines_start(&d, 0.3, 0.8), 0);
    sock_pair p = make_pair();
    tracked_conn *c = http_deadlines_track(&d, p.server);
    sleep_ms(200);
    http_deadlines_enter(&d, c, CONN_AWAITING_BODY); /* headers in time: the body clock starts */
    assert_false(client_sees_eof(p, 400));           /* past the header deadline, within the body's */
    assert_true(client_sees_eof(p, 1500));
    http_deadlines_untrack(&d, c);
    http_deadlines_stop(&d);
    close_pair(p);
}

static void test_answering_and_untracked_connections_stay(void **state) {
    (void)state;
    http_deadlines d;
    assert_int_equal(http_deadlines_start(&d, 0.2, 0.2), 0);
    sock_pair answering = make_pair(), untracked = make_pair();
    tracked_conn *a = http_deadlines_track(&d, answering.server);
    tracked_conn *u = http_deadlines_track(&d, untracked.server);
    http_deadlines_enter(&d, a, CONN_ANSWERING);
    http_deadlines_untrack(&d, u);
    assert_false(client_sees_eof(answering, 800));
    assert_false(client_sees_eof(untracked, 10));
    assert_int_equal(atomic_load(&d.n_cut), 0);
    http_deadlines_untrack(&d, a);
    http_deadlines_stop(&d);
    close_pair(answering);
    close_pair(untracked);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers_past_their_deadline_are_cut_off),
        cmocka_unit_test(test_body_deadline_counts_from_the_headers),
        cmocka_unit_test(test_answering_and_untracked_connections_stay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
