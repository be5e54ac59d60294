#include "dsa/chat/output_parser.h"

#include <algorithm>

namespace dsa::chat {
namespace {

using ojson = nlohmann::ordered_json;

const std::string kDsmlBlock = "<｜DSML｜tool_calls>", kDsmlBlockEnd = "</｜DSML｜tool_calls>",
                  kDsmlInvoke = "<｜DSML｜invoke", kDsmlInvokeEnd = "</｜DSML｜invoke>", kDsmlParam = "<｜DSML｜parameter",
                  kDsmlParamEnd = "</｜DSML｜parameter>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// The body of a JSON string for `s` (no quotes); broken UTF-8 becomes U+FFFD.
std::string json_escape(std::string_view s) {
  const std::string q = ojson(std::string(s)).dump(-1, ' ', false, ojson::error_handler_t::replace);
  return q.substr(1, q.size() - 2);
}

// attr="value" inside a DSML tag head (' name="x" string="true"').
std::string attribute(const std::string& head, const std::string& name) {
  const std::string key = name + "=\"";
  const size_t b = head.find(key);
  if (b == std::string::npos) return "";
  const size_t e = head.find('"', b + key.size());
  return head.substr(b + key.size(), e == std::string::npos ? std::string::npos : e - b - key.size());
}

// Length of the longest proper prefix of a delimiter that `buf` ends with: text that must wait.
size_t holdback(const std::string& buf, const std::vector<std::string>& ds) {
  size_t keep = 0;
  for (const std::string& d : ds)
    for (size_t k = std::min(buf.size(), d.size() - 1); k > keep; --k)
      if (buf.compare(buf.size() - k, k, d, 0, k) == 0) {
        keep = k;
        break;
      }
  return keep;
}

}  // namespace

void ReplyDelta::append(ReplyDelta more) {
  reasoning += more.reasoning;
  content += more.content;
  for (ToolCallDelta& t : more.tool_calls) {
    if (!tool_calls.empty() && tool_calls.back().index == t.index && t.id.empty()) tool_calls.back().arguments += t.arguments;
    else tool_calls.push_back(std::move(t));
  }
}

const std::vector<std::string>& reply_markers(OutputSyntax s) {
  static const std::vector<std::string> glm = {"<think>",   "</think>",   "<tool_call>",   "</tool_call>",
                                               "<arg_key>", "</arg_key>", "<arg_value>",   "</arg_value>",
                                               "<|endoftext|>", "<|user|>", "<|observation|>"};
  static const std::vector<std::string> v4 = {"<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>"};
  return s == OutputSyntax::Glm ? glm : v4;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind("<think>"), close = prompt.rfind("</think>");
  return open != std::string_view::npos && (close == std::string_view::npos || close < open);
}

OutputParser::OutputParser(ParserOptions o) : o_(std::move(o)) {
  state_ = o_.starts_in_reasoning ? State::Reasoning : State::Content;
  reasoned_ = o_.starts_in_reasoning;
  if (!o_.next_call_id) o_.next_call_id = [this] { return "call_" + std::to_string(ids_++); };
}

int OutputParser::complete_tool_calls() const {
  return static_cast<int>(std::count_if(calls_.begin(), calls_.end(), [](const ToolCall& c) { return c.complete; }));
}

bool OutputParser::glm_param_is_string(const std::string& key) const {
  if (calls_.empty()) return false;
  for (const auto& t : o_.tools) {
    if (!t.contains("function") || t["function"].value("name", "") != calls_.back().name) continue;
    const ojson& params = t["function"].contains("parameters") ? t["function"]["parameters"] : ojson();
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) return false;
    const ojson& props = params["properties"];
    if (!props.contains(key) || !props[key].is_object()) return false;
    const ojson& type = props[key].contains("type") ? props[key]["type"] : ojson();
    return type == "string";
  }
  return false;
}

void OutputParser::emit_text(ReplyDelta& out, std::string_view s) {
  if (s.empty()) return;
  switch (state_) {
    case State::Reasoning:
      reasoning_ += s;
      out.reasoning += s;
      return;
    case State::Content: {
      if (after_call_) {  // whitespace between and after tool calls is not content
        size_t i = 0;
        while (i < s.size() && is_space(s[i])) ++i;
        s.remove_prefix(i);
        if (s.empty()) return;
        after_call_ = false;
      }
      content_ += s;
      out.content += s;
      return;
    }
    case State::GlmName:
    case State::GlmKey:
    case State::DsmlInvokeHead:
    case State::DsmlParamHead: head_ += s; return;
    case State::GlmValue:
    case State::DsmlValue: value_text(out, s); return;
    default: return;  // between tags: ignored
  }
}

