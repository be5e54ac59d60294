// The conversation part of an OpenAI chat request, checked and turned into a ChatPrompt
// (chat_prompt.h): messages, tools, tool_choice, thinking. Sampling fields are not read here.
//
// Accepted:
//  - messages: role system | developer (as system) | user | assistant | tool | latest_reminder;
//    content a string, null, or text content parts ({"type": "text", "text": ...}, joined);
//    assistant tool_calls [{id, type "function", function {name, arguments (JSON text or
//    object)}}] and reasoning_content (or reasoning); tool tool_call_id / name.
//  - tools [{type "function", function {name, description, parameters}}]; tool_choice "auto" |
//    "none" (tools left out of the prompt, replies not parsed for calls) | "required" |
//    {"type": "function", "function": {"name": N}} (only that tool in the prompt). Without
//    constrained decoding "required" and a named choice are not enforced on the model: they
//    shape the prompt only.
//  - thinking: chat_template_kwargs.thinking / enable_thinking (bools, as vLLM and SGLang take
//    them), or "thinking": true / {"type": "enabled" | "disabled"}; reasoning_effort none |
//    minimal | low | medium | high | xhigh | max ("none" turns thinking off, others on, unless
//    said otherwise; "max" / "xhigh" add DeepSeek-V4's maximum-effort instruction); else the
//    format's default (GLM-5: on, DeepSeek-V4: off).
//  - chat_template_kwargs: passed to Jinja templates; DeepSeek-V4 reads drop_thinking.
// Refused with the field named: response_format other than text, image/audio content parts,
// functions / function_call (the legacy API), continue_final_message, echo, unknown roles,
// malformed fields.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/chat/chat_prompt.h"
#include "dsa/chat/prompt_format.h"
#include "dsa/core/error.h"

namespace dsa::chat {

class RequestError : public Error {
 public:
  RequestError(const std::string& message, std::string param) : Error(message), param(std::move(param)) {}
  std::string param;  // the offending field
};

enum class ToolChoice { None, Auto, Required, Named };

struct ChatRequestParts {
  ChatPrompt prompt;
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string named_tool;
  nlohmann::ordered_json all_tools = nlohmann::ordered_json::array();  // as sent (the parser reads their schemas)
  bool parse_tool_calls = false;  // tools were offered and tool_choice is not "none"
};

ChatRequestParts parse_chat_request(const nlohmann::ordered_json& body, const PromptFormat& format);

}  // namespace dsa::chat
