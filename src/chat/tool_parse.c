/* See tool_parse.h. The text is scanned once from the start: content up to
 * the next call marker, then the format's call block, and again. JSON is
 * scanned by hand only to find where values end (strings skipped, brackets
 * matched), which also works on a prefix; every complete value is then
 * checked by jansson, so what counts as JSON is jansson's strict grammar. */
#include "chat/tool_parse.h"

#include "chat/reasoning.h"
#include "util/utf8.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SCAN_DONE, SCAN_PARTIAL, SCAN_BAD } scan_rc;

#define MAX_JSON_DEPTH 64

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static size_t skip_ws(const char *s, size_t i, size_t n) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* The first `what` in s[0, n), or NULL. */
static const char *find_in(const char *s, size_t n, const char *what) { return memmem(s, n, what, strlen(what)); }

static bool json_ok(const char *s, size_t len) {
    json_error_t err;
    json_t *v = json_loadb(s, len, JSON_DECODE_ANY, &err);
    json_decref(v);
    return v != NULL;
}

/* What s[i, n) is against `lit`: the literal whole (DONE, *end after it), a
 * proper prefix of it (PARTIAL), or something else (BAD). */
static scan_rc match_literal(const char *s, size_t i, size_t n, const char *lit, size_t *end) {
    const size_t k = strlen(lit), have = n - i < k ? n - i : k;
    if (memcmp(s + i, lit, have)) return SCAN_BAD;
    if (have < k) return SCAN_PARTIAL;
    *end = i + k;
    return SCAN_DONE;
}

/* A JSON string starting at s[i] == '"'. */
static scan_rc scan_string(const char *s, size_t i, size_t n, size_t *end) {
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] == '\\') {
            k++;
        } else if (s[k] == '"') {
            *end = k + 1;
            return SCAN_DONE;
        } else if ((unsigned char)s[k] < 0x20) {
            return SCAN_BAD;
        }
    }
    *end = n;
    return SCAN_PARTIAL;
}

/* Any JSON value starting at s[i]; *end is where it ends (n when PARTIAL). */
static scan_rc scan_value(const char *s, size_t i, size_t n, size_t *end) {
    *end = n;
    if (i >= n) return SCAN_PARTIAL;
    const size_t start = i;
    if (s[i] == '"') return scan_string(s, i, n, end);
    if (s[i] != '{' && s[i] != '[') { /* number, true, false, null */
        while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '+' || s[i] == '.')) i++;
        if (i == start) return SCAN_BAD;
        if (i == n) return SCAN_PARTIAL;
        *end = i;
        return json_ok(s + start, i - start) ? SCAN_DONE : SCAN_BAD;
    }
    char open[MAX_JSON_DEPTH];
    int depth = 0;
    for (; i < n; i++) {
        const char c = s[i];
        if (c == '"') {
            size_t e;
            const scan_rc rc = scan_string(s, i, n, &e);
            if (rc != SCAN_DONE) return rc;
            i = e - 1;
        } else if (c == '{' || c == '[') {
            if (depth == MAX_JSON_DEPTH) return SCAN_BAD;
            open[depth++] = c;
        } else if (c == '}' || c == ']') {
            if (!depth || open[depth - 1] != (c == '}' ? '{' : '[')) return SCAN_BAD;
            if (--depth == 0) {
                *end = i + 1;
                return json_ok(s + start, i + 1 - start) ? SCAN_DONE : SCAN_BAD;
            }
        }
    }
    return SCAN_PARTIAL;
}

static bool key_is(const char *s, size_t key_off, size_t key_end, const char *want) {
    const size_t len = key_end - key_off;
    return len == strlen(want) && !memcmp(s + key_off, want, len);
}

/* A call object {"name": "...", "arguments": {...}} (or "parameters") at
 * s[i] == '{'. Fills c as far as the text goes. */