void OutputParser::args(ReplyDelta& out, const std::string& piece) {
  if (piece.empty() || calls_.empty()) return;
  calls_.back().arguments += piece;
  const int index = static_cast<int>(calls_.size()) - 1;
  if (!out.tool_calls.empty() && out.tool_calls.back().index == index) out.tool_calls.back().arguments += piece;
  else out.tool_calls.push_back({index, "", "", piece});
}

void OutputParser::begin_call(ReplyDelta& out, std::string name) {
  ToolCall c;
  c.id = o_.next_call_id();
  c.name = std::move(name);
  out.tool_calls.push_back({static_cast<int>(calls_.size()), c.id, c.name, ""});
  calls_.push_back(std::move(c));
  args_in_call_ = 0;
}

void OutputParser::begin_value(ReplyDelta& out, const std::string& key, bool streamed) {
  args(out, std::string(args_in_call_ ? ", " : "{") + "\"" + json_escape(key) + "\": " + (streamed ? "\"" : ""));
  ++args_in_call_;
  value_streamed_ = streamed;
  value_open_ = true;
  value_.clear();
}

void OutputParser::value_text(ReplyDelta& out, std::string_view s) {
  if (value_streamed_) args(out, json_escape(s));
  else value_ += s;
}

void OutputParser::end_value(ReplyDelta& out) {
  if (!value_open_) return;
  value_open_ = false;
  if (value_streamed_) {
    args(out, "\"");
    return;
  }
  const std::string v = trim(value_);
  const ojson parsed = ojson::parse(v, nullptr, false);
  if (!v.empty() && !parsed.is_discarded()) {
    args(out, v);
    return;
  }
  std::string quoted(1, '"');  // not "\"" + ...: GCC 12 warns falsely (-Wrestrict) on that form
  quoted += json_escape(value_);
  quoted += '"';
  args(out, quoted);
}

void OutputParser::end_call(ReplyDelta& out) {
  end_value(out);
  args(out, args_in_call_ ? "}" : "{}");
  after_call_ = true;
}

