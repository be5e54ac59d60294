// /v1/chat/completions request parsing and response JSON (OpenAI's chat.completion and
// chat.completion.chunk objects), independent of the HTTP library.
//
// The request: the conversation fields (chat/chat_request.h: messages, tools, tool_choice,
// thinking, chat_template_kwargs, reasoning_effort) and the generation fields /v1/completions
// takes (openai_protocol.h parse_generation_fields; max_completion_tokens is accepted as
// max_tokens). Fields this server cannot honour are a 400 naming them: logprobs / top_logprobs
// (the engine returns no log-probabilities yet), response_format other than text, and those
// chat_request.h lists. Unknown fields are ignored, as for completions.
// The reply message: content (null when only tool calls came), reasoning_content (null when the
// model did not reason), tool_calls [{id, type "function", function {name, arguments}}].
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/chat/chat_request.h"
#include "dsa/chat/output_parser.h"
#include "dsa/server/openai_protocol.h"

namespace dsa::server {

struct ChatRequest {
  chat::ChatRequestParts conv;
  CompletionRequest gen;  // params, stream, include_usage (its prompt is left empty)
};

ChatRequest parse_chat_request(const std::string& body, const chat::PromptFormat& format);  // throws BadRequest

// The whole reply (non-streamed).
nlohmann::json chat_completion_json(const std::string& id, int64_t created, const std::string& model,
                                    const chat::OutputParser& reply, const std::string& finish_reason, const Usage& usage);
// One streamed chunk with this delta; finish_reason "" is null.
nlohmann::json chat_chunk_json(const std::string& id, int64_t created, const std::string& model, const nlohmann::json& delta,
                               const std::string& finish_reason);
// The delta object of a parser step (reasoning_content / content / tool_calls present when non-empty).
nlohmann::json delta_json(const chat::ReplyDelta& d);

}  // namespace dsa::server
