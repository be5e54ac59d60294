// Runs the built `dsa` command line from a test (found through DSA_TEST_BINARY_DIR, which ctest
// sets) with a time bound, capturing stdout and stderr together.
#pragma once
#include <string>

namespace dsa::test {

struct CliResult {
  int rc = -1;      // exit status; 124 when the time bound killed it (a hang), 128+N for signal N
  std::string out;  // stdout and stderr
};

std::string dsa_binary();  // "" when it is not built / not found
// `env` is prepended as VAR=value words; DSA_PROGRESS=0 is always set.
CliResult run_dsa(const std::string& args, const std::string& env = "", int timeout_s = 300);

}  // namespace dsa::test

#define DSA_REQUIRE_DSA_BINARY()                                                                   \
  do {                                                                                             \
    if (::dsa::test::dsa_binary().empty())                                                         \
      GTEST_SKIP() << "dsa binary not found (run through ctest, which sets DSA_TEST_BINARY_DIR)"; \
  } while (0)