static scan_rc scan_call_object(const char *s, size_t i, size_t n, tool_parsed_call *c, size_t *end) {
    const size_t start = i;
    bool have_args = false;
    *end = n;
    for (i++;;) {
        i = skip_ws(s, i, n);
        if (i >= n) return SCAN_PARTIAL;
        if (s[i] == '}') {
            *end = i + 1;
            break;
        }
        if (s[i] != '"') return SCAN_BAD;
        size_t key_end, v_end;
        scan_rc rc = scan_string(s, i, n, &key_end);
        if (rc != SCAN_DONE) return rc;
        const size_t key_off = i + 1;
        i = skip_ws(s, key_end, n);
        if (i >= n) return SCAN_PARTIAL;
        if (s[i] != ':') return SCAN_BAD;
        i = skip_ws(s, i + 1, n);
        if (i >= n) return SCAN_PARTIAL;
        rc = scan_value(s, i, n, &v_end);
        if (key_is(s, key_off, key_end - 1, "name")) {
            if (s[i] != '"') return SCAN_BAD;
            c->name = (tool_span){i + 1, rc == SCAN_DONE ? v_end - 1 - (i + 1) : 0};
            c->name_done = rc == SCAN_DONE;
            c->name_escaped = c->name_done && memchr(s + c->name.off, '\\', c->name.len) != NULL;
        } else if (key_is(s, key_off, key_end - 1, "arguments") || key_is(s, key_off, key_end - 1, "parameters")) {
            if (s[i] != '{' || have_args) return SCAN_BAD;
            have_args = true;
            c->args = (tool_span){i, v_end - i};
            c->args_done = rc == SCAN_DONE;
        }
        if (rc != SCAN_DONE) return rc;
        i = skip_ws(s, v_end, n);
        if (i >= n) return SCAN_PARTIAL;
        if (s[i] == ',') {
            i++;
        } else if (s[i] != '}') {
            return SCAN_BAD;
        }
    }
    if (!c->name_done || !json_ok(s + start, *end - start)) return SCAN_BAD;
    if (!have_args) c->args_missing = c->args_done = true;
    return SCAN_DONE;
}

/* A bare function name (functionary, mistral_args) at s[i], up to the
 * literal `close`. */
static scan_rc scan_bare_name(const char *s, size_t i, size_t n, const char *close, tool_parsed_call *c,
                              size_t *end) {
    const size_t start = i;
    while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-' || s[i] == '.')) i++;
    if (i >= n) return SCAN_PARTIAL;
    if (i == start) return SCAN_BAD;
    const scan_rc rc = match_literal(s, i, n, close, end);
    if (rc != SCAN_DONE) return rc;
    c->name = (tool_span){start, i - start};
    c->name_done = true;
    return SCAN_DONE;
}

/* An arguments object at s[i] (after optional whitespace). */
static scan_rc scan_args_object(const char *s, size_t i, size_t n, tool_parsed_call *c, size_t *end) {
    i = skip_ws(s, i, n);
    *end = n;
    if (i >= n) return SCAN_PARTIAL;
    if (s[i] != '{') return SCAN_BAD;
    const scan_rc rc = scan_value(s, i, n, end);
    c->args = (tool_span){i, *end - i};
    c->args_done = rc == SCAN_DONE;
    return rc;
}

static tool_parsed_call *new_call(tool_parse_result *r) {
    if (r->n_calls == TOOL_PARSE_MAX_CALLS) return NULL;
    tool_parsed_call *c = &r->calls[r->n_calls++];
    *c = (tool_parsed_call){0};
    return c;
}

static const char *start_marker(tool_format f) {
    switch (f) {
    case TOOL_FORMAT_HERMES: return "<tool_call>";
    case TOOL_FORMAT_MISTRAL:
    case TOOL_FORMAT_MISTRAL_ARGS: return "[TOOL_CALLS]";
    case TOOL_FORMAT_FUNCTIONARY: return "<function=";
    default: return NULL;
    }
}

#define PYTHON_TAG "<|python_tag|>"

/* The calls of one block starting at its marker s[m]; *after is where the
 * block ends. */
