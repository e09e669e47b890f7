/* See cors.h. Matching follows Starlette's CORSMiddleware, which vLLM's
 * server uses: origins match exactly, methods exactly, headers without
 * regard to case, and the CORS-safelisted headers are always allowed. */
#include "server/cors.h"

#include "util/buf.h"
#include "util/error.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What "*" in --allowed-methods answers a preflight with. */
#define ALL_METHODS "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
/* Headers a browser may always send (Starlette's SAFELISTED_HEADERS). */
static const char *const SAFELISTED[] = {"accept", "accept-language", "content-language", "content-type", NULL};

static void free_list(char **l) {
    for (char **p = l; p && *p; p++) free(*p);
    free(l);
}

/* A JSON list of strings into a NULL-terminated array; json NULL gives `dflt`. */
static int parse_list(const char *flag, const char *json, const char *dflt, char ***out) {
    json_error_t jerr = {.text = "out of memory"};
    json_t *v = json ? json_loads(json, JSON_DECODE_ANY, &jerr) : dflt ? json_pack("[s]", dflt) : json_array();
    if (!v) return err_set("%s: not JSON (%s); give a list such as '[\"http://localhost:3000\"]'", flag, jerr.text);
    if (!json_is_array(v)) {
        json_decref(v);
        return err_set("%s: must be a JSON list of strings, such as '[\"*\"]'", flag);
    }
    char **l = calloc(json_array_size(v) + 1, sizeof *l);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) {
        if (!l || !json_is_string(s) || !(l[i] = strdup(json_string_value(s)))) {
            const bool oom = !l || json_is_string(s);
            free_list(l);
            json_decref(v);
            return oom ? err_oom("%s: out of memory", flag) : err_set("%s: item %zu is not a string", flag, i);
        }
    }
    json_decref(v);
    *out = l;
    return 0;
}

static bool has_star(char **l) {
    for (char **p = l; *p; p++)
        if (!strcmp(*p, "*")) return true;
    return false;
}

static char *join(char **l) {
    buf b = {0};
    for (char **p = l; *p; p++) {
        if (p != l) buf_puts(&b, ", ");
        buf_puts(&b, *p);
    }
    buf_puts(&b, "");
    if (b.oom) {
        buf_free(&b);
        return NULL;
    }
    return b.data;
}

int cors_config_parse(cors_config *c, const char *origins_json, const char *methods_json, const char *headers_json) {
    *c = (cors_config){0};
    if (parse_list("--allowed-origins", origins_json, NULL, &c->origins) ||
        parse_list("--allowed-methods", methods_json, "*", &c->methods) ||
        parse_list("--allowed-headers", headers_json, "*", &c->headers)) {
        cors_config_free(c);
        return -1;
    }
    c->methods_text = has_star(c->methods) ? strdup(ALL_METHODS) : join(c->methods);
    c->headers_text = join(c->headers);
    if (!c->methods_text || !c->headers_text) {
        cors_config_free(c);
        return err_oom("CORS settings: out of memory");
    }
    return 0;
}

void cors_config_free(cors_config *c) {
    free_list(c->origins);
    free_list(c->methods);
    free_list(c->headers);
    free(c->methods_text);
    free(c->headers_text);
    *c = (cors_config){0};
}

static bool in_list(char **l, const char *s, size_t n, bool fold_case) {
    for (char **p = l; p && *p; p++) {
        if (!strcmp(*p, "*")) return true;
        if (strlen(*p) == n && (fold_case ? !strncasecmp(*p, s, n) : !strncmp(*p, s, n))) return true;
    }
    return false;
}

static bool header_allowed(const cors_config *c, const char *name, size_t n) {
    for (const char *const *p = SAFELISTED; *p; p++)
        if (strlen(*p) == n && !strncasecmp(*p, name, n)) return true;
    return in_list(c->headers, name, n, true);
}

bool cors_is_preflight(http_req *r) {
    return !strcmp(r->method, "OPTIONS") && http_header(r, "Origin") &&
           http_header(r, "Access-Control-Request-Method");
}

static const char *allowed_origin(const cors_config *c, http_req *r) {
    const char *origin = http_header(r, "Origin");
    return origin && in_list(c->origins, origin, strlen(origin), false) ? origin : NULL;
}

void cors_annotate(const cors_config *c, http_req *r) {
    const char *origin = allowed_origin(c, r);
    if (!origin) return;
    http_add_header(r, "Access-Control-Allow-Origin", origin);
    http_add_header(r, "Vary", "Origin");
}

/* The first requested header not allowed, as *name / *n; false if none. */
static bool disallowed_header(const cors_config *c, const char *list, const char **name, size_t *n) {
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *end = p;
        while (*end && *end != ',') end++;
        size_t len = (size_t)(end - p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (len && !header_allowed(c, p, len)) {
            *name = p;
            *n = len;
            return true;
        }
        p = end;
    }
    return false;
}

enum MHD_Result cors_answer_preflight(const cors_config *c, http_req *r) {
    api_error e;
    const char *origin = allowed_origin(c, r);
    const char *method = http_header(r, "Access-Control-Request-Method");
    const char *want_headers = http_header(r, "Access-Control-Request-Headers");
    const char *bad;
    size_t n_bad;
    if (!origin)
        api_fail(&e, 400, "cors_origin_not_allowed", NULL,
                 "Disallowed CORS origin '%.200s' (the server's --allowed-origins does not list it)",
                 http_header(r, "Origin"));
    else if (!in_list(c->methods, method, strlen(method), false))
        api_fail(&e, 400, "cors_method_not_allowed", NULL,
                 "Disallowed CORS method '%.32s' (the server's --allowed-methods does not list it)", method);
    else if (disallowed_header(c, want_headers, &bad, &n_bad))
        api_fail(&e, 400, "cors_header_not_allowed", NULL,
                 "Disallowed CORS header '%.*s' (the server's --allowed-headers does not list it)",
                 (int)(n_bad < 100 ? n_bad : 100), bad);
    else {
        /* "*" grants whatever headers the browser asked for. */
        const char *headers = has_star(c->headers) && want_headers ? want_headers : c->headers_text;
        http_add_header(r, "Access-Control-Allow-Methods", c->methods_text);
        if (*headers) http_add_header(r, "Access-Control-Allow-Headers", headers);
        http_add_header(r, "Access-Control-Max-Age", "600");
        return http_reply(r, 200, "text/plain; charset=utf-8", "OK", 2);
    }
    return http_reply_error(r, &e);
}
