#include "dsa/server/chat_route.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "dsa/chat/output_parser.h"
#include "dsa/core/error.h"
#include "dsa/server/chat_protocol.h"
#include "dsa/server/http_json.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;

std::string hex(uint64_t x, int digits) {
  static const char* h = "0123456789abcdef";
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, x >>= 4) s[static_cast<size_t>(i)] = h[x & 15];
  return s;
}

std::string next_chat_id() {
  static std::atomic<uint64_t> n{0};
  return "chatcmpl-" + std::to_string(now_s()) + "-" + std::to_string(n++);
}

// Everything one request needs after parsing: the prompt, the parser, the ids that end the turn.
struct Prepared {
  ChatRequest req;
  std::vector<int32_t> prompt;
  chat::ParserOptions parser;
  std::vector<int32_t> end_ids;
};

Prepared prepare(const httplib::Request& http_req, const ChatServing& chat, const engine::Engine& engine) {
  Prepared p;
  p.req = parse_chat_request(http_req.body, *chat.format);
  std::string text;
  try {
    text = chat.format->render(p.req.conv.prompt);
  } catch (const Error& e) {  // the template refused the conversation (raise_exception, a role it lacks)
    throw BadRequest(std::string("messages: ") + e.what(), "messages");
  }
  p.prompt = chat.encode(text);
  if (p.prompt.empty()) throw BadRequest("messages: the prompt is empty", "messages");
  engine::SamplingParams& sp = p.req.gen.params;
  const int64_t room = engine.max_model_len() - static_cast<int64_t>(p.prompt.size());
  if (!p.req.gen.max_tokens_given && room >= 1) sp.max_tokens = room;
  try {
    engine.check_request(p.prompt, sp);
  } catch (const Error& e) {
    const std::string msg = e.what();
    std::string param = "messages";
    for (const char* f : {"max_tokens", "temperature", "top_k", "top_p", "stop_token_ids"})
      if (msg.rfind(f, 0) == 0) param = f;
    throw BadRequest(msg, param);
  }
  p.parser.syntax = chat.format->syntax();
  p.parser.starts_in_reasoning = chat::prompt_opens_reasoning(text);
  p.parser.parse_tool_calls = p.req.conv.parse_tool_calls;
  p.parser.tools = p.req.conv.all_tools;
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  p.parser.next_call_id = [rng] { return "call_" + hex((*rng)(), 16) + hex((*rng)() & 0xffffffff, 8); };
  p.end_ids = engine.options().eos_token_ids;
  p.end_ids.insert(p.end_ids.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
  return p;
}

// The reply's tokens without the ones that end the turn.
std::vector<int32_t> reply_tokens(const std::vector<int32_t>& tokens, const std::vector<int32_t>& end_ids) {
  std::vector<int32_t> out;
  for (int32_t t : tokens)
    if (std::find(end_ids.begin(), end_ids.end(), t) == end_ids.end()) out.push_back(t);
  return out;
}

std::string finish_reason(engine::FinishReason r, const chat::OutputParser& reply) {
  if (r == engine::FinishReason::Length) return "length";
  return reply.complete_tool_calls() > 0 ? "tool_calls" : "stop";
}

// One streamed reply: SSE chunks as the engine's tokens come (called by httplib's chunked
// content provider until it returns; false = the client went away).
struct ChatStream {
  EngineLoop& loop;
  std::shared_ptr<RequestStream> stream;
  std::shared_ptr<const Prepared> p;
  chat::OutputParser reply;
  IncrementalText text;
  std::string id, model;
  int64_t created;
  bool started = false;

  bool write(httplib::DataSink& sink, json chunk) const {
    if (p->req.gen.include_usage && chunk.contains("choices")) chunk["usage"] = nullptr;
    return write_raw(sink, dump(chunk));
  }
  static bool write_raw(httplib::DataSink& sink, const std::string& data) {
    const std::string line = "data: " + data + "\n\n";
    return sink.write(line.data(), line.size());
  }
  bool end_with_error(httplib::DataSink& sink, const std::string& message) {
    write_raw(sink, dump(error_json(message, "internal_server_error", "", 500)));
    write_raw(sink, "[DONE]");
    sink.done();
    return true;
  }

  bool run(httplib::DataSink& sink) {
    if (!started) {
      started = true;
      if (!write(sink, chat_chunk_json(id, created, model, {{"role", "assistant"}, {"content", ""}}, ""))) return gone();
    }
    for (;;) {
      if (!sink.is_writable()) return gone();
      for (StreamEvent& e : stream->wait(std::chrono::milliseconds(100))) {
        const bool fin = e.finish != engine::FinishReason::None;
        if (e.finish == engine::FinishReason::Error || e.finish == engine::FinishReason::Abort)
          return end_with_error(sink, e.error);
        chat::ReplyDelta d = reply.feed(text.add(reply_tokens(e.tokens, p->end_ids), fin));
        if (fin) d.append(reply.finish());
        if (!d.empty() && !write(sink, chat_chunk_json(id, created, model, delta_json(d), ""))) return gone();
        if (!fin) continue;
        write(sink, chat_chunk_json(id, created, model, json::object(), finish_reason(e.finish, reply)));
        if (p->req.gen.include_usage) {
          json u = chat_chunk_json(id, created, model, json::object(), "");
          u["choices"] = json::array();
          u["usage"] = Usage{e.prompt_tokens, e.completion_tokens}.json();
          write_raw(sink, dump(u));
        }
        write_raw(sink, "[DONE]");
        sink.done();
        return true;
      }
    }
  }
  bool gone() {
    loop.abort(stream);
    return false;
  }
};

}  // namespace

