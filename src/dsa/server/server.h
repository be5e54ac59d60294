// OpenAI-compatible HTTP server over one engine. Routes (routes.h): GET /health, GET /metrics
// (Prometheus text), GET /v1/models, GET /v1/models/{id}, POST /v1/completions (JSON or SSE
// streaming ending `data: [DONE]`), POST /tokenize and /detokenize (with a tokenizer),
// POST /v1/chat/completions (with ServerOptions::chat, else a 404 saying why; routes_chat.cpp),
// OPTIONS (CORS preflight).
//
// Connections are served by HttpServer (http_server.h: header/idle/body timeouts, bounded
// workers, no SO_REUSEPORT); every request goes through one wrapper (server_context.h): API key,
// CORS, body size limit, conflicting Content-Length / Transfer-Encoding refused, exceptions
// turned into OpenAI error responses, one log line. Handlers parse and check a request (4xx
// with an OpenAI error object for every client error, KV capacity included), submit it to the
// EngineLoop (one engine thread runs every step: continuous batching across connections) and
// wait for its tokens or stream them. A client that goes away aborts its request, streamed or
// not. shutdown() drains: stop accepting, let requests finish within a timeout, then abort the
// rest (streams end with a final chunk).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dsa/engine/engine.h"
#include "dsa/server/chat_protocol.h"
#include "dsa/server/engine_loop.h"
#include "dsa/server/http_server.h"
#include "dsa/server/metrics.h"
#include "dsa/server/openai_protocol.h"

namespace dsa::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                 // 0: any free port (bind() returns it)
  std::string model_name = "dsa";  // the id /v1/models lists and responses carry
  EncodeFn encode;                 // optional tokenizer: string prompts and decoded text
  DecodeFn decode;
  std::shared_ptr<const ChatServing> chat;   // optional: /v1/chat/completions (a prompt format and the tokenizer)
  std::string api_key;                       // non-empty: /v1/* and /tokenize need "Authorization: Bearer KEY"
  std::vector<std::string> allowed_origins;  // CORS: origins allowed ("*": any); empty: no CORS headers
  size_t max_request_bytes = 4u << 20;       // request bodies larger than this are refused (413) unread
  int64_t max_queue = 2048;                  // sequences waiting to run; beyond: 503 + Retry-After (0: no bound)
  HttpOptions http;                          // timeouts, worker bound

  void validate() const;  // throws dsa::Error naming the field and value
};

struct ServerContext;

class Server {
 public:
  // The engine must outlive the server; the server runs it on its own thread.
  Server(engine::Engine& engine, ServerOptions options);
  ~Server();  // stop()
  // Binds host:port and starts the engine thread; returns the bound port. Throws dsa::Error
  // saying why the address cannot be bound (in use, not of this machine, ...).
  int bind();
  // Serves until shutdown() / stop() (blocking); bind() first.
  void listen();
  // Graceful stop (any thread, e.g. a signal handler's): stops accepting connections and
  // requests (503), waits up to `drain` for the requests in progress, aborts what is left
  // (streams get a final chunk, finish_reason "abort"), then ends listen().
  // A second call while one drains shortens its wait to the earlier deadline (e.g. a second
  // Ctrl-C: shutdown(0) aborts at once).
  void shutdown(std::chrono::milliseconds drain);
  void stop() { shutdown(std::chrono::milliseconds(0)); }

 private:
  engine::Engine& engine_;
  ServerOptions opt_;
  ServerMetrics metrics_;
  EngineLoop loop_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<ServerContext> ctx_;
  std::mutex shutdown_mu_;
  std::atomic<int64_t> drain_deadline_ns_{INT64_MAX};  // steady_clock, earliest asked for
  int port_ = -1;
};

}  // namespace dsa::server
