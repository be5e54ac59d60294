#include "dsa/server/server.h"

#include <atomic>
#include <chrono>
#include <ctime>

#include <httplib.h>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/server/chat_route.h"
#include "dsa/server/http_json.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;

std::string next_id() {
  static std::atomic<uint64_t> n{0};
  return "cmpl-" + std::to_string(now_s()) + "-" + std::to_string(n++);
}

}  // namespace

Server::Server(engine::Engine& engine, ServerOptions options)
    : engine_(engine), opt_(std::move(options)), loop_(engine), http_(std::make_unique<httplib::Server>()) {
  DSA_CHECK(opt_.threads >= 1, "server: threads must be >= 1, got {}", opt_.threads);
  const int threads = opt_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  routes();
}

Server::~Server() { stop(); }

int Server::bind() {
  DSA_CHECK(opt_.port >= 0 && opt_.port <= 65535, "server: port must be in [0, 65535], got {}", opt_.port);
  port_ = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  DSA_CHECK(port_ > 0, "server: cannot bind {}:{} (in use, or not an address of this machine)", opt_.host, opt_.port);
  loop_.start();
  return port_;
}

void Server::listen() {
  DSA_CHECK(port_ > 0, "server: listen() before bind()");
  http_->listen_after_bind();
}

void Server::stop() {
  if (http_) http_->stop();
  loop_.stop();
}

