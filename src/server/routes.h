/* The router: an http_handler (http.h) that sends each request to its
 * endpoint after the checks every request passes (API key, model loaded,
 * body size). The server gives it to the HTTP layer with itself as user. */
#ifndef CLLM_SERVER_ROUTES_H
#define CLLM_SERVER_ROUTES_H

#include "server/http.h"

/* user: the server (server.h). */
enum MHD_Result route_request(void *user, http_req *r);

#endif
