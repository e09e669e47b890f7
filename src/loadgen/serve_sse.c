/* Server-Sent Events as the WHATWG spec reads them (lines end with LF, CRLF
 * or CR; "data:" lines accumulate; a blank line dispatches; ':' starts a
 * comment), fed incrementally so a chunk may end anywhere, even between the
 * CR and LF of one line end. Then the meaning of one event for the benchmark:
 * the OpenAI streaming chunk of /v1/completions (choices[].text) or
 * /v1/chat/completions (choices[].delta.content), the usage chunk that
 * stream_options.include_usage asks for, `[DONE]`, or an error object. */
#include "loadgen/serve.h"
#include "util/buf.h"
#include "util/array.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sse_init(sse_parser *p, sse_event_fn fn, void *user) {
    *p = (sse_parser){.on_event = fn, .user = user};
}

void sse_free(sse_parser *p) {
    buf_free(&p->line);
    buf_free(&p->data);
}

static void dispatch(sse_parser *p) {
    if (p->has_data && !p->data.oom) {
        size_t n = p->data.len;
        if (n && p->data.data[n - 1] == '\n') n--; /* the spec drops the last line feed */
        p->data.data[n] = '\0';
        p->on_event(p->user, p->data.data, n);
    }
    buf_reset(&p->data);
    p->has_data = false;
}

static void process_line(sse_parser *p) {
    const char *l = p->line.data;
    const size_t n = p->line.len;
    if (n == 0) {
        dispatch(p);
        return;
    }
    if (l[0] == ':') return; /* comment (keep-alive pings) */
    const char *colon = memchr(l, ':', n);
    const size_t name_len = colon ? (size_t)(colon - l) : n;
    if (name_len != 4 || memcmp(l, "data", 4)) return; /* event:, id:, retry: do not matter here */
    const char *v = colon ? colon + 1 : l + n;
    if (v < l + n && *v == ' ') v++;
    buf_append(&p->data, v, (size_t)(l + n - v));
    buf_puts(&p->data, "\n");
    p->has_data = true;
}

void sse_feed(sse_parser *p, const char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char c = bytes[i];
        if (p->last_cr) {
            p->last_cr = false;
            if (c == '\n') continue;
        }
        if (c == '\r' || c == '\n') {
            p->last_cr = c == '\r';
            process_line(p);
            buf_reset(&p->line);
            continue;
        }
        /* the bytes up to the next line end in one append */
        size_t j = i + 1;
        while (j < n && bytes[j] != '\r' && bytes[j] != '\n') j++;
        buf_append(&p->line, bytes + i, j - i);
        i = j - 1;
    }
}

void sse_finish(sse_parser *p) {
    if (p->line.len) {
        process_line(p);
        buf_reset(&p->line);
    }
    dispatch(p);
}

bool sse_oom(const sse_parser *p) { return p->line.oom || p->data.oom; }

/* ---- one request's stream ---- */

void bench_stream_init(bench_stream *s) {
    *s = (bench_stream){.prompt_tokens = -1, .completion_tokens = -1};
}

void bench_stream_free(bench_stream *s) {
    free(s->itl);
    free(s->error);
    s->itl = NULL;
    s->error = NULL;
}

void bench_stream_fail(bench_stream *s, const char *fmt, ...) {
    if (s->error) return; /* the first error is the one that explains */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->error = strdup(msg);
}

static void text_chunk(bench_stream *s, double t) {
    if (s->n_text_chunks++ == 0) {
        s->t_first = s->t_last = t;
        return;
    }
    if (array_reserve((void **)&s->itl, &s->itl_cap, (size_t)s->n_itl + 1, sizeof *s->itl)) {
        bench_stream_fail(s, "out of memory");
        return;
    }
    s->itl[s->n_itl++] = t - s->t_last;
    s->t_last = t;
}

static long usage_field(const json_t *usage, const char *key) {
    const json_t *v = json_object_get(usage, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

void bench_chunk_apply(bench_stream *s, const char *data, size_t len, double t) {
    while (len && (*data == ' ' || *data == '\t')) data++, len--;
    while (len && (data[len - 1] == ' ' || data[len - 1] == '\t' || data[len - 1] == '\n')) len--;
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        s->done = true;
        return;
    }
    json_error_t jerr;
    json_t *j = json_loadb(data, len, 0, &jerr);
    if (!j || !json_is_object(j)) {
        bench_stream_fail(s, "unreadable stream event (%s): %.120s", j ? "not an object" : jerr.text, data);
        json_decref(j);
        return;
    }
    const json_t *err = json_object_get(j, "error");
    if (err && !json_is_null(err)) {
        const json_t *msg = json_is_object(err) ? json_object_get(err, "message") : err;
        if (json_is_string(msg)) {
            bench_stream_fail(s, "server error in stream: %.300s", json_string_value(msg));
        } else {
            char *dump = json_dumps(err, JSON_COMPACT);
            bench_stream_fail(s, "server error in stream: %.300s", dump ? dump : "?");
            free(dump);
        }
        json_decref(j);
        return;
    }
    const json_t *choices = json_object_get(j, "choices");
    if (json_is_array(choices) && json_array_size(choices) > 0) {
        const json_t *c = json_array_get(choices, 0);
        const json_t *text = json_object_get(c, "text");
        if (!text) text = json_object_get(json_object_get(c, "delta"), "content");
        if (json_is_string(text) && json_string_length(text) > 0) text_chunk(s, t);
        const json_t *fin = json_object_get(c, "finish_reason");
        if (json_is_string(fin)) s->finished = true;
    }
    const json_t *usage = json_object_get(j, "usage");
    if (json_is_object(usage)) {
        const long pt = usage_field(usage, "prompt_tokens"), ct = usage_field(usage, "completion_tokens");
        if (pt >= 0) s->prompt_tokens = pt;
        if (ct >= 0) s->completion_tokens = ct;
    }
    json_decref(j);
}

bool bench_stream_ok(const bench_stream *s) {
    return !s->error && s->n_text_chunks > 0 && (s->done || s->finished);
}
