#include "dsa/server/openai_protocol.h"

#include <cmath>
#include <limits>

namespace dsa::server {
namespace {

using json = nlohmann::json;

int64_t get_int(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) throw BadRequest(std::string(key) + " must be an integer", key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw BadRequest(std::string(key) + " is out of range", key);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw BadRequest(std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got " + std::to_string(x),
                     key);
  return x;
}

double get_number(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number()) throw BadRequest(std::string(key) + " must be a number", key);
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw BadRequest(std::string(key) + " must be finite", key);
  return x;
}

bool get_bool(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_boolean()) throw BadRequest(std::string(key) + " must be a boolean", key);
  return v.get<bool>();
}

std::vector<int32_t> get_ids(const json& v, const char* key) {
  std::vector<int32_t> ids;
  for (const json& x : v) {
    if (!x.is_number_integer())
      throw BadRequest(std::string(key) + " must be a string or an array of integer token ids", key);
    if (x.is_number_unsigned() ? x.get<uint64_t>() > INT32_MAX
                               : (x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX))
      throw BadRequest(std::string(key) + ": token id " + x.dump() + " is out of range", key);
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

}  // namespace

void parse_generation_fields(const json& j, CompletionRequest& r) {
  engine::SamplingParams& p = r.params;
  if (j.contains("max_tokens") && !j["max_tokens"].is_null()) {
    p.max_tokens = get_int(j, "max_tokens", 1, std::numeric_limits<int32_t>::max());
    r.max_tokens_given = true;
  }
  if (j.contains("temperature") && !j["temperature"].is_null()) {
    p.temperature = get_number(j, "temperature");
    if (p.temperature < 0) throw BadRequest("temperature must be >= 0", "temperature");
  }
  if (j.contains("top_p") && !j["top_p"].is_null()) {
    p.top_p = get_number(j, "top_p");
    if (!(p.top_p > 0 && p.top_p <= 1)) throw BadRequest("top_p must be in (0, 1]", "top_p");
  }
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    p.top_k = get_int(j, "top_k", -1, std::numeric_limits<int32_t>::max());
    if (p.top_k < 0) p.top_k = 0;
  }
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) throw BadRequest("seed must be an integer", "seed");
    p.seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>()
                                            : static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  if (j.contains("stop_token_ids") && !j["stop_token_ids"].is_null()) {
    if (!j["stop_token_ids"].is_array()) throw BadRequest("stop_token_ids must be an array of integers", "stop_token_ids");
    p.stop_token_ids = get_ids(j["stop_token_ids"], "stop_token_ids");
  }
  if (j.contains("stop") && !j["stop"].is_null() && !(j["stop"].is_array() && j["stop"].empty()))
    throw BadRequest("stop strings are not supported: use stop_token_ids", "stop");
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_null()) p.ignore_eos = get_bool(j, "ignore_eos");
  if (j.contains("n") && !j["n"].is_null() && get_int(j, "n", 1, 1024) != 1)
    throw BadRequest("only n = 1 is supported", "n");
  if (j.contains("stream") && !j["stream"].is_null()) r.stream = get_bool(j, "stream");
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& so = j["stream_options"];
    if (!so.is_object()) throw BadRequest("stream_options must be an object", "stream_options");
    if (!r.stream) throw BadRequest("stream_options is only allowed with stream = true", "stream_options");
    if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean())
        throw BadRequest("stream_options.include_usage must be a boolean", "stream_options.include_usage");
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
}

CompletionRequest parse_completion_request(const std::string& body, const EncodeFn& encode) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw BadRequest(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw BadRequest("the body must be a JSON object");
  CompletionRequest r;
  r.params.temperature = 1.0;  // OpenAI's default

  if (!j.contains("prompt")) throw BadRequest("prompt is required", "prompt");
  const json& pr = j["prompt"];
  if (pr.is_string()) {
    if (!encode)
      throw BadRequest("this server has no tokenizer: send prompt as an array of token ids", "prompt");
    r.prompt = encode(pr.get<std::string>());
    r.text_prompt = true;
  } else if (pr.is_array()) {
    if (!pr.empty() && (pr[0].is_array() || pr[0].is_string()))
      throw BadRequest("batched prompts are not supported: send one prompt per request", "prompt");
    r.prompt = get_ids(pr, "prompt");
  } else {
    throw BadRequest("prompt must be a string or an array of integer token ids", "prompt");
  }
  if (r.prompt.empty()) throw BadRequest("prompt is empty", "prompt");

  parse_generation_fields(j, r);
  return r;
}

json error_json(const std::string& message, const std::string& type, const std::string& param, int code) {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", code}}}};
}

json Usage::json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_json(const std::string& id, int64_t created, const std::string& model,
                     const std::vector<int32_t>& token_ids, const std::string& text, const std::string& finish_reason,
                     const std::optional<Usage>& usage) {
  json choice = {{"index", 0},
                 {"text", text},
                 {"token_ids", token_ids},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
  json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", {choice}}};
  if (usage) j["usage"] = usage->json();
  return j;
}

}  // namespace dsa::server
