#include "dsa/chat/chat_request.h"

#include <optional>

namespace dsa::chat {
namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& msg, const std::string& param) { throw RequestError(msg, param); }

std::string where(size_t i, const char* field) { return "messages[" + std::to_string(i) + "]." + field; }

// j[key] as a string, `def` when absent or null; any other type is the client's error (json's
// value() would throw its own type_error, which is not a request error).
std::string string_field(const ojson& j, const char* key, const std::string& def, const std::string& param) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_string()) bad(param + " must be a string", param);
  return j[key].get<std::string>();
}

// A message's content as text: a string, null, or text parts.
ojson content_text(const ojson& c, const std::string& param) {
  if (c.is_null() || c.is_string()) return c;
  if (!c.is_array()) bad(param + " must be a string, null or an array of content parts", param);
  std::string text;
  for (size_t k = 0; k < c.size(); ++k) {
    const ojson& part = c[k];
    const std::string pp = param + "[" + std::to_string(k) + "]";
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(pp + " must be a content part object with a type", pp);
    const std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "input_text")
      bad(pp + ": content parts of type '" + type + "' are not supported (text only)", pp);
    if (!part.contains("text") || !part["text"].is_string()) bad(pp + ".text must be a string", pp);
    if (!text.empty()) text += "\n";  // vLLM joins text parts with newlines
    text += part["text"].get<std::string>();
  }
  return text;
}

ojson tool_calls_of(const ojson& tcs, size_t i) {
  const std::string param = where(i, "tool_calls");
  if (!tcs.is_array()) bad(param + " must be an array", param);
  ojson out = ojson::array();
  for (size_t k = 0; k < tcs.size(); ++k) {
    const ojson& tc = tcs[k];
    const std::string pp = param + "[" + std::to_string(k) + "]";
    if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object())
      bad(pp + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", pp);
    if (tc.contains("type") && tc["type"] != "function") bad(pp + ".type must be \"function\"", pp);
    const ojson& f = tc["function"];
    if (!f.contains("name") || !f["name"].is_string()) bad(pp + ".function.name must be a string", pp);
    std::string args = "{}";
    if (f.contains("arguments") && !f["arguments"].is_null()) {
      if (f["arguments"].is_string()) args = f["arguments"].get<std::string>();
      else if (f["arguments"].is_object()) args = f["arguments"].dump();
      else bad(pp + ".function.arguments must be a JSON string", pp);
    }
    ojson c = {{"id", tc.contains("id") && tc["id"].is_string() ? tc["id"].get<std::string>() : "call_" + std::to_string(k)},
               {"type", "function"},
               {"function", {{"name", f["name"]}, {"arguments", args}}}};
    out.push_back(std::move(c));
  }
  return out;
}

ojson messages_of(const ojson& ms) {
  if (!ms.is_array() || ms.empty()) bad("messages must be a non-empty array", "messages");
  ojson out = ojson::array();
  for (size_t i = 0; i < ms.size(); ++i) {
    const ojson& m = ms[i];
    const std::string pm = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(pm + " must be an object", pm);
    if (!m.contains("role") || !m["role"].is_string()) bad(where(i, "role") + " must be a string", where(i, "role"));
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "latest_reminder")
      bad(where(i, "role") + ": unknown role '" + role + "' (system, developer, user, assistant, tool)", where(i, "role"));
    ojson c = {{"role", role}};
    c["content"] = m.contains("content") ? content_text(m["content"], where(i, "content")) : ojson(nullptr);
    if (role != "assistant" && c["content"].is_null() && role != "tool")
      c["content"] = "";  // templates concatenate content; null is only usual for assistant tool calls
    if (role == "assistant") {
      for (const char* k : {"reasoning_content", "reasoning"})
        if (m.contains(k) && !m[k].is_null()) {
          if (!m[k].is_string()) bad(where(i, k) + " must be a string", where(i, k));
          c["reasoning_content"] = m[k];
          break;
        }
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
        ojson tcs = tool_calls_of(m["tool_calls"], i);
        if (!tcs.empty()) c["tool_calls"] = std::move(tcs);
      }
    } else if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      bad(where(i, "tool_calls") + " is only allowed in assistant messages", where(i, "tool_calls"));
    }
    if (role == "tool" && c["content"].is_null()) c["content"] = "";
    for (const char* k : {"tool_call_id", "name"})
      if (m.contains(k) && !m[k].is_null()) {
        if (!m[k].is_string()) bad(where(i, k) + " must be a string", where(i, k));
        c[k] = m[k];
      }
    out.push_back(std::move(c));
  }
  return out;
}

