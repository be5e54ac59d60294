// OpenAI-compatible request parsing and response JSON for /v1/completions. Independent of the
// HTTP library: the routes (routes_completions.cpp) call these.
//
// Request fields (OpenAI's, and vLLM's extensions where clients send them):
//   prompt: a string, an array of strings, an array of token ids, or an array of arrays of ids
//     (strings need a tokenizer; each prompt gets n choices, index = prompt * n + choice);
//   max_tokens (absent or null: up to the context; 0 with echo: score the prompt only),
//   temperature (default 1; 0 = greedy), top_p, top_k (-1 or 0 = off), min_p, seed,
//   presence_penalty, frequency_penalty, repetition_penalty, logit_bias ({"id": bias}),
//   n, best_of (>= n: the n of best_of candidates with the highest summed logprob),
//   stop (a string or an array: the text ends before the first one; never emitted unless
//   include_stop_str_in_output), stop_token_ids, ignore_eos, min_tokens,
//   logprobs (0..20 alternatives; the completions format: tokens, token_logprobs,
//   top_logprobs, text_offset), echo (the prompt is prepended to the text; with logprobs its
//   tokens' logprobs too, the first null), add_special_tokens (default true: the tokenizer's
//   BOS etc.), skip_special_tokens (default true), return_tokens_as_token_ids,
//   stream, stream_options.include_usage, model (any value: one model is served), user.
// Everything else, and suffix, use_beam_search or prompt_logprobs with a non-default value, is a
// BadRequest naming the field: nothing a client asks for is silently ignored.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsa/engine/sampler.h"
#include "dsa/engine/sampling_params.h"

namespace dsa::server {

class BadRequest : public std::runtime_error {
 public:
  BadRequest(const std::string& message, std::string param = {})
      : std::runtime_error(message), param(std::move(param)) {}
  std::string param;  // the offending field ("" when none)
};

using EncodeFn = std::function<std::vector<int32_t>(const std::string& text, bool add_special_tokens)>;
using DecodeFn = std::function<std::string(const std::vector<int32_t>& ids, bool skip_special_tokens)>;

struct CompletionRequest {
  std::vector<std::vector<int32_t>> prompts;  // token ids, one entry per prompt
  std::vector<std::string> prompt_texts;      // the prompts as sent, when they were strings
  bool text_prompt = false;
  engine::SamplingParams params;  // shared by every choice (seeds derived per choice)
  std::optional<int64_t> max_tokens;  // as given (0 allowed with echo)
  int n = 1, best_of = 1;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool echo = false;
  int logprobs = -1;  // -1: none
  bool add_special_tokens = true, skip_special_tokens = true, return_tokens_as_token_ids = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// The fields /v1/completions and /v1/chat/completions share (sampling, n, stop, stop ids,
// ignore_eos, min_tokens, skip_special_tokens, stream, stream_options, model, user), read from a
// body object into r (prompts untouched; best_of set to n). `has_tokenizer`: stop strings need
// one. Callers check the body's other fields (generation_field_names lists these).
void parse_generation_fields(const nlohmann::json& j, CompletionRequest& r, bool has_tokenizer);
const std::set<std::string>& generation_field_names();

// Parses a /v1/completions body. `encode` may be empty (then a string prompt is a BadRequest).
// Vocabulary and length limits are the engine's (Engine::check_request), not checked here.
CompletionRequest parse_completion_request(const std::string& body, const EncodeFn& encode);

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& param, int code);
// "invalid_request_error" for 4xx, "internal_server_error" / "service_unavailable" for 5xx, ...
const char* error_type(int status);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  nlohmann::json json() const;  // prompt_tokens, completion_tokens, total_tokens
};

// The completions `logprobs` object, built token by token: each token's text, its logprob (null
// for a prompt's first token), its alternatives {text: logprob} and where it starts in the
// choice's text.
class LogprobsJson {
 public:
  void add(const std::string& text, std::optional<float> logprob,
           const std::vector<std::pair<std::string, float>>& top);
  nlohmann::json json() const;
  bool empty() const { return tokens_.empty(); }
  // Offsets count the bytes of the token texts before (so a streamed choice continues where its
  // previous chunk ended: set_offset(previous offset())).
  void set_offset(size_t offset) { offset_ = offset; }
  size_t offset() const { return offset_; }

 private:
  nlohmann::json tokens_ = nlohmann::json::array(), logprobs_ = nlohmann::json::array(),
                 top_ = nlohmann::json::array(), offsets_ = nlohmann::json::array();
  size_t offset_ = 0;
};

// One choice of a text_completion (whole or chunk): text, our token_ids extension, logprobs
// (null when not asked), finish_reason (null while unfinished).
nlohmann::json choice_json(size_t index, const std::string& text, const std::vector<int32_t>& token_ids,
                           const nlohmann::json& logprobs, const std::string& finish_reason);
nlohmann::json completion_json(const std::string& id, int64_t created, const std::string& model,
                               nlohmann::json choices, const std::optional<Usage>& usage);

}  // namespace dsa::server
