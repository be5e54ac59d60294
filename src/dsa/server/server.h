// OpenAI-compatible HTTP server over one engine (REFERENCE.md section 9), on cpp-httplib.
// Routes: GET /health, GET /metrics (Prometheus text: running, waiting, finished by reason,
// tokens, preemptions), GET /v1/models, POST /v1/completions (JSON or SSE streaming ending
// `data: [DONE]`, stream_options.include_usage), POST /tokenize and /detokenize (with a
// tokenizer, else 501), POST /v1/chat/completions (chat_route.h; 501 without ServerOptions::chat).
// Handlers run on httplib's thread pool: they parse and check a request (400 with an
// OpenAI-style error object when it is malformed, names ids outside the vocabulary or is longer
// than the context), submit it to the EngineLoop (one engine thread runs every step: continuous
// batching across connections) and wait for its tokens, or stream them as they come. A
// streaming client that goes away aborts its request. With a tokenizer (ServerOptions
// encode/decode) prompts may be strings and responses carry the decoded text (streamed
// incrementally); without one, text is "" and token_ids carry the output.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dsa/engine/engine.h"
#include "dsa/server/chat_route.h"
#include "dsa/server/engine_loop.h"
#include "dsa/server/openai_protocol.h"

namespace httplib {
class Server;
}

namespace dsa::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                 // 0: any free port (bind() returns it)
  std::string model_name = "dsa";  // the id /v1/models lists and responses carry
  int threads = 64;                // HTTP worker threads (each open stream holds one)
  EncodeFn encode;                 // optional tokenizer: string prompts and decoded text
  DecodeFn decode;
  std::shared_ptr<const ChatServing> chat;  // optional: /v1/chat/completions (a format and the tokenizer)
};

class Server {
 public:
  // The engine must outlive the server; the server runs it on its own thread.
  Server(engine::Engine& engine, ServerOptions options);
  ~Server();  // stop()
  // Binds host:port and starts the engine thread; returns the bound port. Throws dsa::Error when
  // the address cannot be bound.
  int bind();
  // Serves until stop() (blocking); bind() first.
  void listen();
  void stop();

 private:
  void routes();

  engine::Engine& engine_;
  ServerOptions opt_;
  EngineLoop loop_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = -1;
};

}  // namespace dsa::server
