/* See sse.h. */
#include "server/sse.h"

#include <stdlib.h>
#include <string.h>

int sse_append_json(buf *b, const json_t *j) {
    char *s = json_dumps(j, SERVER_JSON_FLAGS);
    if (!s) return -1;
    buf_puts(b, "data: ");
    buf_puts(b, s);
    buf_puts(b, "\n\n");
    free(s);
    return 0;
}

void sse_append_done(buf *b) { buf_puts(b, "data: [DONE]\n\n"); }

int sse_append_event(buf *b, const char *name, const json_t *j) {
    buf_puts(b, "event: ");
    buf_puts(b, name);
    buf_puts(b, "\n");
    return sse_append_json(b, j);
}
