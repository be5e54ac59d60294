#include "common/cli_run.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace dsa::test {

std::string dsa_binary() {
  const char* dir = std::getenv("DSA_TEST_BINARY_DIR");
  if (!dir) return "";
  const std::filesystem::path p = std::filesystem::path(dir) / "apps" / "dsa" / "dsa";
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p.string() : "";
}

CliResult run_dsa(const std::string& args, const std::string& env, int timeout_s) {
  CliResult r;
  // `timeout` bounds a hang; its own status 124 reports it. A signal of dsa (an abort) reaches
  // the shell as 128 + N.
  const std::string cmd =
      fmt::format("env DSA_PROGRESS=0 {} timeout -k 5 {} '{}' {} 2>&1", env, timeout_s, dsa_binary(), args);
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int status = ::pclose(f);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace dsa::test
