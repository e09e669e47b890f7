/* For the request-validation tests (test_server_params.c,
 * test_server_tools.c): a body api_request_parse must refuse with a 400
 * that names `param` with error code `code` and says why. Case `i` and the
 * body's text name the case in a failure. Takes the body (decref'd). */
#ifndef CLLM_TEST_API_REFUSED_H
#define CLLM_TEST_API_REFUSED_H

#include "server/params.h"

#include <string.h>

static void expect_refused(size_t i, const char *text, json_t *body, api_kind kind, const char *param,
                           const char *code) {
    api_request r;
    api_error e = {0};
    const int rc = api_request_parse(body, kind, 1000, &r, &e);
    if (rc != -1 || e.status != 400 || strcmp(e.param, param) || !e.code || strcmp(e.code, code))
        fail_msg("case %zu %s: rc %d status %d param '%s' code '%s' (%s)", i, text, rc, e.status, e.param,
                 e.code ? e.code : "", e.message);
    assert_true(e.message[0] != 0);
    api_request_free(&r);
    json_decref(body);
}

#endif
