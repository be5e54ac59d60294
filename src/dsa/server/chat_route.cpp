#include "dsa/server/chat_route.h"

#include <algorithm>
#include <atomic>
#include <random>

#include <httplib.h>

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
    auto reply = std::make_shared<chat::OutputParser>(p->parser);
    auto text = std::make_shared<IncrementalText>(chat->decode);
    auto started = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
        "text/event-stream",
        [&loop, stream, p, reply, text, started, id, created, model_name](size_t, httplib::DataSink& sink) {
          const bool usage = p->req.gen.include_usage;
          auto write = [&](json chunk) {
            if (usage && chunk.contains("choices")) chunk["usage"] = nullptr;
            const std::string line = "data: " + dump(chunk) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          auto write_raw = [&](const std::string& data) {
            const std::string line = "data: " + data + "\n\n";
            return sink.write(line.data(), line.size());
          };
          if (!*started) {
            *started = true;
            if (!write(chat_chunk_json(id, created, model_name, {{"role", "assistant"}, {"content", ""}}, ""))) {
              loop.abort(stream);
              return false;
            }
          }
          for (;;) {
            if (!sink.is_writable()) {
              loop.abort(stream);
              return false;
            }
            for (StreamEvent& e : stream->wait(std::chrono::milliseconds(100))) {
              const bool fin = e.finish != engine::FinishReason::None;
              if (fin && (e.finish == engine::FinishReason::Error || e.finish == engine::FinishReason::Abort)) {
                write_raw(dump(error_json(e.error, "internal_server_error", "", 500)));
                write_raw("[DONE]");
                sink.done();
                return true;
              }
              chat::ReplyDelta d = reply->feed(text->add(reply_tokens(e.tokens, p->end_ids), fin));
              if (fin) {
                chat::ReplyDelta last = reply->finish();
                d.reasoning += last.reasoning;
                d.content += last.content;
                for (auto& t : last.tool_calls) {
                  if (!d.tool_calls.empty() && d.tool_calls.back().index == t.index && t.id.empty())
                    d.tool_calls.back().arguments += t.arguments;
                  else
                    d.tool_calls.push_back(std::move(t));
                }
              }
              if (!d.empty() && !write(chat_chunk_json(id, created, model_name, delta_json(d), ""))) {
                loop.abort(stream);
                return false;
              }
              if (!fin) continue;
              write(chat_chunk_json(id, created, model_name, json::object(), finish_reason(e.finish, *reply)));
              if (usage) {
                json u = chat_chunk_json(id, created, model_name, json::object(), "");
                u["choices"] = json::array();
                u["usage"] = Usage{e.prompt_tokens, e.completion_tokens}.json();
                write_raw(dump(u));
              }
              write_raw("[DONE]");
              sink.done();
              return true;
            }
          }
        },
        [&loop, stream](bool success) {
          if (!success && !stream->finished()) loop.abort(stream);
        });
  });
}

}  // namespace dsa::server