static scan_rc parse_block(tool_format f, const char *s, size_t m, size_t n, tool_parse_result *r, size_t *after) {
    tool_parsed_call *c;
    size_t i, e;
    scan_rc rc;
    switch (f) {
    case TOOL_FORMAT_HERMES:
        i = skip_ws(s, m + strlen("<tool_call>"), n);
        if (i >= n) return SCAN_PARTIAL;
        if (s[i] != '{' || !(c = new_call(r))) return SCAN_BAD;
        if ((rc = scan_call_object(s, i, n, c, &e)) != SCAN_DONE) return rc;
        if ((rc = match_literal(s, skip_ws(s, e, n), n, "</tool_call>", after)) != SCAN_DONE) return rc;
        c->done = true;
        return SCAN_DONE;
    case TOOL_FORMAT_FUNCTIONARY:
        if (!(c = new_call(r))) return SCAN_BAD;
        if ((rc = scan_bare_name(s, m + strlen("<function="), n, ">", c, &e)) != SCAN_DONE) return rc;
        if ((rc = scan_args_object(s, e, n, c, &e)) != SCAN_DONE) return rc;
        if ((rc = match_literal(s, e, n, "</function>", after)) != SCAN_DONE) return rc;
        c->done = true;
        return SCAN_DONE;
    case TOOL_FORMAT_MISTRAL_ARGS:
        if (!(c = new_call(r))) return SCAN_BAD;
        if ((rc = scan_bare_name(s, m + strlen("[TOOL_CALLS]"), n, "[ARGS]", c, &e)) != SCAN_DONE) return rc;
        if ((rc = scan_args_object(s, e, n, c, after)) != SCAN_DONE) return rc;
        c->done = true;
        return SCAN_DONE;
    case TOOL_FORMAT_MISTRAL:
        i = skip_ws(s, m + strlen("[TOOL_CALLS]"), n);
        if (i >= n) return SCAN_PARTIAL;
        if (s[i] != '[') return SCAN_BAD;
        for (;;) {
            i = skip_ws(s, i + 1, n);
            if (i >= n) return SCAN_PARTIAL;
            if (s[i] != '{' || !(c = new_call(r))) return SCAN_BAD;
            if ((rc = scan_call_object(s, i, n, c, &e)) != SCAN_DONE) return rc;
            c->done = true;
            i = skip_ws(s, e, n);
            if (i >= n) return SCAN_PARTIAL;
            if (s[i] == ']') break;
            if (s[i] != ',') return SCAN_BAD;
        }
        *after = i + 1;
        return SCAN_DONE;
    case TOOL_FORMAT_LLAMA3_JSON:
        i = m;
        if (match_literal(s, i, n, PYTHON_TAG, &e) == SCAN_DONE) i = skip_ws(s, e, n);
        for (;;) {
            if (i >= n) return SCAN_PARTIAL;
            if (s[i] != '{' || !(c = new_call(r))) return SCAN_BAD;
            if ((rc = scan_call_object(s, i, n, c, &e)) != SCAN_DONE) return rc;
            c->done = true;
            i = skip_ws(s, e, n);
            if (i >= n || s[i] != ';') break;
            i = skip_ws(s, i + 1, n);
        }
        *after = i;
        return SCAN_DONE;
    case TOOL_FORMAT_NONE:
    case TOOL_FORMAT_HARMONY: /* parse_harmony */
    case TOOL_FORMAT_GENERIC: break; /* tool_parse_generic */
    }
    return SCAN_BAD;
}

/* Where the next call block starts at or after pos: true with *m, or false
 * with *hold the bytes at the end that may still become one. */
static bool find_start(tool_format f, const char *s, size_t pos, size_t n, bool final, size_t *m, size_t *hold) {
    *hold = 0;
    if (f == TOOL_FORMAT_LLAMA3_JSON) { /* the whole reply is the call, or none is */
        if (pos != 0) return false;
        const size_t i = skip_ws(s, 0, n);
        size_t e;
        if (i < n && s[i] == '{') {
            *m = i;
            return true;
        }
        const scan_rc rc = match_literal(s, i, n, PYTHON_TAG, &e);
        if (rc == SCAN_DONE) {
            *m = i;
            return true;
        }
        if (rc == SCAN_PARTIAL && !final) *hold = n;
        return false;
    }
    const char *mk = start_marker(f);
    if (!mk) return false;
    const size_t k = strlen(mk);
    for (size_t i = pos; i < n; i++) {
        if (s[i] != mk[0]) continue;
        size_t e;
        const scan_rc rc = match_literal(s, i, n, mk, &e);
        if (rc == SCAN_DONE) {
            *m = i;
            return true;
        }
        if (rc == SCAN_PARTIAL && !final && n - i < k) {
            *hold = n - i;
            return false;
        }
    }
    return false;
}

static void add_content(tool_parse_result *r, const char *s, size_t a, size_t b, bool trim_front, bool trim_back) {
    if (trim_front) a = skip_ws(s, a, b);
    if (trim_back)
        while (b > a && is_ws(s[b - 1])) b--;
    if (b > a && r->n_content < TOOL_PARSE_MAX_CONTENT) r->content[r->n_content++] = (tool_span){a, b - a};
}