void OutputParser::run(ReplyDelta& out, bool final) {
  const bool glm = o_.syntax == OutputSyntax::Glm;
  const std::vector<std::string> tool_start =
      glm ? std::vector<std::string>{"<tool_call>"} : std::vector<std::string>{"\n\n" + kDsmlBlock, kDsmlBlock};
  const std::vector<std::string> ends = glm ? std::vector<std::string>{"<|endoftext|>", "<|user|>", "<|observation|>"}
                                            : std::vector<std::string>{"<｜end▁of▁sentence｜>"};
  // Tool-call tags outside a call (all of them when the request offered no tools): dropped.
  std::vector<std::string> stray = glm ? std::vector<std::string>{"</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}
                                       : std::vector<std::string>{"｜DSML｜"};
  if (glm && !o_.parse_tool_calls) stray.push_back("<tool_call>");
  for (;;) {
    if (state_ == State::Done) {
      buf_.clear();
      return;
    }
    std::vector<std::string> ds;
    switch (state_) {
      case State::Reasoning:
      case State::Content:
        ds = {"<think>", "</think>"};
        if (o_.parse_tool_calls) ds.insert(ds.end(), tool_start.begin(), tool_start.end());
        ds.insert(ds.end(), stray.begin(), stray.end());
        break;
      case State::GlmName:
      case State::GlmBetween: ds = {"<arg_key>", "</tool_call>"}; break;
      case State::GlmKey: ds = {"</arg_key>", "</tool_call>"}; break;
      case State::GlmBeforeValue: ds = {"<arg_value>", "<arg_key>", "</tool_call>"}; break;
      case State::GlmValue: ds = {"</arg_value>", "</tool_call>"}; break;
      case State::DsmlBlock: ds = {kDsmlInvoke, kDsmlBlockEnd}; break;
      case State::DsmlInvokeHead:
      case State::DsmlParamHead: ds = {">"}; break;
      case State::DsmlInvoke: ds = {kDsmlParam, kDsmlInvokeEnd, kDsmlBlockEnd}; break;
      case State::DsmlValue: ds = {kDsmlParamEnd, kDsmlInvokeEnd}; break;
      default: break;
    }
    ds.insert(ds.end(), ends.begin(), ends.end());
    size_t best = std::string::npos, which = 0;
    for (size_t i = 0; i < ds.size(); ++i) {
      const size_t p = buf_.find(ds[i]);
      if (p != std::string::npos && (p < best || (p == best && ds[i].size() > ds[which].size()))) {
        best = p;
        which = i;
      }
    }
    // A match waits while a longer delimiter could still start at or before it (its text is a
    // prefix of that delimiter running to the end of what arrived).
    const size_t keep = final ? 0 : holdback(buf_, ds);
    if (best == std::string::npos || buf_.size() - keep <= best) {
      emit_text(out, std::string_view(buf_).substr(0, buf_.size() - keep));
      buf_.erase(0, buf_.size() - keep);
      return;
    }
    emit_text(out, std::string_view(buf_).substr(0, best));
    const std::string d = ds[which];
    buf_.erase(0, best + d.size());

    if (std::find(ends.begin(), ends.end(), d) != ends.end()) {
      close_open(out);
      state_ = State::Done;
      continue;
    }
    switch (state_) {
      case State::Reasoning:
        if (d == "</think>") state_ = State::Content;
        else if (o_.parse_tool_calls && std::find(tool_start.begin(), tool_start.end(), d) != tool_start.end())
          enter_tool_block();
        break;  // tool calls end unfinished reasoning; other tags are dropped
      case State::Content:
        if (d == "<think>") {
          if (!reasoned_ && trim(content_).empty()) {  // a reply that opens its own reasoning
            state_ = State::Reasoning;
            reasoned_ = true;
          }
        } else if (o_.parse_tool_calls && std::find(tool_start.begin(), tool_start.end(), d) != tool_start.end()) {
          enter_tool_block();
        }
        break;
      case State::GlmName:
        begin_call(out, trim(head_));
        if (d == "</tool_call>") {
          end_call(out);
          calls_.back().complete = true;
          state_ = State::Content;
        } else {
          head_.clear();
          state_ = State::GlmKey;
        }
        break;
      case State::GlmBetween:
      case State::GlmBeforeValue:
        if (d == "<arg_value>") {
          begin_value(out, key_, glm_param_is_string(key_));
          state_ = State::GlmValue;
        } else if (d == "<arg_key>") {
          head_.clear();
          state_ = State::GlmKey;
        } else {
          end_call(out);
          calls_.back().complete = true;
          state_ = State::Content;
        }
        break;
      case State::GlmKey:
        key_ = trim(head_);
        head_.clear();
        if (d == "</arg_key>") {
          state_ = State::GlmBeforeValue;
        } else {
          end_call(out);
          calls_.back().complete = true;
          state_ = State::Content;
        }
        break;
      case State::GlmValue:
        end_value(out);
        if (d == "</tool_call>") {
          end_call(out);
          calls_.back().complete = true;
          state_ = State::Content;
        } else {
          state_ = State::GlmBetween;
        }
        break;
      case State::DsmlBlock:
        if (d == kDsmlInvoke) {
          head_.clear();
          state_ = State::DsmlInvokeHead;
        } else {
          after_call_ = true;
          state_ = State::Content;
        }
        break;
      case State::DsmlInvokeHead:
        begin_call(out, attribute(head_, "name"));
        head_.clear();
        state_ = State::DsmlInvoke;
        break;
      case State::DsmlInvoke:
        if (d == kDsmlParam) {
          head_.clear();
          state_ = State::DsmlParamHead;
        } else {
          end_call(out);
          calls_.back().complete = true;
          state_ = d == kDsmlBlockEnd ? State::Content : State::DsmlBlock;
        }
        break;
      case State::DsmlParamHead:
        begin_value(out, attribute(head_, "name"), attribute(head_, "string") != "false");
        head_.clear();
        state_ = State::DsmlValue;
        break;
      case State::DsmlValue:
        end_value(out);
        if (d == kDsmlInvokeEnd) {
          end_call(out);
          calls_.back().complete = true;
          state_ = State::DsmlBlock;
        } else {
          state_ = State::DsmlInvoke;
        }
        break;
      default: break;
    }
  }
}

void OutputParser::enter_tool_block() {
  state_ = o_.syntax == OutputSyntax::Glm ? State::GlmName : State::DsmlBlock;
  head_.clear();
}

// A reply that stops inside a call (max_tokens, or an end marker): the call's arguments are
// closed as valid JSON of what arrived; a call whose name was not complete is dropped.
void OutputParser::close_open(ReplyDelta& out) {
  switch (state_) {
    case State::GlmBetween:
    case State::GlmKey:
    case State::GlmBeforeValue:
    case State::GlmValue:
    case State::DsmlInvoke:
    case State::DsmlParamHead:
    case State::DsmlValue: end_call(out); break;
    default: break;
  }
  head_.clear();
}

ReplyDelta OutputParser::feed(std::string_view text) {
  ReplyDelta out;
  buf_ += text;
  run(out, false);
  return out;
}

ReplyDelta OutputParser::finish() {
  ReplyDelta out;
  run(out, true);
  close_open(out);
  state_ = State::Done;
  return out;
}

}  // namespace dsa::chat