void Server::routes() {
  httplib::Server& s = *http_;
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });

  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", opt_.model_name},
              {"object", "model"},
              {"created", now_s()},
              {"owned_by", "dsa"},
              {"max_model_len", engine_.max_model_len()}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
  });

  // Prometheus text: the engine loop's counters.
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const LoopStats& st = loop_.stats();
    std::string t;
    auto metric = [&](const char* name, const char* type, const char* help, const std::string& series) {
      t += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + series;
    };
    auto line = [](const std::string& name, int64_t v) { return name + " " + std::to_string(v) + "\n"; };
    metric("dsa_requests_running", "gauge", "Requests holding model state.", line("dsa_requests_running", st.running));
    metric("dsa_requests_waiting", "gauge", "Requests queued for admission.", line("dsa_requests_waiting", st.waiting));
    metric("dsa_preemptions_total", "counter", "Requests preempted because the KV cache was full.",
           line("dsa_preemptions_total", st.preemptions));
    metric("dsa_engine_steps_total", "counter", "Engine steps (forwards).", line("dsa_engine_steps_total", st.steps));
    metric("dsa_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           line("dsa_prompt_tokens_total", st.prompt_tokens));
    metric("dsa_generation_tokens_total", "counter", "Generated tokens.",
           line("dsa_generation_tokens_total", st.generated_tokens));
    std::string fin;
    for (engine::FinishReason r : {engine::FinishReason::Stop, engine::FinishReason::Length,
                                   engine::FinishReason::Abort, engine::FinishReason::Error})
      fin += line(std::string("dsa_requests_finished_total{reason=\"") + engine::finish_reason_name(r) + "\"}",
                  st.finished[static_cast<int>(r)]);
    metric("dsa_requests_finished_total", "counter", "Finished requests by finish reason.", fin);
    res.set_content(t, "text/plain; version=0.0.4");
  });

  // vLLM's /tokenize {"prompt": text} -> {"tokens", "count", "max_model_len"} and /detokenize
  // {"tokens": ids} -> {"prompt": text}; 501 without a tokenizer.
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!opt_.encode) return send_error(res, 501, "this server has no tokenizer");
    const json j = json::parse(req.body, nullptr, false);
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      return send_error(res, 400, "prompt must be a string", "prompt");
    const std::vector<int32_t> ids = opt_.encode(j["prompt"].get<std::string>());
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.max_model_len()}});
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!opt_.decode) return send_error(res, 501, "this server has no tokenizer");
    const json j = json::parse(req.body, nullptr, false);
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
      return send_error(res, 400, "tokens must be an array of token ids", "tokens");
    std::vector<int32_t> ids;
    const int64_t V = engine_.config().vocab_size;
    for (const json& t : j["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
        return send_error(res, 400, "tokens: " + t.dump() + " is not a token id in [0, " + std::to_string(V) + ")",
                          "tokens");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    send_json(res, 200, {{"prompt", opt_.decode(ids)}});
  });

  if (opt_.chat) {
    add_chat_route(s, loop_, engine_, opt_.chat, opt_.model_name);
  } else {
    s.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      send_error(res, 501, "this server has no tokenizer or chat format: use /v1/completions with token ids");
    });
  }

  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    CompletionRequest cr;
    try {
      cr = parse_completion_request(req.body, opt_.encode);
      const int64_t room = engine_.max_model_len() - static_cast<int64_t>(cr.prompt.size());
      if (!cr.max_tokens_given && room >= 1 && room < cr.params.max_tokens) cr.params.max_tokens = room;
      engine_.check_request(cr.prompt, cr.params);
    } catch (const BadRequest& e) {
      return send_error(res, 400, e.what(), e.param);
    } catch (const Error& e) {  // Engine::check_request: vocabulary, length, sampling values
      // Its messages start with the field they are about (SamplingParams::validate) or the prompt.
      const std::string msg = e.what();
      std::string param = "prompt";
      for (const char* f : {"max_tokens", "temperature", "top_k", "top_p", "stop_token_ids"})
        if (msg.rfind(f, 0) == 0) param = f;
      return send_error(res, 400, msg, param);
    }
    const bool decode = static_cast<bool>(opt_.decode);
    const std::string id = next_id();
    const int64_t created = now_s();
    std::shared_ptr<RequestStream> stream = loop_.submit(cr.prompt, cr.params);

    if (!cr.stream) {
      std::vector<int32_t> tokens;
      for (;;) {
        bool done = false;
        for (StreamEvent& e : stream->wait(std::chrono::milliseconds(100))) {
          tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
          if (e.finish == engine::FinishReason::None) continue;
          done = true;
          if (e.finish == engine::FinishReason::Error || e.finish == engine::FinishReason::Abort)
            return send_error(res, e.finish == engine::FinishReason::Error ? 500 : 503, e.error);
          const Usage u{e.prompt_tokens, e.completion_tokens};
          send_json(res, 200,
                    completion_json(id, created, opt_.model_name, tokens, decode ? opt_.decode(tokens) : "",
                                    engine::finish_reason_name(e.finish), u));
        }
        if (done) return;
      }
    }

    // SSE: one chunk per step's tokens, the last with finish_reason; then the usage chunk
    // (choices []) when asked; then [DONE].
    auto usage_null = cr.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, stream, id, created, decode, usage_null, text = std::make_shared<IncrementalText>(opt_.decode)](
            size_t, httplib::DataSink& sink) {
          auto write = [&](const std::string& data) {
            const std::string line = "data: " + data + "\n\n";
            return sink.write(line.data(), line.size());
          };
          for (;;) {
            if (!sink.is_writable()) {
              loop_.abort(stream);
              return false;
            }
            for (StreamEvent& e : stream->wait(std::chrono::milliseconds(100))) {
              const bool fin = e.finish != engine::FinishReason::None;
              if (fin && (e.finish == engine::FinishReason::Error || e.finish == engine::FinishReason::Abort)) {
                write(dump(error_json(e.error, "internal_server_error", "", 500)));
                write("[DONE]");
                sink.done();
                return true;
              }
              json chunk = completion_json(id, created, opt_.model_name, e.tokens,
                                           decode ? text->add(e.tokens, fin) : "",
                                           fin ? engine::finish_reason_name(e.finish) : "", std::nullopt);
              if (usage_null) chunk["usage"] = nullptr;
              if (!write(dump(chunk))) {
                loop_.abort(stream);
                return false;
              }
              if (!fin) continue;
              if (usage_null) {
                json u = chunk;
                u["choices"] = json::array();
                u["usage"] = Usage{e.prompt_tokens, e.completion_tokens}.json();
                write(dump(u));
              }
              write("[DONE]");
              sink.done();
              return true;
            }
          }
        },
        [this, stream](bool success) {
          if (!success && !stream->finished()) loop_.abort(stream);
        });
  });

  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404) send_error(res, 404, "no route " + req.method + " " + req.path);
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });
}

}  // namespace dsa::server