/* gpt-oss's messages (tool_format.h, harmony): a message whose header names
 * a recipient "to=functions.NAME" is a call with its body as the
 * arguments; the body of a final (or other non-analysis) message is
 * content; analysis messages are the reasoning, read by reasoning.h, and
 * skipped here. */
static void parse_harmony(const char *s, size_t n, bool final, tool_parse_result *r) {
    static const char TO[] = "to=functions.";
    harmony_message m;
    for (size_t pos = 0; pos < n;) {
        if (!harmony_message_at(s, pos, n, final, &m)) { /* the header is not complete yet */
            if (final) r->malformed_at = pos, add_content(r, s, pos, n, false, false); /* cut there: plain */
            return;
        }
        const char *to = find_in(s + pos, m.header_end - pos, TO);
        if (to) {
            tool_parsed_call *c = new_call(r);
            const size_t name = (size_t)(to - s) + strlen(TO);
            size_t name_end = name, e;
            while (name_end < m.header_end && !is_ws(s[name_end]) && s[name_end] != '<') name_end++;
            scan_rc rc = c && name_end > name ? scan_args_object(s, m.body, m.end, c, &e) : SCAN_BAD;
            if (rc == SCAN_DONE && skip_ws(s, e, m.end) != m.end) rc = SCAN_BAD; /* more than the object */
            if (rc == SCAN_BAD || (rc == SCAN_PARTIAL && (final || m.next < n))) {
                r->n_calls -= c != NULL;
                r->malformed_at = pos;
                add_content(r, s, pos, n, false, false);
                return;
            }
            c->name = (tool_span){name, name_end - name};
            c->name_done = true;
            c->done = rc == SCAN_DONE && (m.next < n || final);
        } else if (!m.analysis) {
            add_content(r, s, m.body, m.end, false, false);
        }
        if (m.next >= n) return;
        pos = m.next;
    }
}

void tool_parse(tool_format f, const char *s, size_t n, bool final, tool_parse_result *r) {
    r->n_content = r->n_calls = 0;
    r->malformed_at = (size_t)-1;
    if (f == TOOL_FORMAT_HARMONY) {
        parse_harmony(s, n, final, r);
        return;
    }
    size_t pos = 0;
    bool after_call = false;
    for (;;) {
        size_t m = 0, hold = 0, after = 0;
        const bool found = find_start(f, s, pos, n, final, &m, &hold);
        /* Whitespace before a call, and at the end of an unfinished text
         * (a call may follow), is not content. */
        const int nc0 = r->n_content, n0 = r->n_calls;
        add_content(r, s, pos, found ? m : n - hold, after_call, found || !final);
        if (!found) return;
        const scan_rc rc = parse_block(f, s, m, n, r, &after);
        if (rc == SCAN_BAD || (rc == SCAN_PARTIAL && final)) {
            /* Not a call after all: the text from pos on is content, the
             * whitespace before the would-be marker included. */
            r->n_calls = n0;
            r->n_content = nc0;
            r->malformed_at = m;
            add_content(r, s, pos, n, after_call, !final);
            return;
        }
        if (rc == SCAN_PARTIAL) return;
        pos = after;
        after_call = true;
    }
}

/* Whether the finished call object at s[off, end) has only the keys name
 * and arguments (or parameters), its name one of names. */
static bool bare_call_ok(const char *s, size_t off, size_t end, const tool_parsed_call *c, const char *const *names,
                         int n_names) {
    if (c->args_missing) return false;
    json_error_t err;
    json_t *o = json_loadb(s + off, end - off, 0, &err);
    const char *name = json_string_value(json_object_get(o, "name"));
    bool ok = o && name && json_object_size(o) == 2;
    bool offered = false;
    for (int i = 0; ok && i < n_names && !offered; i++) offered = !strcmp(names[i], name);
    json_decref(o);
    return ok && offered;
}

/* After an opening fence "```" and an optional language word: the first
 * byte of the fenced text, or SCAN_PARTIAL / SCAN_BAD. */
