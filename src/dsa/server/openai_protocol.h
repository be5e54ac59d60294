// OpenAI-compatible request parsing and response JSON for /v1/completions (REFERENCE.md section
// 9). Independent of the HTTP library: the server (server.h) calls these.
//
// Request fields: model (optional; any value is accepted, the server has one model), prompt
// (an array of token ids, or a string when a tokenizer is given), max_tokens (default 16),
// temperature (default 1, as OpenAI; 0 = greedy), top_p, top_k (-1 or 0 = off), seed,
// stop_token_ids, ignore_eos, n (1 only), stream, stream_options.include_usage. Unknown fields
// are ignored. Anything malformed throws BadRequest naming the field, answered as a 400 with an
// OpenAI-style error object.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsa/engine/sampling_params.h"
#include "dsa/tokenizer/incremental_text.h"

namespace dsa::server {

class BadRequest : public std::runtime_error {
 public:
  BadRequest(const std::string& message, std::string param = {})
      : std::runtime_error(message), param(std::move(param)) {}
  std::string param;  // the offending field ("" when none)
};

using EncodeFn = std::function<std::vector<int32_t>(const std::string&)>;
using DecodeFn = std::function<std::string(const std::vector<int32_t>&)>;

struct CompletionRequest {
  std::vector<int32_t> prompt;
  engine::SamplingParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool max_tokens_given = false;  // else the default 16 (the server shortens it to fit the context)
  bool text_prompt = false;    // the prompt was a string (encoded by the tokenizer)
};

// The fields /v1/completions and /v1/chat/completions share (sampling, stop ids, n, stream,
// stream_options) from a parsed body object into r (its prompt untouched).
void parse_generation_fields(const nlohmann::json& j, CompletionRequest& r);

// Parses a /v1/completions body. `encode` may be empty (then a string prompt is a BadRequest).
// Vocabulary and length limits are the engine's (Engine::check_request), not checked here.
CompletionRequest parse_completion_request(const std::string& body, const EncodeFn& encode);

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& param, int code);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  nlohmann::json json() const;  // prompt_tokens, completion_tokens, total_tokens
};

// IncrementalText (tokenizer/incremental_text.h): streamed text that never splits a character.
using IncrementalText = ::dsa::IncrementalText;

// One choice of a text_completion (whole or chunk). `text` is the decoded text ("" without a
// tokenizer); token_ids are always given. finish_reason null while unfinished.
nlohmann::json completion_json(const std::string& id, int64_t created, const std::string& model,
                               const std::vector<int32_t>& token_ids, const std::string& text,
                               const std::string& finish_reason, const std::optional<Usage>& usage);

}  // namespace dsa::server
