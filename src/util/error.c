/* Per-thread last-error message; see error.h. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_error[1024];
static _Thread_local bool g_oom;

static int set_message(bool oom, const char *fmt, va_list ap) {
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    g_oom = oom;
    return -1;
}

int err_set(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(false, fmt, ap);
    va_end(ap);
    return -1;
}

int err_oom(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(true, fmt, ap);
    va_end(ap);
    return -1;
}

bool err_is_oom(void) { return g_oom; }

int err_prefix(const char *fmt, ...) {
    char prefix[512], old[sizeof g_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_error, sizeof old);
    size_t n = strlen(prefix);
    memcpy(g_error, prefix, n);
    size_t room = sizeof g_error - 1 - n, m = strlen(old);
    if (m > room) m = room;
    memcpy(g_error + n, old, m);
    g_error[n + m] = 0;
    return -1;
}

const char *err_get(void) { return g_error[0] ? g_error : "unknown error"; }

void err_clear(void) {
    g_error[0] = 0;
    g_oom = false;
}
