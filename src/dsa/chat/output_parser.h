// OutputParser: a model's reply text -> reasoning, content and tool calls, incrementally (text
// arrives as it is decoded; each feed() returns what can be told apart so far), so that
// streamed deltas never carry a delimiter or half of one: text that could be the start of a
// delimiter is held back until it can be decided.
//
// Reasoning: starts in reasoning when the prompt opened <think> (starts_in_reasoning); ends at
// </think>, or at the start of tool calls (a reply that forgets </think>); a reply that never
// closes it is all reasoning. A reply that opens <think> itself (before any content) reasons
// too; stray <think> / </think> tags elsewhere are dropped, and so are tool-call tags outside a
// call (all of them when the request offered no tools: the text between them stays).
// Tool calls (only when the request offered tools), one OpenAI tool call each, arguments as
// JSON text streamed piece by piece:
//  - GLM: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>; V is a
//    JSON string when the tool's schema says the parameter is a string (streamed), else parsed
//    as JSON when it is JSON and a string when not (sent when the value is complete);
//  - DeepSeek-V4 DSML: [\n\n]<｜DSML｜tool_calls><｜DSML｜invoke name="F"><｜DSML｜parameter
//    name="K" string="true|false">V</｜DSML｜parameter>...</｜DSML｜invoke>...
//    </｜DSML｜tool_calls>; string="true" values are streamed as JSON strings, others sent whole
//    (as a string when they are not valid JSON).
//  Whitespace and stray text between tags are ignored. A call is announced (id, name) once its
//  name is complete; one cut off (max_tokens) is closed at finish() so that its arguments are
//  valid JSON of what arrived; a call cut off before its name is dropped.
// End-of-turn text (<｜end▁of▁sentence｜>, <|user|>, <|observation|>, <|endoftext|>) ends the
// reply: anything after it is ignored.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsa/chat/prompt_format.h"

namespace dsa::chat {

struct ToolCallDelta {
  int index = 0;
  std::string id, name;  // set on the first delta of a call only
  std::string arguments;  // the next piece of the arguments' JSON text
};

struct ReplyDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(ReplyDelta more);  // `more` follows this delta (pieces of one call are joined)
};

struct ToolCall {
  std::string id, name, arguments;
  bool complete = false;  // its closing tag arrived
};

struct ParserOptions {
  OutputSyntax syntax = OutputSyntax::Glm;
  bool starts_in_reasoning = false;
  bool parse_tool_calls = false;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // OpenAI tool objects (GLM argument types)
  std::function<std::string()> next_call_id;  // default: call_0, call_1, ...
};

// The special tokens a reply of this syntax is parsed by (delimiters, end-of-turn markers):
// other special tokens are not part of the reply text.
const std::vector<std::string>& reply_markers(OutputSyntax s);

// Whether a prompt leaves the model inside <think> (its last <think> is not closed).
bool prompt_opens_reasoning(std::string_view prompt);

class OutputParser {
 public:
  explicit OutputParser(ParserOptions o);
  ReplyDelta feed(std::string_view text);
  ReplyDelta finish();  // the end of the reply: flushes held-back text, closes a cut-off call

  // Everything so far.
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }
  bool reasoned() const { return reasoned_; }  // reasoning was opened (even if empty)
  int complete_tool_calls() const;

 private:
  enum class State {
    Reasoning, Content, Done,
    GlmName, GlmBetween, GlmKey, GlmBeforeValue, GlmValue,
    DsmlBlock, DsmlInvokeHead, DsmlInvoke, DsmlParamHead, DsmlValue,
  };
  void run(ReplyDelta& out, bool final);
  void emit_text(ReplyDelta& out, std::string_view s);
  void begin_call(ReplyDelta& out, std::string name);
  void args(ReplyDelta& out, const std::string& piece);
  void begin_value(ReplyDelta& out, const std::string& key, bool streamed);
  void value_text(ReplyDelta& out, std::string_view s);
  void end_value(ReplyDelta& out);
  void end_call(ReplyDelta& out);
  void enter_tool_block();
  void close_open(ReplyDelta& out);
  bool glm_param_is_string(const std::string& key) const;

  ParserOptions o_;
  State state_;
  std::string buf_;        // not yet decided
  std::string head_;       // a tag's inside being read (call name, DSML attributes, argument key)
  bool after_call_ = false;  // whitespace after a tool call is not content
  std::string reasoning_, content_;
  bool reasoned_ = false;
  std::vector<ToolCall> calls_;
  std::string key_, value_;  // the argument being read (value_: buffered non-string values)
  bool value_streamed_ = false, value_open_ = false;
  int args_in_call_ = 0;
  int ids_ = 0;
};

}  // namespace dsa::chat