static scan_rc scan_fence_open(const char *s, size_t i, size_t n, size_t *body) {
    size_t e;
    const scan_rc rc = match_literal(s, i, n, "```", &e);
    if (rc != SCAN_DONE) return rc;
    while (e < n && isalpha((unsigned char)s[e])) e++;
    while (e < n && (s[e] == ' ' || s[e] == '\t' || s[e] == '\r')) e++;
    if (e >= n) return SCAN_PARTIAL;
    if (s[e] != '\n') return SCAN_BAD;
    *body = e + 1;
    return SCAN_DONE;
}

tool_bare_rc tool_parse_bare(const char *s, size_t n, bool final, const char *const *names, int n_names,
                             tool_parse_result *r) {
    r->n_content = r->n_calls = 0;
    r->malformed_at = (size_t)-1;
    const tool_bare_rc partial = final ? TOOL_BARE_NO : TOOL_BARE_MAYBE;
    size_t i = skip_ws(s, 0, n), e;
    if (i >= n) return partial;
    const bool fenced = s[i] == '`';
    if (fenced) {
        const scan_rc rc = scan_fence_open(s, i, n, &i);
        if (rc != SCAN_DONE) return rc == SCAN_PARTIAL ? partial : TOOL_BARE_NO;
        i = skip_ws(s, i, n);
        if (i >= n) return partial;
    }
    const bool list = s[i] == '[';
    if (list) i = skip_ws(s, i + 1, n);
    for (;;) {
        if (i >= n) return partial;
        tool_parsed_call *c;
        if (s[i] != '{' || !(c = new_call(r))) return TOOL_BARE_NO;
        const scan_rc rc = scan_call_object(s, i, n, c, &e);
        if (rc != SCAN_DONE) return rc == SCAN_PARTIAL ? partial : TOOL_BARE_NO;
        if (!bare_call_ok(s, i, e, c, names, n_names)) return TOOL_BARE_NO;
        c->done = true;
        i = skip_ws(s, e, n);
        if (!list) break;
        if (i >= n) return partial;
        if (s[i] == ']') {
            i = skip_ws(s, i + 1, n);
            break;
        }
        if (s[i] != ',') return TOOL_BARE_NO;
        i = skip_ws(s, i + 1, n);
    }
    if (fenced) {
        if (i >= n) return partial;
        const scan_rc rc = match_literal(s, i, n, "```", &e);
        if (rc != SCAN_DONE) return rc == SCAN_PARTIAL ? partial : TOOL_BARE_NO;
        i = skip_ws(s, e, n);
    }
    if (i < n) return TOOL_BARE_NO;
    return final ? TOOL_BARE_YES : TOOL_BARE_MAYBE;
}

static bool hex4(const char *p, uint32_t *cp) {
    *cp = 0;
    for (int k = 0; k < 4; k++) {
        const char c = p[k];
        const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) return false;
        *cp = *cp << 4 | (uint32_t)v;
    }
    return true;
}

/* The inside of a JSON string from s[i] (after its opening quote), escapes
 * decoded, appended to out up to the closing quote (DONE, *end after it) or
 * to the last complete character or escape (PARTIAL). A lone surrogate
 * becomes U+FFFD. */
