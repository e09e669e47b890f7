/* See errors.h. */
#include "server/errors.h"

#include "chat/prompt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *api_error_type(int status) {
    if (status == 401) return "authentication_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

int api_fail(api_error *e, int status, const char *code, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = api_error_type(status);
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* A message may quote client input that is not valid UTF-8 or was cut in the
 * middle of a character by the fixed-size buffer; jansson would refuse it. */
static json_t *safe_string(const char *s) {
    json_t *j = json_string(s);
    if (j) return j;
    char tmp[1024];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 1 < sizeof tmp; p++)
        tmp[n++] = *p < 0x80 ? (char)*p : '?';
    tmp[n] = 0;
    return json_string(tmp);
}

json_t *api_error_json(const api_error *e) {
    json_t *inner = json_object();
    json_object_set_new(inner, "message", safe_string(e->message));
    json_object_set_new(inner, "type", json_string(e->type ? e->type : api_error_type(e->status)));
    json_object_set_new(inner, "param", e->param[0] ? safe_string(e->param) : json_null());
    json_object_set_new(inner, "code", e->code ? json_string(e->code) : json_null());
    json_t *o = json_object();
    json_object_set_new(o, "error", inner);
    return o;
}

int api_fail_prompt(api_error *e, int prompt_rc, const char *code, const char *param) {
    if (prompt_rc == PROMPT_NO_MEMORY || err_is_oom())
        return api_fail(e, 500, "out_of_memory", NULL, "the server ran out of memory: %s", err_get());
    return api_fail(e, 400, code, param, "%s", err_get());
}