void add_chat_route(httplib::Server& http, EngineLoop& loop, const engine::Engine& engine,
                    std::shared_ptr<const ChatServing> chat, const std::string& model_name) {
  http.Post("/v1/chat/completions", [&loop, &engine, chat, model_name](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<Prepared> p;
    try {
      p = std::make_shared<Prepared>(prepare(req, *chat, engine));
    } catch (const BadRequest& e) {
      return send_error(res, 400, e.what(), e.param);
    }
    const std::string id = next_chat_id();
    const int64_t created = now_s();
    std::shared_ptr<RequestStream> stream = loop.submit(p->prompt, p->req.gen.params);

    if (!p->req.gen.stream) {
      std::vector<int32_t> tokens;
      for (;;) {
        for (StreamEvent& e : stream->wait(std::chrono::milliseconds(100))) {
          tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
          if (e.finish == engine::FinishReason::None) continue;
          if (e.finish == engine::FinishReason::Error || e.finish == engine::FinishReason::Abort)
            return send_error(res, e.finish == engine::FinishReason::Error ? 500 : 503, e.error);
          chat::OutputParser reply(p->parser);
          reply.feed(chat->decode(reply_tokens(tokens, p->end_ids)));
          reply.finish();
          return send_json(res, 200,
                           chat_completion_json(id, created, model_name, reply, finish_reason(e.finish, reply),
                                                Usage{e.prompt_tokens, e.completion_tokens}));
        }
      }
    }

    res.set_header("Cache-Control", "no-cache");
    auto s = std::make_shared<ChatStream>(
        ChatStream{loop, stream, p, chat::OutputParser(p->parser), IncrementalText(chat->decode), id, model_name, created});
    res.set_chunked_content_provider(
        "text/event-stream",
        [s](size_t, httplib::DataSink& sink) {
          try {
            return s->run(sink);
          } catch (const std::exception& e) {  // e.g. a reply id the tokenizer cannot decode
            s->loop.abort(s->stream);
            return s->end_with_error(sink, e.what());
          }
        },
        [s](bool success) {
          if (!success && !s->stream->finished()) s->loop.abort(s->stream);
        });
  });
}

}  // namespace dsa::server
