// ChatPrompt: a conversation to be turned into a model's prompt text (prompt_format.h), in one
// canonical form whatever the API sent:
//   messages: [{"role": "system" | "user" | "assistant" | "tool" | "latest_reminder",
//               "content": string (text parts already joined) or null,
//               "reasoning_content": string (assistant, optional),
//               "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": JSON text}}],
//               "tool_call_id": string (tool, optional), "name": string (optional)}]
//   tools:    OpenAI tool objects [{"type": "function", "function": {"name", "description", "parameters"}}]
// JSON objects keep their key order (ordered_json): templates print tool schemas and arguments
// in the order the client sent them.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace dsa::chat {

struct ChatPrompt {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  bool thinking = false;         // reasoning before the answer (the prompt opens <think>)
  std::string reasoning_effort;  // "" (default), "low", "medium", "high", "max"
  bool add_generation_prompt = true;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

}  // namespace dsa::chat
