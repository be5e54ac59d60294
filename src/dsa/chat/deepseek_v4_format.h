// DeepSeek-V4's prompt format, implemented natively after the rules of the checkpoint's Python
// encoder (encoding/encoding_dsv4.py, which ships instead of a Jinja template):
//   <｜begin▁of▁sentence｜>SYSTEM[\n\n## Tools ... (tool schemas, one JSON per line)]
//   <｜User｜>USER<｜Assistant｜></think>ANSWER<｜end▁of▁sentence｜>      (chat mode)
//   <｜User｜>USER<｜Assistant｜><think>REASONING</think>ANSWER<｜end▁of▁sentence｜>  (thinking)
//   ... and the generation prompt <｜Assistant｜><think> (thinking) or <｜Assistant｜></think>.
// Rules:
//  - tool results have no role of their own: each `tool` message becomes a <tool_result>...
//    </tool_result> block of a user turn (consecutive results, and a user message right after
//    them, share one turn; blocks are joined by blank lines), ordered as the assistant called
//    them;
//  - assistant tool calls are DSML blocks after the answer:
//      \n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="F">\n<｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>
//    (string="false" with V as JSON for non-strings; arguments that are not a JSON object are
//    one parameter named "arguments");
//  - thinking mode drops the reasoning of assistant turns before the last user turn (and opens
//    <think> only after the last one) unless drop_thinking is off, which tools force;
//  - reasoning_effort "max" in thinking mode puts a fixed effort instruction before everything;
//  - role `latest_reminder` is <｜latest_reminder｜>TEXT; after a user turn followed by it the
//    assistant marker comes before the reminder.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/chat/prompt_format.h"

namespace dsa::chat {

struct DeepseekV4Options {
  bool thinking = false;
  bool max_effort = false;   // reasoning_effort "max"
  bool drop_thinking = true;
  bool add_bos = true;
};

// `messages` in ChatPrompt's canonical form; a system message may carry "tools" (OpenAI tool
// objects). Throws dsa::Error for roles the format has no place for.
std::string encode_deepseek_v4(const nlohmann::ordered_json& messages, const DeepseekV4Options& o);

// The special strings of the format.
namespace dsv4 {
inline constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kEos = "<｜end▁of▁sentence｜>";
inline constexpr const char* kUser = "<｜User｜>";
inline constexpr const char* kAssistant = "<｜Assistant｜>";
inline constexpr const char* kLatestReminder = "<｜latest_reminder｜>";
inline constexpr const char* kDsml = "｜DSML｜";
}  // namespace dsv4

}  // namespace dsa::chat
