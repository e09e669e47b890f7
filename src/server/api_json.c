/* See api_json.h. */
#include "server/api_json.h"

#include "util/buf.h"
#include "util/utf8.h"

#include <limits.h>
#include <math.h>

const char *api_json_type_name(const json_t *v) {
    if (!v) return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

int api_type_error(api_error *e, const char *field, const char *want, const json_t *v) {
    return api_fail(e, 400, "invalid_type", field, "'%s' must be %s, got %s", field, want, api_json_type_name(v));
}

int api_get_bool(const json_t *v, const char *field, bool *out, api_error *e) {
    if (!json_is_boolean(v)) return api_type_error(e, field, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

int api_get_int(const json_t *v, const char *field, long long lo, long long hi, long long *out, api_error *e) {
    if (!json_is_integer(v)) return api_type_error(e, field, "an integer", v);
    const long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        if (hi == LLONG_MAX)
            return api_fail(e, 400, "invalid_value", field, "'%s' must be at least %lld, got %lld", field, lo, x);
        return api_fail(e, 400, "invalid_value", field, "'%s' must be in [%lld, %lld], got %lld", field, lo, hi, x);
    }
    *out = x;
    return 0;
}

int api_get_number(const json_t *v, const char *field, double lo, double hi, bool lo_open, bool hi_open,
                   double *out, api_error *e) {
    if (!json_is_number(v)) return api_type_error(e, field, "a number", v);
    const double d = json_number_value(v);
    if (!isfinite(d) || (lo_open ? d <= lo : d < lo) || (hi_open ? d >= hi : d > hi))
        return api_fail(e, 400, "invalid_value", field, "'%s' must be in %s%g, %g%s, got %g", field,
                        lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]", d);
    *out = d;
    return 0;
}

json_t *resp_string(const char *p, size_t n) {
    if (utf8_valid(p, n)) return json_stringn(p, n);
    buf b = {0};
    buf_append_utf8(&b, p, n);
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    buf_free(&b);
    return j;
}
