// PromptFormat over a Jinja chat template, and the choice of format for a checkpoint
// (prompt_format.h).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsa/chat/deepseek_v4_format.h"
#include "dsa/chat/jinja/jinja.h"
#include "dsa/chat/prompt_format.h"
#include "dsa/core/error.h"

namespace dsa::chat {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// Hugging Face templates read tool-call arguments as mappings (`arguments.items()`); the API
// carries them as JSON text. Text that is not a JSON object stays text.
ojson template_messages(const ojson& messages) {
  ojson out = messages;
  for (auto& m : out) {
    if (!m.contains("tool_calls")) continue;
    for (auto& tc : m["tool_calls"]) {
      if (!tc.contains("function") || !tc["function"].contains("arguments")) continue;
      ojson& args = tc["function"]["arguments"];
      if (!args.is_string()) continue;
      ojson parsed = ojson::parse(args.get<std::string>(), nullptr, false);
      if (parsed.is_object()) args = std::move(parsed);
    }
  }
  return out;
}

class JinjaFormat : public PromptFormat {
 public:
  JinjaFormat(const std::string& text, std::string label, OutputSyntax syntax, std::string bos, std::string eos)
      : tpl_(text), label_(std::move(label)), syntax_(syntax), bos_(std::move(bos)), eos_(std::move(eos)) {}

  std::string name() const override { return "jinja (" + label_ + ")"; }
  OutputSyntax syntax() const override { return syntax_; }
  bool default_thinking() const override { return true; }  // GLM-5's template thinks unless told not to

  std::string render(const ChatPrompt& p) const override {
    ojson ctx = ojson::object();
    ctx["messages"] = template_messages(p.messages);
    ctx["tools"] = p.tools.empty() ? ojson(nullptr) : p.tools;
    ctx["add_generation_prompt"] = p.add_generation_prompt;
    ctx["bos_token"] = bos_;
    ctx["eos_token"] = eos_;
    ctx["enable_thinking"] = p.thinking;
    ctx["thinking"] = p.thinking;
    if (!p.reasoning_effort.empty()) ctx["reasoning_effort"] = p.reasoning_effort;
    for (auto it = p.template_kwargs.begin(); it != p.template_kwargs.end(); ++it) ctx[it.key()] = it.value();
    return tpl_.render(ctx);
  }

 private:
  jinja::Template tpl_;
  std::string label_;
  OutputSyntax syntax_;
  std::string bos_, eos_;
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  DSA_CHECK(f, "{}: cannot open", p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string token_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

std::unique_ptr<PromptFormat> make_jinja_format(const std::string& template_text, const std::string& label,
                                                OutputSyntax syntax, std::string bos_token, std::string eos_token) {
  try {
    return std::make_unique<JinjaFormat>(template_text, label, syntax, std::move(bos_token), std::move(eos_token));
  } catch (const jinja::TemplateError& e) {
    fail("{}: {}", label, e.what());
  }
}

std::unique_ptr<PromptFormat> load_prompt_format(const std::string& model_dir, const std::string& model_type,
                                                 const std::string& chat_template_file) {
  const fs::path dir(model_dir);
  ojson tok_cfg = ojson::object();
  if (fs::exists(dir / "tokenizer_config.json")) {
    tok_cfg = ojson::parse(read_file(dir / "tokenizer_config.json"), nullptr, false);
    DSA_CHECK(tok_cfg.is_object(), "{}: not a JSON object", (dir / "tokenizer_config.json").string());
  }
  const std::string bos = tok_cfg.contains("bos_token") ? token_text(tok_cfg["bos_token"]) : "";
  const std::string eos = tok_cfg.contains("eos_token") ? token_text(tok_cfg["eos_token"]) : "";
  const OutputSyntax syntax = model_type == "deepseek_v4" ? OutputSyntax::DeepseekV4 : OutputSyntax::Glm;
  if (!chat_template_file.empty())
    return make_jinja_format(read_file(chat_template_file), chat_template_file, syntax, bos, eos);
  if (model_type == "deepseek_v4") return make_deepseek_v4_format();
  DSA_CHECK(model_type == "glm_moe_dsa", "no chat format for model type '{}' (give one with --chat-template)", model_type);
  if (fs::exists(dir / "chat_template.jinja"))
    return make_jinja_format(read_file(dir / "chat_template.jinja"), (dir / "chat_template.jinja").string(), syntax, bos, eos);
  if (tok_cfg.contains("chat_template")) {
    const ojson& t = tok_cfg["chat_template"];
    const std::string label = (dir / "tokenizer_config.json").string() + " chat_template";
    if (t.is_string()) return make_jinja_format(t.get<std::string>(), label, syntax, bos, eos);
    if (t.is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
      const ojson* pick = nullptr;
      for (const auto& e : t)
        if (e.is_object() && e.contains("template") && e["template"].is_string() && (!pick || e.value("name", "") == "default"))
          pick = &e;
      if (pick) return make_jinja_format((*pick)["template"].get<std::string>(), label, syntax, bos, eos);
    }
    fail("{}: chat_template must be a string or a list of {{name, template}}", label);
  }
  return make_jinja_format(builtin_glm5_template(), "dsa's built-in GLM-5 template", syntax, bos, eos);
}

}  // namespace dsa::chat
