// `dsa prompt`: the prompt text dsa gives a model for a chat, and a way to run chat templates.
//   dsa prompt --model DIR --request FILE [--chat-template T] [--ids]
//       FILE: a /v1/chat/completions body (messages, tools, thinking, ...); prints the prompt
//       the model gets (and its token ids with --ids: the checkpoint's tokenizer.json).
//   dsa prompt --template T --context FILE    renders a Jinja template with a JSON context
//   dsa prompt --jinja-batch                  JSON lines {"template", "context"} on stdin ->
//       {"ok": true, "output"} or {"ok": false, "error"} on stdout (the differential test
//       against Python's jinja2 drives this)
//   dsa prompt --list-builtin                 {name: text} of dsa's built-in templates
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dsa/chat/chat_request.h"
#include "dsa/chat/jinja/jinja.h"
#include "dsa/chat/prompt_format.h"
#include "dsa/core/error.h"
#include "dsa/model/config.h"
#include "dsa/tokenizer/tokenizer.h"

namespace dsa::cli {
namespace {

using ojson = nlohmann::ordered_json;

struct Args {
  std::string model, request, chat_template, tmpl, context;
  bool ids = false, batch = false, list_builtin = false;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  DSA_CHECK(f, "{}: cannot open", path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

ojson read_json(const std::string& path) {
  ojson j = ojson::parse(slurp(path), nullptr, false);
  DSA_CHECK(!j.is_discarded(), "{}: not valid JSON", path);
  return j;
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

void batch() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    ojson out;
    try {
      const ojson j = ojson::parse(line);
      DSA_CHECK(j.contains("template") && j["template"].is_string(), "each line needs a \"template\" string");
      out = {{"ok", true}, {"output", jinja::render(j["template"].get<std::string>(), j.value("context", ojson::object()))}};
    } catch (const std::exception& e) {
      out = {{"ok", false}, {"error", e.what()}};
    }
    std::cout << dump(out) << "\n";
  }
}

void run(const Args& a) {
  if (a.batch) return batch();
  if (a.list_builtin) {
    std::cout << dump(ojson{{"glm5", chat::builtin_glm5_template()}}) << "\n";
    return;
  }
  if (!a.tmpl.empty()) {
    const ojson ctx = a.context.empty() ? ojson::object() : read_json(a.context);
    std::cout << jinja::Template(slurp(a.tmpl)).render(ctx);
    return;
  }
  DSA_CHECK(!a.model.empty() && !a.request.empty(), "dsa prompt: give --model DIR --request FILE, or --template FILE");
  const std::string type(model::arch_name(model::load_model_config(a.model).arch));
  auto fmt = chat::load_prompt_format(a.model, type, a.chat_template);
  chat::ChatRequestParts parts = chat::parse_chat_request(read_json(a.request), *fmt);
  const std::string prompt = fmt->render(parts.prompt);
  std::fprintf(stderr, "format: %s; thinking %s\n", fmt->name().c_str(), parts.prompt.thinking ? "on" : "off");
  std::cout << prompt;
  if (a.ids) {
    auto tok = Tokenizer::load(a.model);
    std::cout << "\n" << fmt::format("{}", fmt::join(tok->encode(prompt, false), ",")) << "\n";
  }
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("prompt", "Show the prompt a chat request gives a model; render chat templates");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model, "Checkpoint directory (config.json, tokenizer files, chat template)");
  cmd->add_option("--request", a->request, "A chat completions request body (JSON file)");
  cmd->add_option("--chat-template", a->chat_template, "A Jinja chat template replacing the checkpoint's");
  cmd->add_flag("--ids", a->ids, "Also print the prompt's token ids");
  cmd->add_option("--template", a->tmpl, "Render this Jinja template ...");
  cmd->add_option("--context", a->context, "... with the variables of this JSON file");
  cmd->add_flag("--jinja-batch", a->batch, "JSON lines {template, context} on stdin -> {ok, output | error} on stdout");
  cmd->add_flag("--list-builtin", a->list_builtin, "Print dsa's built-in templates as JSON");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
