#include "tiny_text.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsa/chat/prompt_format.h"
#include "dsa/core/error.h"
#include "dsa/model/scripted_weights.h"
#include "dsa/tokenizer/tiny_tokenizer.h"
#include "dsa/tokenizer/tokenizer.h"

namespace dsa::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// `arg` is the JSON list itself (its first non-blank character is '[') or a file holding it.
std::vector<std::string> read_script(const std::string& arg) {
  const size_t first = arg.find_first_not_of(" \t\n");
  const bool inline_json = first != std::string::npos && arg[first] == '[';
  DSA_CHECK(inline_json || fs::is_regular_file(arg), "--script {}: neither a JSON list nor a readable file", arg);
  const json j = inline_json ? json::parse(arg, nullptr, false) : json::parse(std::ifstream(arg), nullptr, false);
  DSA_CHECK(j.is_array() && j.size() >= 2, "--script {}: expected a JSON list of at least two strings", arg);
  std::vector<std::string> pieces;
  for (const auto& x : j) {
    DSA_CHECK(x.is_string() && !x.get<std::string>().empty(), "--script {}: every piece must be a non-empty string", arg);
    pieces.push_back(x.get<std::string>());
  }
  return pieces;
}

// A tool-use conversation in the family's prompt format: the tokenizer learns its words, so
// chat prompts with tools stay short for the tiny model.
std::string format_sample(const std::string& arch) {
  using ojson = nlohmann::ordered_json;
  chat::ChatPrompt p;
  p.messages = ojson::parse(R"([{"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c", "content": "sunny"}, {"role": "user", "content": "Thanks!"}])");
  p.tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Get the weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}}])");
  p.thinking = true;
  const auto fmt = arch == "deepseek_v4" ? chat::make_deepseek_v4_format()
                                         : chat::make_jinja_format(chat::builtin_glm5_template(), "builtin", chat::OutputSyntax::Glm, "", "");
  return fmt->render(p);
}

fs::path tokenizer_file(const std::string& p) { return fs::is_directory(p) ? fs::path(p) / "tokenizer.json" : fs::path(p); }

void write_json(const fs::path& p, const json& j) {
  std::ofstream f(p);
  DSA_CHECK(f, "{}: cannot create", p.string());
  f << j.dump(2) << "\n";
  DSA_CHECK(f.good(), "{}: write failed", p.string());
}

}  // namespace

int64_t tiny_vocab_size(const TinyTextOptions& o) {
  if (o.tokenizer.empty()) return 0;
  return Tokenizer::load(tokenizer_file(o.tokenizer).string())->vocab_size();
}

void write_tiny_text_files(const TinyTextOptions& o, const std::string& dir, int64_t vocab) {
  const std::vector<std::string> script = o.script.empty() ? std::vector<std::string>{} : read_script(o.script);
  const fs::path out(dir);
  std::vector<int32_t> stops;
  int32_t bos = 0;
  if (o.tokenizer.empty()) {
    std::vector<std::string> extras;  // multi-character pieces of the script become single tokens
    for (const std::string& p : script)
      if (p.size() > 1) extras.push_back(p);
    TinyTokenizer t = make_tiny_tokenizer(o.arch, vocab, extras, format_sample(o.arch));
    write_tiny_tokenizer(t, dir);
    stops = t.stop_ids;
    bos = t.bos_id;
    if (o.arch == "glm_moe_dsa") std::ofstream(out / "chat_template.jinja") << chat::builtin_glm5_template();
  } else {
    const fs::path src = tokenizer_file(o.tokenizer);
    fs::copy_file(src, out / "tokenizer.json", fs::copy_options::overwrite_existing);
    for (const char* extra : {"tokenizer_config.json", "chat_template.jinja"})
      if (fs::exists(src.parent_path() / extra))
        fs::copy_file(src.parent_path() / extra, out / extra, fs::copy_options::overwrite_existing);
    if (o.arch == "glm_moe_dsa" && !fs::exists(out / "chat_template.jinja"))
      std::ofstream(out / "chat_template.jinja") << chat::builtin_glm5_template();
  }
  auto tok = Tokenizer::load(dir);
  if (!o.tokenizer.empty()) {
    if (tok->bos_id()) bos = *tok->bos_id();
    if (tok->eos_id()) stops.push_back(*tok->eos_id());
    if (o.arch == "glm_moe_dsa")
      for (const char* t : {"<|endoftext|>", "<|user|>", "<|observation|>"})
        if (const int32_t id = tok->token_id(t); id >= 0 && std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
  }
  if (!stops.empty()) {
    write_json(out / "generation_config.json", {{"bos_token_id", bos}, {"eos_token_id", stops}});
    json cfg = json::parse(std::ifstream(out / "config.json"));
    cfg["bos_token_id"] = bos;
    cfg["eos_token_id"] = stops.size() == 1 ? json(stops[0]) : json(stops);
    write_json(out / "config.json", cfg);
  }
  if (script.empty()) return;

  std::vector<int32_t> ids;
  std::vector<std::string> text_of;
  for (const std::string& p : script) {
    const std::vector<int32_t> e = tok->encode(p, false);
    DSA_CHECK(!e.empty(), "--script: piece \"{}\" encodes to no token", p);
    if (o.tokenizer.empty()) DSA_CHECK(e.size() == 1, "--script: piece \"{}\" is not one token of dsa's tokenizer", p);
    for (int32_t id : e) {
      ids.push_back(id);
      text_of.push_back(tok->token(id).value_or("?"));
    }
  }
  std::map<int32_t, int32_t> next;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    auto [it, fresh] = next.emplace(ids[i], ids[i + 1]);
    DSA_CHECK(fresh || it->second == ids[i + 1],
              "--script: token {} ({}) is followed by both {} and {} ({}): a scripted model predicts from the last token "
              "only, so every token of the reply needs one successor",
              ids[i], text_of[i], it->second, ids[i + 1], text_of[i + 1]);
  }
  model::apply_scripted_weights(dir, next);
  if (o.script_mtp) model::apply_predicting_mtp(dir);
}

}  // namespace dsa::cli
