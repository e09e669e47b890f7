/* The generation endpoints: POST /v1/completions and /v1/chat/completions. */
#ifndef CLLM_SERVER_GENERATE_H
#define CLLM_SERVER_GENERATE_H

#include "server/http.h"
#include "server/params.h"

enum MHD_Result handle_generation(http_req *r, api_kind kind);

#endif
