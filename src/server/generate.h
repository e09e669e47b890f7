/* The generation endpoints: POST /v1/completions and /v1/chat/completions. */
#ifndef CLLM_SERVER_GENERATE_H
#define CLLM_SERVER_GENERATE_H

#include "server/http.h"
#include "server/params.h"
#include "server/server.h"

enum MHD_Result handle_generation(server *s, http_req *r, api_kind kind);

#endif
