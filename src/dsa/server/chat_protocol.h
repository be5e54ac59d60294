// /v1/chat/completions request parsing and response JSON (OpenAI's chat.completion and
// chat.completion.chunk objects), independent of the HTTP library.
//
// The request: the conversation fields (chat/chat_request.h: messages, tools, tool_choice,
// parallel_tool_calls, thinking, chat_template_kwargs, reasoning_effort, add_generation_prompt,
// modalities) and the generation fields /v1/completions takes (openai_protocol.h
// parse_generation_fields: sampling, n, stop, stop_token_ids, stream, ...);
// max_completion_tokens is accepted as max_tokens; logprobs (bool) with top_logprobs (0..20).
// Fields this server cannot honour are a 400 naming them: response_format other than text,
// those chat_request.h lists, and any field it does not know (as for completions).
// The reply message: content (null when only tool calls came), reasoning_content (null when the
// model did not reason), tool_calls [{id, type "function", function {name, arguments}}].
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/chat/chat_request.h"
#include "dsa/chat/output_parser.h"
#include "dsa/chat/prompt_format.h"
#include "dsa/server/openai_protocol.h"

namespace dsa::server {

// What /v1/chat/completions needs besides the engine (ServerOptions::chat; absent: 404).
struct ChatServing {
  std::shared_ptr<const chat::PromptFormat> format;
  std::function<std::vector<int32_t>(const std::string&)> encode;  // prompt text -> ids, no special tokens added
  std::function<std::string(const std::vector<int32_t>&)> decode;  // reply ids -> text keeping the syntax's markers
};

struct ChatRequest {
  chat::ChatRequestParts conv;
  CompletionRequest gen;  // sampling, n, stop, stream, include_usage (its prompts are left empty)
  int logprobs = -1;      // logprobs: true -> top_logprobs alternatives per token (0..20); -1: none
};

ChatRequest parse_chat_request(const std::string& body, const chat::PromptFormat& format);  // throws BadRequest

// One token of a choice's `logprobs.content`: {token, logprob, bytes, top_logprobs [{token,
// logprob, bytes}]}, token texts as `text_of` decodes them (special tokens kept).
nlohmann::json chat_token_logprob_json(const engine::TokenLogprob& t,
                                       const std::function<std::string(int32_t)>& text_of);
// The whole reply of one choice: {index, message, logprobs, finish_reason}; `logprobs` null
// when not asked, else {"content": [token entries]}.
nlohmann::json chat_choice_json(size_t index, const chat::OutputParser& reply, const std::string& finish_reason,
                                const nlohmann::json& logprobs = nullptr);
nlohmann::json chat_completion_json(const std::string& id, int64_t created, const std::string& model,
                                    nlohmann::json choices, const Usage& usage);
// One streamed chunk of choice `index` with this delta; finish_reason "" is null; `logprobs` as
// in chat_choice_json, for the chunk's tokens.
nlohmann::json chat_chunk_json(const std::string& id, int64_t created, const std::string& model, size_t index,
                               const nlohmann::json& delta, const std::string& finish_reason,
                               const nlohmann::json& logprobs = nullptr);
// The delta object of a parser step (reasoning_content / content / tool_calls present when non-empty).
nlohmann::json delta_json(const chat::ReplyDelta& d);

}  // namespace dsa::server
