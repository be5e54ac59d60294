#include "dsa/server/chat_protocol.h"

#include <set>

namespace dsa::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

}  // namespace

ChatRequest parse_chat_request(const std::string& body, const chat::PromptFormat& format) {
  // Ordered: the template sees tool schemas and arguments in the order the client wrote them.
  ojson oj = ojson::parse(body, nullptr, false);
  if (oj.is_discarded()) throw BadRequest("the body is not valid JSON");
  if (!oj.is_object()) throw BadRequest("the body must be a JSON object");
  static const std::set<std::string> kConversation = {
      "messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_effort",
      "thinking", "add_generation_prompt", "modalities", "response_format", "functions", "function_call",
      "continue_final_message", "echo", "max_completion_tokens", "logprobs", "top_logprobs"};
  for (const auto& [key, v] : oj.items())
    if (!kConversation.count(key) && !generation_field_names().count(key))
      throw BadRequest("unknown field " + key + " (not supported by this server)", key);
  ChatRequest r;
  try {
    r.conv = chat::parse_chat_request(oj, format);
  } catch (const chat::RequestError& e) {
    throw BadRequest(e.what(), e.param);
  }
  json j = json::parse(body);
  auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (given("logprobs") && !j["logprobs"].is_boolean()) throw BadRequest("logprobs must be a boolean", "logprobs");
  const bool logprobs = given("logprobs") && j["logprobs"].get<bool>();
  if (given("top_logprobs")) {
    const json& t = j["top_logprobs"];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > engine::SamplingParams::kMaxLogprobs)
      throw BadRequest("top_logprobs must be an integer in [0, " + std::to_string(engine::SamplingParams::kMaxLogprobs) + "]",
                       "top_logprobs");
    if (!logprobs) throw BadRequest("top_logprobs needs logprobs: true", "top_logprobs");
  }
  if (logprobs) r.logprobs = given("top_logprobs") ? static_cast<int>(j["top_logprobs"].get<int64_t>()) : 0;
  if (j.contains("max_completion_tokens") && !j["max_completion_tokens"].is_null()) {
    if (j.contains("max_tokens") && !j["max_tokens"].is_null())
      throw BadRequest("give max_tokens or max_completion_tokens, not both", "max_completion_tokens");
    j["max_tokens"] = j["max_completion_tokens"];
  }
  r.gen.params.temperature = 1.0;  // OpenAI's default
  parse_generation_fields(j, r.gen, /*has_tokenizer=*/true);
  if (r.gen.max_tokens && *r.gen.max_tokens == 0) throw BadRequest("max_tokens must be >= 1", "max_tokens");
  return r;
}

json delta_json(const chat::ReplyDelta& d) {
  json delta = json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCallDelta& t : d.tool_calls) {
      json c = {{"index", t.index}};
      json f = {{"arguments", t.arguments}};
      if (!t.id.empty()) {  // the first delta of a call announces it
        c["id"] = t.id;
        c["type"] = "function";
        f["name"] = t.name;
      }
      c["function"] = std::move(f);
      calls.push_back(std::move(c));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

json chat_token_logprob_json(const engine::TokenLogprob& t, const std::function<std::string(int32_t)>& text_of) {
  auto entry = [&](int32_t id, float lp) {
    const std::string text = text_of(id);
    json bytes = json::array();
    for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
    return json{{"token", text}, {"logprob", lp}, {"bytes", std::move(bytes)}};
  };
  json e = entry(t.token, t.logprob);
  json top = json::array();
  for (const auto& [id, lp] : t.top) top.push_back(entry(id, lp));
  e["top_logprobs"] = std::move(top);
  return e;
}

json chat_choice_json(size_t index, const chat::OutputParser& reply, const std::string& finish_reason,
                      const json& logprobs) {
  json calls = json::array();
  for (const chat::ToolCall& c : reply.tool_calls())
    calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  json message = {{"role", "assistant"},
                  {"content", reply.content().empty() && !calls.empty() ? json(nullptr) : json(reply.content())},
                  {"reasoning_content", reply.reasoned() ? json(reply.reasoning()) : json(nullptr)},
                  {"tool_calls", std::move(calls)}};
  return {{"index", index}, {"message", std::move(message)}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
}

json chat_completion_json(const std::string& id, int64_t created, const std::string& model, json choices,
                          const Usage& usage) {
  return {{"id", id},       {"object", "chat.completion"}, {"created", created},
          {"model", model}, {"choices", std::move(choices)}, {"usage", usage.json()}};
}

json chat_chunk_json(const std::string& id, int64_t created, const std::string& model, size_t index, const json& delta,
                     const std::string& finish_reason, const json& logprobs) {
  json choice = {{"index", index},
                 {"delta", delta},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
  return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}, {"choices", {choice}}};
}

}  // namespace dsa::server