ojson tools_of(const ojson& ts) {
  if (ts.is_null()) return ojson::array();
  if (!ts.is_array()) bad("tools must be an array", "tools");
  ojson out = ojson::array();
  for (size_t k = 0; k < ts.size(); ++k) {
    const ojson& t = ts[k];
    const std::string p = "tools[" + std::to_string(k) + "]";
    if (!t.is_object() || string_field(t, "type", "function", p + ".type") != "function" || !t.contains("function") || !t["function"].is_object())
      bad(p + " must be {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}", p);
    const ojson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      bad(p + ".function.name must be a non-empty string", p);
    if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
      bad(p + ".function.parameters must be a JSON schema object", p);
    out.push_back({{"type", "function"}, {"function", f}});
  }
  return out;
}

std::optional<bool> bool_field(const ojson& j, const char* key, const std::string& param) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_boolean()) bad(param + " must be a boolean", param);
  return j[key].get<bool>();
}

}  // namespace

ChatRequestParts parse_chat_request(const ojson& body, const PromptFormat& format) {
  if (!body.is_object()) bad("the body must be a JSON object", "");
  for (const char* k : {"functions", "function_call"})
    if (body.contains(k) && !body[k].is_null())
      bad(std::string(k) + " (the legacy function-calling API) is not supported: use tools and tool_choice", k);
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const ojson& rf = body["response_format"];
    if (!rf.is_object() || string_field(rf, "type", "", "response_format.type") != "text")
      bad("response_format: only {\"type\": \"text\"} is supported (no structured output / JSON schema decoding)",
          "response_format");
  }
  for (const char* k : {"continue_final_message", "echo"})
    if (bool_field(body, k, k).value_or(false)) bad(std::string(k) + " is not supported", k);
  if (body.contains("modalities") && body["modalities"].is_array())
    for (const auto& m : body["modalities"])
      if (m != "text") bad("modalities: only \"text\" is supported", "modalities");

  ChatRequestParts r;
  ChatPrompt& p = r.prompt;
  if (!body.contains("messages")) bad("messages is required", "messages");
  p.messages = messages_of(body["messages"]);
  r.all_tools = tools_of(body.contains("tools") ? body["tools"] : ojson(nullptr));

  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const ojson& tc = body["tool_choice"];
    if (tc == "none") r.tool_choice = ToolChoice::None;
    else if (tc == "auto") r.tool_choice = ToolChoice::Auto;
    else if (tc == "required") r.tool_choice = ToolChoice::Required;
    else if (tc.is_object() && string_field(tc, "type", "", "tool_choice.type") == "function" && tc.contains("function") && tc["function"].is_object() &&
             tc["function"].contains("name") && tc["function"]["name"].is_string()) {
      r.tool_choice = ToolChoice::Named;
      r.named_tool = tc["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
          "tool_choice");
    }
    if ((r.tool_choice == ToolChoice::Required || r.tool_choice == ToolChoice::Named) && r.all_tools.empty())
      bad("tool_choice requires tools", "tool_choice");
  }
  if (r.tool_choice == ToolChoice::Named) {
    for (const auto& t : r.all_tools)
      if (t["function"]["name"] == r.named_tool) p.tools.push_back(t);
    if (p.tools.empty()) bad("tool_choice names '" + r.named_tool + "', which is not in tools", "tool_choice");
  } else if (r.tool_choice != ToolChoice::None) {
    p.tools = r.all_tools;
  }
  r.parse_tool_calls = !p.tools.empty();
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null() && !body["parallel_tool_calls"].is_boolean())
    bad("parallel_tool_calls must be a boolean", "parallel_tool_calls");

  std::optional<bool> thinking;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) bad("chat_template_kwargs must be an object", "chat_template_kwargs");
    p.template_kwargs = body["chat_template_kwargs"];
    for (const char* k : {"thinking", "enable_thinking"})
      if (auto b = bool_field(p.template_kwargs, k, std::string("chat_template_kwargs.") + k)) thinking = *b;
  }
  if (!thinking && body.contains("thinking") && !body["thinking"].is_null()) {
    const ojson& t = body["thinking"];
    if (t.is_boolean()) thinking = t.get<bool>();
    else if (t.is_object() && (string_field(t, "type", "", "thinking.type") == "enabled" ||
                                string_field(t, "type", "", "thinking.type") == "disabled"))
      thinking = t["type"] == "enabled";
    else bad("thinking must be a boolean or {\"type\": \"enabled\" | \"disabled\"}", "thinking");
  }
  if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) {
    const ojson& e = body["reasoning_effort"];
    static const char* levels[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    bool ok = false;
    for (const char* l : levels) ok = ok || e == l;
    if (!ok) bad("reasoning_effort must be one of none, minimal, low, medium, high, xhigh, max", "reasoning_effort");
    p.reasoning_effort = e.get<std::string>();
    if (!thinking) thinking = p.reasoning_effort != "none";
  }
  p.thinking = thinking.value_or(format.default_thinking());
  p.add_generation_prompt = bool_field(body, "add_generation_prompt", "add_generation_prompt").value_or(true);
  return r;
}

}  // namespace dsa::chat
