#include "dsa/chat/deepseek_v4_format.h"

#include <algorithm>
#include <map>
#include <vector>

#include "dsa/chat/python_json.h"
#include "dsa/core/error.h"

namespace dsa::chat {
namespace {

using ojson = nlohmann::ordered_json;
using namespace dsv4;

// The model's trained instructions (verbatim from the format: the model reads exactly this).
const char* const kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

std::string tools_section(const ojson& tools) {
  std::string schemas;
  for (const auto& t : tools) {
    DSA_CHECK(t.is_object() && t.contains("function"), "tools: every tool must be {{\"type\": \"function\", \"function\": {{...}}}}");
    if (!schemas.empty()) schemas += "\n";
    schemas += python_json(t["function"]);
  }
  const std::string D = kDsml;
  return "## Tools\n\n"
         "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<" + D +
         "tool_calls>\" block like the following:\n\n"
         "<" + D + "tool_calls>\n"
         "<" + D + "invoke name=\"$TOOL_NAME\">\n"
         "<" + D + "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + D + "parameter>\n"
         "...\n"
         "</" + D + "invoke>\n"
         "<" + D + "invoke name=\"$TOOL_NAME2\">\n"
         "...\n"
         "</" + D + "invoke>\n"
         "</" + D + "tool_calls>\n\n"
         "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, "
         "arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
         "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
         "<think>...</think> BEFORE any tool calls or final response.\n\n"
         "Otherwise, output directly after </think> with tool calls or final response.\n\n"
         "### Available Tool Schemas\n\n" +
         schemas +
         "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
}

std::string dsml_tool_calls(const ojson& calls) {
  const std::string D = kDsml;
  std::string invokes;
  for (const auto& tc : calls) {
    const ojson& f = tc.contains("function") ? tc["function"] : tc;
    const std::string name = f.value("name", "");
    const std::string raw = f.contains("arguments") && f["arguments"].is_string() ? f["arguments"].get<std::string>()
                                                                                  : (f.contains("arguments") ? f["arguments"].dump() : "{}");
    ojson args = ojson::parse(raw, nullptr, false);
    if (!args.is_object()) args = ojson{{"arguments", raw}};
    std::string params;
    for (auto it = args.begin(); it != args.end(); ++it) {
      const bool is_str = it.value().is_string();
      if (!params.empty()) params += "\n";
      params += "<" + D + "parameter name=\"" + it.key() + "\" string=\"" + (is_str ? "true" : "false") + "\">" +
                (is_str ? it.value().get<std::string>() : python_json(it.value())) + "</" + D + "parameter>";
    }
    if (!invokes.empty()) invokes += "\n";
    invokes += "<" + D + "invoke name=\"" + name + "\">\n" + params + "\n</" + D + "invoke>";
  }
  return "\n\n<" + D + "tool_calls>\n" + invokes + "\n</" + D + "tool_calls>";
}

struct Block {
  bool tool = false;
  std::string text, id;
};

struct Msg {
  std::string role;
  std::string content;
  bool has_blocks = false;
  std::vector<Block> blocks;
  ojson tools, tool_calls;
  std::string reasoning;
};

std::string text(const ojson& v) { return v.is_string() ? v.get<std::string>() : ""; }

// Tool results into user turns, then each turn's results in the order of the assistant's calls.
std::vector<Msg> merge(const ojson& messages) {
  std::vector<Msg> out;
  std::map<std::string, size_t> call_order;
  for (const auto& m : messages) {
    const std::string role = m.value("role", "");
    if (role == "tool") {
      Block b{true, text(m.value("content", ojson())), m.value("tool_call_id", "")};
      if (!out.empty() && out.back().role == "user" && out.back().has_blocks) {
        out.back().blocks.push_back(std::move(b));
      } else {
        Msg u;
        u.role = "user";
        u.has_blocks = true;
        u.blocks.push_back(std::move(b));
        out.push_back(std::move(u));
      }
      continue;
    }
    if (role == "user") {
      Block b{false, text(m.value("content", ojson())), ""};
      if (!out.empty() && out.back().role == "user" && out.back().has_blocks) {
        out.back().blocks.push_back(std::move(b));
      } else {
        Msg u;
        u.role = "user";
        u.content = b.text;
        u.has_blocks = true;
        u.blocks.push_back(std::move(b));
        out.push_back(std::move(u));
      }
      continue;
    }
    if (role != "system" && role != "assistant" && role != "latest_reminder")
      fail("messages: role '{}' has no place in the DeepSeek-V4 format (system, user, assistant, tool, latest_reminder)", role);
    Msg x;
    x.role = role;
    x.content = text(m.value("content", ojson()));
    if (m.contains("tools") && m["tools"].is_array()) x.tools = m["tools"];
    if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) x.tool_calls = m["tool_calls"];
    x.reasoning = text(m.value("reasoning_content", ojson()));
    out.push_back(std::move(x));
  }
  for (Msg& m : out) {
    if (m.role == "assistant" && !m.tool_calls.is_null()) {
      call_order.clear();
      size_t i = 0;
      for (const auto& tc : m.tool_calls) {
        const std::string id = tc.value("id", "");
        if (!id.empty()) call_order[id] = i;
        ++i;
      }
    } else if (m.role == "user" && m.has_blocks) {
      std::vector<Block> results;
      for (const Block& b : m.blocks)
        if (b.tool) results.push_back(b);
      if (results.size() < 2 || call_order.empty()) continue;
      auto rank = [&](const Block& b) {
        auto it = call_order.find(b.id);
        return it == call_order.end() ? size_t{0} : it->second;
      };
      std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
      size_t k = 0;
      for (Block& b : m.blocks)
        if (b.tool) b = results[k++];
    }
  }
  return out;
}

int last_user(const std::vector<Msg>& ms) {
  for (int i = static_cast<int>(ms.size()) - 1; i >= 0; --i)
    if (ms[static_cast<size_t>(i)].role == "user") return i;
  return -1;
}

}  // namespace

