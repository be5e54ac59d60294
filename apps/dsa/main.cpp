// dsa: command-line entry. Each subcommand registers itself from its own cmd_*.cpp through
// the table in commands.h; dsa::Error becomes a one-line message and exit code 1.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "dsa/core/error.h"
#include "dsa/core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"dsa: native inference for DeepSeek-V4 and GLM-5.1 (DeepSeek sparse attention)"};
  app.set_version_flag("--version", dsa::kVersion);
  app.require_subcommand(1);
  for (auto& reg : dsa::cli::commands()) reg(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dsa::Error& e) {
    std::fprintf(stderr, "dsa: error: %s\n", e.what());
    return 1;
  }
  return dsa::cli::exit_code();
}
