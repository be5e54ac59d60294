// The server's routes, one function per file, each registering its paths on the context's
// HttpServer through ServerContext::get / post (server_context.h). Server's constructor calls
// them in this order, then install_common_handlers.
#pragma once
#include "dsa/server/server_context.h"

namespace dsa::server {

void add_basic_routes(ServerContext& ctx);       // routes_basic.cpp: /health, /metrics, /v1/models, /tokenize, /detokenize
void add_completion_routes(ServerContext& ctx);  // routes_completions.cpp: /v1/completions
void add_chat_routes(ServerContext& ctx);        // routes_chat.cpp: /v1/chat/completions

}  // namespace dsa::server
