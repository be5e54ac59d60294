// dsa: command-line entry. Each subcommand registers itself from its own cmd_*.cpp through
// the table in commands.h. Every error ends the command with a one-line message on stderr and
// exit code 1 (CLI11's usage errors keep their codes, all below 128): dsa::Error, and any other
// exception (a std::filesystem error, std::bad_alloc, ...) too, so that no input makes the
// process abort.
#include <cstdio>
#include <exception>
#include <new>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "dsa/core/error.h"
#include "dsa/core/version.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{"dsa: native inference for DeepSeek-V4 and GLM-5.1 (DeepSeek sparse attention)"};
    app.set_version_flag("--version", dsa::kVersion);
    app.require_subcommand(1);
    for (auto& reg : dsa::cli::commands()) reg(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
  } catch (const dsa::Error& e) {
    std::fprintf(stderr, "dsa: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dsa: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsa: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "dsa: error: unknown exception\n");
    return 1;
  }
  const int code = dsa::cli::exit_code();
  return code >= 0 && code < 128 ? code : 1;
}
