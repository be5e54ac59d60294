// JSON responses of the HTTP routes (server.cpp, chat_route.cpp): the body text, and OpenAI-style
// error objects with the status's error type.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace httplib {
struct Response;
}

namespace dsa::server {

// JSON text; invalid UTF-8 (a decoder's partial character) becomes U+FFFD instead of throwing.
std::string dump(const nlohmann::json& j);
void send_json(httplib::Response& res, int status, const nlohmann::json& j);
// 400 invalid_request_error, 404 not_found_error, 501 not_implemented_error, else internal_server_error.
void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {});
int64_t now_s();  // unix time, for "created"

}  // namespace dsa::server
