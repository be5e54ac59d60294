// `dsa tokenize --tokenizer PATH (--text "..." | --text-file F | --decode 1,2,3) [--special] [--skip-special]
// [--tokens]`: runs the tokenizer of a checkpoint (tokenizer.json or its directory). --text prints
// the ids comma-separated (--tokens also prints each id's token); --decode prints the text.
// --batch: JSON lines on stdin, {"text": T, "special": B} -> {"ids": [...]} and {"decode": [ids],
// "skip_special": B} -> {"text": T} (tests compare a whole corpus with one process).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "dsa/core/error.h"
#include "dsa/tokenizer/tokenizer.h"

namespace dsa::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer, text, text_file, decode;
  bool special = false, skip_special = false, tokens = false, batch = false;
};

void batch(const Tokenizer& tok) {
  using json = nlohmann::json;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    json out;
    try {
      const json j = json::parse(line);
      if (j.contains("decode"))
        out = {{"text", tok.decode(j["decode"].get<std::vector<int32_t>>(), j.value("skip_special", false))}};
      else
        out = {{"ids", tok.encode(j.at("text").get<std::string>(), j.value("special", false))}};
    } catch (const std::exception& e) {
      out = {{"error", e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
}

void run(const TokenizeOptions& o) {
  auto tok = Tokenizer::load(o.tokenizer);
  if (o.batch) return batch(*tok);
  if (!o.decode.empty()) {
    std::string text = tok->decode(parse_token_ids(o.decode, "--decode"), o.skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  std::string text = o.text;
  if (!o.text_file.empty()) {
    std::ifstream f(o.text_file, std::ios::binary);
    DSA_CHECK(f.good(), "tokenize: --text-file: cannot open {}", o.text_file);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  auto ids = tok->encode(text, o.special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  if (o.tokens)
    for (int32_t id : ids) std::printf("%d\t%s\n", id, tok->token(id).value_or("?").c_str());
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Encode text to ids or decode ids with a checkpoint's tokenizer.json");
  auto o = std::make_shared<TokenizeOptions>();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer.json or the checkpoint directory holding it")->required();
  auto* text = cmd->add_option("--text", o->text, "Text to encode");
  auto* file = cmd->add_option("--text-file", o->text_file, "File whose bytes are the text to encode");
  auto* dec = cmd->add_option("--decode", o->decode, "Comma-separated ids to decode");
  text->excludes(dec);
  text->excludes(file);
  file->excludes(dec);
  cmd->add_flag("--special", o->special, "Add special tokens (post-processor / add_bos_token) when encoding");
  cmd->add_flag("--skip-special", o->skip_special, "Drop special tokens when decoding");
  cmd->add_flag("--tokens", o->tokens, "Also print each id with its token");
  cmd->add_flag("--batch", o->batch, "JSON lines on stdin: {text, special} -> {ids}; {decode, skip_special} -> {text}");
  cmd->callback([o, text, file, dec] {
    DSA_CHECK(o->batch || text->count() || file->count() || dec->count(),
              "tokenize: give --text, --text-file, --decode or --batch");
    run(*o);
  });
});

}  // namespace
}  // namespace dsa::cli
