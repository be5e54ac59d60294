#include "dsa/server/openai_protocol.h"

#include <cmath>
#include <limits>
#include <set>

namespace dsa::server {
namespace {

using json = nlohmann::json;

int64_t as_int(const json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) throw BadRequest(key + " must be an integer", key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw BadRequest(key + " is out of range", key);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw BadRequest(key + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                         std::to_string(x),
                     key);
  return x;
}

double as_number(const json& v, const std::string& key) {
  if (!v.is_number()) throw BadRequest(key + " must be a number", key);
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw BadRequest(key + " must be finite", key);
  return x;
}

double as_number_in(const json& v, const std::string& key, double lo, double hi) {
  const double x = as_number(v, key);
  if (x < lo || x > hi)
    throw BadRequest(key + " must be in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + json(x).dump(), key);
  return x;
}

bool as_bool(const json& v, const std::string& key) {
  if (!v.is_boolean()) throw BadRequest(key + " must be a boolean", key);
  return v.get<bool>();
}

std::vector<int32_t> as_ids(const json& v, const std::string& key, const char* what) {
  std::vector<int32_t> ids;
  for (const json& x : v) {
    if (!x.is_number_integer()) throw BadRequest(key + " must be " + what, key);
    if (x.is_number_unsigned() ? x.get<uint64_t>() > INT32_MAX
                               : (x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX))
      throw BadRequest(key + ": token id " + x.dump() + " is out of range", key);
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

constexpr const char* kPromptForms =
    "a string, an array of strings, an array of token ids or an array of arrays of token ids";

void add_text_prompt(CompletionRequest& r, const json& s, const EncodeFn& encode) {
  if (!encode) throw BadRequest("this server has no tokenizer: send prompt as token ids", "prompt");
  const std::string text = s.get<std::string>();
  if (text.empty()) throw BadRequest("prompt is an empty string", "prompt");
  r.prompts.push_back(encode(text, r.add_special_tokens));
  r.prompt_texts.push_back(text);
  r.text_prompt = true;
}

void parse_prompt(CompletionRequest& r, const json& pr, const EncodeFn& encode) {
  if (pr.is_string()) {
    add_text_prompt(r, pr, encode);
  } else if (pr.is_array() && !pr.empty() && pr[0].is_string()) {
    for (const json& s : pr) {
      if (!s.is_string()) throw BadRequest(std::string("prompt must be ") + kPromptForms + " (not a mix)", "prompt");
      add_text_prompt(r, s, encode);
    }
  } else if (pr.is_array() && !pr.empty() && pr[0].is_array()) {
    for (const json& ids : pr) {
      if (!ids.is_array()) throw BadRequest(std::string("prompt must be ") + kPromptForms + " (not a mix)", "prompt");
      r.prompts.push_back(as_ids(ids, "prompt", kPromptForms));
    }
  } else if (pr.is_array() && !pr.empty()) {
    r.prompts.push_back(as_ids(pr, "prompt", kPromptForms));
  } else if (pr.is_array()) {
    throw BadRequest("prompt is empty", "prompt");
  } else {
    throw BadRequest(std::string("prompt must be ") + kPromptForms, "prompt");
  }
  for (const auto& p : r.prompts)
    if (p.empty()) throw BadRequest("prompt is empty", "prompt");
}

// Fields that may be sent but are not implemented: accepted only with these "off" values.
bool is_off(const std::string& key, const json& v) {
  if (v.is_null()) return true;
  if (key == "suffix") return v.is_string() && v.get<std::string>().empty();
  if (key == "use_beam_search") return v.is_boolean() && !v.get<bool>();
  return false;
}

}  // namespace

const std::set<std::string>& generation_field_names() {
  static const std::set<std::string> names = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
      "frequency_penalty", "repetition_penalty", "logit_bias", "n", "stop", "stop_token_ids", "ignore_eos",
      "min_tokens", "skip_special_tokens", "include_stop_str_in_output", "stream", "stream_options", "user"};
  return names;
}

void parse_generation_fields(const json& j, CompletionRequest& r, bool has_tokenizer) {
  engine::SamplingParams& p = r.params;
  auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (given("model") && !j["model"].is_string()) throw BadRequest("model must be a string", "model");
  if (given("user") && !j["user"].is_string()) throw BadRequest("user must be a string", "user");
  if (given("skip_special_tokens")) r.skip_special_tokens = as_bool(j["skip_special_tokens"], "skip_special_tokens");
  if (given("max_tokens")) r.max_tokens = as_int(j["max_tokens"], "max_tokens", 0, std::numeric_limits<int32_t>::max());
  if (given("temperature")) p.temperature = as_number_in(j["temperature"], "temperature", 0, 1e6);
  if (given("top_p")) {
    p.top_p = as_number(j["top_p"], "top_p");
    if (!(p.top_p > 0 && p.top_p <= 1)) throw BadRequest("top_p must be in (0, 1]", "top_p");
  }
  if (given("top_k")) {
    p.top_k = as_int(j["top_k"], "top_k", -1, std::numeric_limits<int32_t>::max());
    if (p.top_k < 0) p.top_k = 0;
  }
  if (given("min_p")) p.min_p = as_number_in(j["min_p"], "min_p", 0, 1);
  if (given("presence_penalty")) p.presence_penalty = as_number_in(j["presence_penalty"], "presence_penalty", -2, 2);
  if (given("frequency_penalty"))
    p.frequency_penalty = as_number_in(j["frequency_penalty"], "frequency_penalty", -2, 2);
  if (given("repetition_penalty")) {
    p.repetition_penalty = as_number(j["repetition_penalty"], "repetition_penalty");
    if (!(p.repetition_penalty > 0)) throw BadRequest("repetition_penalty must be > 0", "repetition_penalty");
  }
  if (given("logit_bias")) {
    const json& lb = j["logit_bias"];
    if (!lb.is_object()) throw BadRequest("logit_bias must be an object {\"token id\": bias}", "logit_bias");
    for (const auto& [k, v] : lb.items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(k, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != k.size() || k.empty() || id < 0 || id > INT32_MAX)
        throw BadRequest("logit_bias: key \"" + k + "\" is not a token id", "logit_bias");
      p.logit_bias.emplace_back(static_cast<int32_t>(id),
                                static_cast<float>(as_number_in(v, "logit_bias", -100, 100)));
    }
  }
  if (given("seed")) {
    if (!j["seed"].is_number_integer()) throw BadRequest("seed must be an integer", "seed");
    p.seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>() : static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  if (given("n")) r.n = static_cast<int>(as_int(j["n"], "n", 1, 128));
  r.best_of = r.n;
  if (given("stop")) {
    const json& st = j["stop"];
    if (st.is_string()) {
      r.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      for (const json& s : st) {
        if (!s.is_string()) throw BadRequest("stop must be a string or an array of strings", "stop");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      throw BadRequest("stop must be a string or an array of strings", "stop");
    }
    if (r.stop.size() > 64) throw BadRequest("stop: at most 64 strings", "stop");
    for (const std::string& s : r.stop)
      if (s.empty() || s.size() > 1024) throw BadRequest("stop: each string must have 1 to 1024 bytes", "stop");
    if (!r.stop.empty() && !has_tokenizer)
      throw BadRequest("stop strings need a tokenizer (this server has none): use stop_token_ids", "stop");
  }
  if (given("include_stop_str_in_output"))
    r.include_stop_str_in_output = as_bool(j["include_stop_str_in_output"], "include_stop_str_in_output");
  if (given("stop_token_ids")) {
    if (!j["stop_token_ids"].is_array())
      throw BadRequest("stop_token_ids must be an array of integers", "stop_token_ids");
    p.stop_token_ids = as_ids(j["stop_token_ids"], "stop_token_ids", "an array of integer token ids");
  }
  if (given("ignore_eos")) p.ignore_eos = as_bool(j["ignore_eos"], "ignore_eos");
  if (given("min_tokens")) p.min_tokens = as_int(j["min_tokens"], "min_tokens", 0, std::numeric_limits<int32_t>::max());
  if (given("stream")) r.stream = as_bool(j["stream"], "stream");
  if (given("stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) throw BadRequest("stream_options must be an object", "stream_options");
    if (!r.stream) throw BadRequest("stream_options is only allowed with stream = true", "stream_options");
    for (const auto& [k, v] : so.items()) {
      if (k != "include_usage" && k != "continuous_usage_stats")
        throw BadRequest("stream_options." + k + " is not supported", "stream_options." + k);
      if (k == "continuous_usage_stats" && !v.is_null() && !(v.is_boolean() && !v.get<bool>()))
        throw BadRequest("stream_options.continuous_usage_stats is not supported", "stream_options.continuous_usage_stats");
    }
    if (so.contains("include_usage") && !so["include_usage"].is_null())
      r.include_usage = as_bool(so["include_usage"], "stream_options.include_usage");
  }
}

CompletionRequest parse_completion_request(const std::string& body, const EncodeFn& encode) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range (1e400)
    throw BadRequest(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw BadRequest("the body must be a JSON object");
  CompletionRequest r;
  r.params.temperature = 1.0;  // OpenAI's default

  static const std::set<std::string> kOwn = {"prompt", "best_of", "logprobs", "echo", "add_special_tokens",
                                             "return_tokens_as_token_ids"};
  static const std::set<std::string> kNotImplemented = {"suffix", "use_beam_search", "prompt_logprobs"};
  for (const auto& [key, v] : j.items()) {
    if (kOwn.count(key) || generation_field_names().count(key)) continue;
    if (kNotImplemented.count(key)) {
      if (is_off(key, v)) continue;
      throw BadRequest(key + " is not supported by this server", key);
    }
    throw BadRequest("unknown field " + key + " (not supported by this server)", key);
  }
  auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };

  if (given("add_special_tokens")) r.add_special_tokens = as_bool(j["add_special_tokens"], "add_special_tokens");
  if (given("return_tokens_as_token_ids"))
    r.return_tokens_as_token_ids = as_bool(j["return_tokens_as_token_ids"], "return_tokens_as_token_ids");
  if (!given("prompt")) throw BadRequest("prompt is required", "prompt");
  parse_prompt(r, j["prompt"], encode);

  parse_generation_fields(j, r, static_cast<bool>(encode));
  if (given("best_of")) {
    r.best_of = static_cast<int>(as_int(j["best_of"], "best_of", 1, 128));
    if (r.best_of < r.n) throw BadRequest("best_of must be >= n", "best_of");
  }
  if (given("logprobs")) r.logprobs = static_cast<int>(as_int(j["logprobs"], "logprobs", 0, engine::SamplingParams::kMaxLogprobs));
  if (given("echo")) r.echo = as_bool(j["echo"], "echo");
  if (r.max_tokens && *r.max_tokens == 0 && !r.echo)
    throw BadRequest("max_tokens must be >= 1 (0 only with echo, to score the prompt)", "max_tokens");
  if (r.stream && r.best_of > r.n) throw BadRequest("best_of > n cannot be streamed", "best_of");
  return r;
}

json error_json(const std::string& message, const std::string& type, const std::string& param, int code) {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", code}}}};
}

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 503: return "service_unavailable";
    default: return status < 500 ? "invalid_request_error" : "internal_server_error";
  }
}

json Usage::json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

void LogprobsJson::add(const std::string& text, std::optional<float> logprob,
                       const std::vector<std::pair<std::string, float>>& top) {
  tokens_.push_back(text);
  logprobs_.push_back(logprob ? nlohmann::json(*logprob) : nlohmann::json(nullptr));
  if (!logprob) {
    top_.push_back(nullptr);
  } else {
    nlohmann::json t = nlohmann::json::object();
    for (const auto& [s, lp] : top)
      if (!t.contains(s)) t[s] = lp;  // the most likely of tokens with the same text
    top_.push_back(std::move(t));
  }
  offsets_.push_back(offset_);
  offset_ += text.size();
}

json LogprobsJson::json() const {
  return {{"tokens", tokens_}, {"token_logprobs", logprobs_}, {"top_logprobs", top_}, {"text_offset", offsets_}};
}

json choice_json(size_t index, const std::string& text, const std::vector<int32_t>& token_ids, const json& logprobs,
                 const std::string& finish_reason) {
  return {{"index", index},
          {"text", text},
          {"token_ids", token_ids},
          {"logprobs", logprobs},
          {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
}

json completion_json(const std::string& id, int64_t created, const std::string& model, json choices,
                     const std::optional<Usage>& usage) {
  json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", std::move(choices)}};
  if (usage) j["usage"] = usage->json();
  return j;
}

}  // namespace dsa::server
