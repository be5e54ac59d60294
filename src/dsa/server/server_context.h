// What the route files share (routes.h): the engine (read-only from handlers: config, checks),
// the engine loop, the options, the metrics, and the route wrappers that give every route the
// same treatment: API key (unless the route is open), CORS headers, the body size limit
// (bodies are read by the wrapper, bounded, also when chunked), exceptions turned into an
// OpenAI error response, and a record of the request for its log line and the metrics.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "dsa/engine/engine.h"
#include "dsa/server/engine_loop.h"
#include "dsa/server/http_server.h"
#include "dsa/server/metrics.h"
#include "dsa/server/server.h"

namespace dsa::server {

// One request, for its log line: "<id> <method> <path> <status> prompt=<n> output=<n>
// ttft=<s> duration=<s>". Streaming handlers keep it (a shared_ptr) in their content provider
// and fill it as they go; the line is written when the response has been sent.
struct RequestRecord {
  std::string id;  // e.g. the completion id; "" -> the method and path only
  int64_t prompt_tokens = -1, output_tokens = -1;
  double ttft_s = -1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  void first_token() {
    if (ttft_s < 0) ttft_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

using RouteHandler = std::function<void(const httplib::Request& req, httplib::Response& res, const std::string& body,
                                        const std::shared_ptr<RequestRecord>& record)>;

struct ServerContext {
  const engine::Engine& engine;
  EngineLoop& loop;
  const ServerOptions& opt;
  ServerMetrics& metrics;
  HttpServer& http;

  // `open`: no API key needed (/health, /metrics).
  void get(const std::string& pattern, RouteHandler h, bool open = false);
  void post(const std::string& pattern, RouteHandler h, bool open = false);
};

void send_json(httplib::Response& res, int status, const nlohmann::json& j);
// The OpenAI error object with the type for `status` (openai_protocol.h error_type).
void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {});
// JSON text; invalid UTF-8 (a decoder's partial character) becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);
int64_t unix_time();

// Server-sent events: one "data: <text>" event; false when the client cannot take it.
bool sse_event(httplib::DataSink& sink, const std::string& data);
// Serves `res` as an SSE stream written by `run` (called by httplib until it returns; true: the
// stream ended, false: the client went away). It runs outside httplib's exception handling, so
// an exception ends the stream with an error event and [DONE] instead of terminating the
// process; `abort` (which must not throw) runs when the stream ends for any reason, and after
// an exception.
void serve_sse(httplib::Response& res, std::function<bool(httplib::DataSink&)> run, std::function<void()> abort);

// Installs what applies to every request: the pre-routing checks (Content-Length and
// Transfer-Encoding, the body limit before anything is read), the error and exception
// handlers, the logger, CORS preflight, and 404s for unknown routes (bodies left unread, the
// connection closed). Call after the routes are registered.
void install_common_handlers(ServerContext& ctx);

}  // namespace dsa::server
