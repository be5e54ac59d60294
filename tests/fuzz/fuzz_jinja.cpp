// Fuzz target: the chat-template engine (chat/jinja). The input is a template; it is parsed and
// rendered with a conversation context the way chat templates see it (messages with tool calls,
// tools, add_generation_prompt, bos/eos tokens), under tight render limits so that a hostile
// template (a loop bomb, deep recursion, huge output) ends in a TemplateError within the
// fuzzer's time, never a hang, a crash or unbounded memory.
#include <string>

#include "dsa/chat/jinja/jinja.h"
#include "dsa/core/error.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(jinja) {
  using nlohmann::ordered_json;
  static const ordered_json context = ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "look it up",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
      {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  dsa::jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 200'000;
  limits.max_call_depth = 32;
  try {
    const dsa::jinja::Template t(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)t.render(context, limits);
  } catch (const dsa::Error&) {  // TemplateError: a syntax error or a refused render, with its line
  }
  return 0;
}
