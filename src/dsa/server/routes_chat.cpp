// /v1/chat/completions: not served yet (no chat templates). A 404 with an OpenAI error object
// (a client error: the OpenAI SDK retries 5xx answers, so a 501 would make clients retry).
#include "dsa/server/routes.h"

namespace dsa::server {

void add_chat_routes(ServerContext& ctx) {
  ctx.post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res, const std::string&,
                                      const std::shared_ptr<RequestRecord>&) {
    send_error(res, 404,
               "chat completions are not available on this server yet (no chat template support): use "
               "/v1/completions");
  });
}

}  // namespace dsa::server