std::string encode_deepseek_v4(const ojson& messages, const DeepseekV4Options& o) {
  DSA_CHECK(messages.is_array(), "messages must be an array");
  std::vector<Msg> ms = merge(messages);
  bool drop = o.drop_thinking;
  for (const Msg& m : ms)
    if (!m.tools.is_null() && !m.tools.empty()) drop = false;  // tool use keeps every turn's reasoning
  if (o.thinking && drop) {
    const int lu = last_user(ms);
    std::vector<Msg> kept;
    for (size_t i = 0; i < ms.size(); ++i) {
      Msg m = ms[i];
      if (m.role == "assistant" && static_cast<int>(i) < lu) m.reasoning.clear();
      kept.push_back(std::move(m));
    }
    ms = std::move(kept);
  }
  const int lu = last_user(ms);
  std::string p = o.add_bos ? kBos : "";
  for (size_t i = 0; i < ms.size(); ++i) {
    const Msg& m = ms[i];
    const int idx = static_cast<int>(i);
    if (i == 0 && o.thinking && o.max_effort) p += kReasoningEffortMax;
    if (m.role == "system") {
      p += m.content;
      if (!m.tools.is_null() && !m.tools.empty()) p += "\n\n" + tools_section(m.tools);
    } else if (m.role == "user") {
      p += kUser;
      if (m.has_blocks) {
        for (size_t k = 0; k < m.blocks.size(); ++k) {
          if (k) p += "\n\n";
          p += m.blocks[k].tool ? "<tool_result>" + m.blocks[k].text + "</tool_result>" : m.blocks[k].text;
        }
      } else {
        p += m.content;
      }
    } else if (m.role == "latest_reminder") {
      p += std::string(kLatestReminder) + m.content;
    } else {  // assistant
      if (o.thinking && (!drop || idx > lu)) p += m.reasoning + "</think>";
      p += m.content;
      if (!m.tool_calls.is_null()) p += dsml_tool_calls(m.tool_calls);
      p += kEos;
    }
    const bool next_continues = i + 1 < ms.size() && ms[i + 1].role != "assistant" && ms[i + 1].role != "latest_reminder";
    if (next_continues) continue;
    if (m.role == "user") {
      p += kAssistant;
      p += o.thinking && (!drop || idx >= lu) ? "<think>" : "</think>";
    }
  }
  return p;
}

namespace {

class DeepseekV4Format : public PromptFormat {
 public:
  std::string name() const override { return "deepseek_v4 (native encoder)"; }
  OutputSyntax syntax() const override { return OutputSyntax::DeepseekV4; }
  bool default_thinking() const override { return false; }

  std::string render(const ChatPrompt& p) const override {
    ojson ms = p.messages;
    if (!p.tools.empty()) {  // tools are described in the system part
      if (ms.empty() || ms[0].value("role", "") != "system") ms.insert(ms.begin(), ojson{{"role", "system"}, {"content", ""}});
      ms[0]["tools"] = p.tools;
    }
    DeepseekV4Options o;
    o.thinking = p.thinking;
    o.max_effort = p.reasoning_effort == "max" || p.reasoning_effort == "xhigh";
    if (p.template_kwargs.contains("drop_thinking")) {
      DSA_CHECK(p.template_kwargs["drop_thinking"].is_boolean(), "chat_template_kwargs.drop_thinking must be a boolean");
      o.drop_thinking = p.template_kwargs["drop_thinking"].get<bool>();
    }
    if (!p.add_generation_prompt) {  // the encoder always ends a user turn with the assistant marker
      std::string s = encode_deepseek_v4(ms, o);
      for (const char* tail : {"<think>", "</think>"}) {
        const std::string t = std::string(kAssistant) + tail;
        if (s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0) {
          s.resize(s.size() - t.size());
          break;
        }
      }
      return s;
    }
    return encode_deepseek_v4(ms, o);
  }
};

}  // namespace

std::unique_ptr<PromptFormat> make_deepseek_v4_format() { return std::make_unique<DeepseekV4Format>(); }

}  // namespace dsa::chat
