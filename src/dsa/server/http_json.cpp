#include "dsa/server/http_json.h"

#include <ctime>

#include <httplib.h>

#include "dsa/server/openai_protocol.h"

namespace dsa::server {

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param) {
  const char* type = status == 400   ? "invalid_request_error"
                     : status == 404 ? "not_found_error"
                     : status == 501 ? "not_implemented_error"
                                     : "internal_server_error";
  send_json(res, status, error_json(message, type, param, status));
}

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace dsa::server