static scan_rc decode_string(const char *s, size_t i, size_t n, buf *out, size_t *end) {
    static const char simple_in[] = "\"\\/bfnrt", simple_out[] = "\"\\/\b\f\n\r\t";
    while (i < n) {
        if (s[i] == '"') {
            *end = i + 1;
            return SCAN_DONE;
        }
        if (s[i] != '\\') {
            size_t j = i;
            while (j < n && s[j] != '"' && s[j] != '\\') j++;
            buf_append(out, s + i, j - i);
            i = j;
            continue;
        }
        if (i + 1 >= n) return SCAN_PARTIAL;
        const char *simple = strchr(simple_in, s[i + 1]);
        if (simple && s[i + 1]) {
            buf_append(out, &simple_out[simple - simple_in], 1);
            i += 2;
            continue;
        }
        if (s[i + 1] != 'u') return SCAN_BAD;
        uint32_t cp, lo;
        if (i + 6 > n) return SCAN_PARTIAL;
        if (!hex4(s + i + 2, &cp)) return SCAN_BAD;
        i += 6;
        if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate: its low half must follow */
            const size_t have = n - i < 6 ? n - i : 6;
            if (have < 6 && !memcmp(s + i, "\\u", have < 2 ? have : 2)) return SCAN_PARTIAL;
            if (have == 6 && s[i] == '\\' && s[i + 1] == 'u' && hex4(s + i + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else {
                cp = 0xFFFD;
            }
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            cp = 0xFFFD;
        }
        char enc[4];
        buf_append(out, enc, (size_t)utf8_encode(enc, cp));
    }
    return SCAN_PARTIAL;
}

/* Calls so far: all of them while the reply goes on; once it has ended (cut
 * off by max_tokens inside the list), the complete ones, or plain text when
 * there are none. */
static tool_generic_rc calls_so_far(tool_parse_result *r, bool final) {
    if (!final) return TOOL_GENERIC_CALLS;
    while (r->n_calls && !r->calls[r->n_calls - 1].done) r->n_calls--;
    return r->n_calls ? TOOL_GENERIC_CALLS : TOOL_GENERIC_BAD;
}

tool_generic_rc tool_parse_generic(const char *s, size_t n, bool final, tool_parse_result *r, buf *content) {
    r->n_content = r->n_calls = 0;
    r->malformed_at = (size_t)-1;
    const tool_generic_rc unknown = final ? TOOL_GENERIC_BAD : TOOL_GENERIC_UNKNOWN;
    size_t i = skip_ws(s, 0, n), e;
    if (i >= n) return unknown;
    if (s[i] != '{') return TOOL_GENERIC_BAD;
    i = skip_ws(s, i + 1, n);
    if (i >= n) return unknown;
    if (s[i] != '"') return TOOL_GENERIC_BAD;
    scan_rc rc = scan_string(s, i, n, &e);
    if (rc == SCAN_BAD) return TOOL_GENERIC_BAD;
    if (rc == SCAN_PARTIAL) { /* the key so far: a prefix of one of the two? */
        const size_t k = n - (i + 1);
        return (k <= 10 && !memcmp(s + i + 1, "tool_calls", k)) || (k <= 7 && !memcmp(s + i + 1, "content", k))
                   ? unknown
                   : TOOL_GENERIC_BAD;
    }
    const bool calls = key_is(s, i + 1, e - 1, "tool_calls");
    if (!calls && !key_is(s, i + 1, e - 1, "content")) return TOOL_GENERIC_BAD;
    i = skip_ws(s, e, n);
    if (i >= n) return unknown;
    if (s[i] != ':') return TOOL_GENERIC_BAD;
    i = skip_ws(s, i + 1, n);
    if (i >= n) return unknown;
    if (!calls) {
        if (s[i] != '"') return TOOL_GENERIC_BAD;
        const size_t had = content->len;
        if (decode_string(s, i + 1, n, content, &e) == SCAN_BAD) {
            content->len = had;
            return TOOL_GENERIC_BAD;
        }
        return TOOL_GENERIC_CONTENT;
    }
    if (s[i] != '[') return TOOL_GENERIC_BAD;
    for (;;) {
        i = skip_ws(s, i + 1, n);
        if (i >= n) return calls_so_far(r, final);
        tool_parsed_call *c;
        if (s[i] != '{' || !(c = new_call(r))) return TOOL_GENERIC_BAD;
        rc = scan_call_object(s, i, n, c, &e);
        if (rc == SCAN_BAD) return TOOL_GENERIC_BAD;
        if (rc == SCAN_PARTIAL) return calls_so_far(r, final);
        c->done = true;
        i = skip_ws(s, e, n);
        if (i >= n) return calls_so_far(r, final);
        if (s[i] == ']') break;
        if (s[i] != ',') return TOOL_GENERIC_BAD;
    }
    i = skip_ws(s, i + 1, n);
    if (i >= n) return calls_so_far(r, final);
    if (s[i] != '}' || skip_ws(s, i + 1, n) < n) return TOOL_GENERIC_BAD;
    return TOOL_GENERIC_CALLS;
}

bool tool_parse_is_plain(const tool_parse_result *r) { return r->n_calls == 0 || r->malformed_at != (size_t)-1; }

char *tool_parse_name(const char *text, const tool_parsed_call *c) {
    if (!c->name_escaped) {
        char *out = malloc(c->name.len + 1);
        if (!out) return NULL;
        memcpy(out, text + c->name.off, c->name.len);
        out[c->name.len] = '\0';
        return out;
    }
    /* The raw name with its quotes is a JSON string. */
    json_error_t err;
    json_t *v = json_loadb(text + c->name.off - 1, c->name.len + 2, JSON_DECODE_ANY, &err);
    char *out = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
    json_decref(v);
    return out;
}
