// Programmatic dependent launch (core/pdl.cuh): every kernel under src/dsa is launched through
// pdl::launch, which may start it while the kernel before it still runs, so every kernel must
// begin with pdl::entry() (the wait for its predecessors). A kernel without it would race with
// the kernel before it; no CPU test could see that and a GPU test would see it only sometimes, so
// this test reads the sources: no `<<<` launch is left, and the first statement of every
// __global__ function body is pdl::entry(), after at most some weight prefetches (prefetch_*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/core/pdl.h"

namespace {

// The source with comments and string/char literals blanked (newlines kept for line numbers).
std::string strip(const std::string& s) {
  std::string o = s;
  size_t i = 0;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < o.size(); ++k)
      if (o[k] != '\n') o[k] = ' ';
  };
  while (i < s.size()) {
    if (s.compare(i, 2, "//") == 0) {
      const size_t e = s.find('\n', i);
      blank(i, e == std::string::npos ? s.size() : e);
      i = e == std::string::npos ? s.size() : e;
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t e = s.find("*/", i + 2);
      const size_t end = e == std::string::npos ? s.size() : e + 2;
      blank(i, end);
      i = end;
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i];
      size_t k = i + 1;
      while (k < s.size() && s[k] != q) k += s[k] == '\\' ? 2 : 1;
      blank(i + 1, k);
      i = k + 1;
    } else {
      ++i;
    }
  }
  return o;
}

int line_of(const std::string& s, size_t pos) { return 1 + static_cast<int>(std::count(s.begin(), s.begin() + pos, '\n')); }

// Violations of the contract in one file's text, as "name:line: what".
std::vector<std::string> check_source(const std::string& name, const std::string& text) {
  std::vector<std::string> bad;
  const std::string s = strip(text);
  for (size_t p = s.find("<<<"); p != std::string::npos; p = s.find("<<<", p + 3))
    bad.push_back(name + ":" + std::to_string(line_of(s, p)) + ": a <<<>>> launch (use pdl::launch)");
  for (size_t g = s.find("__global__"); g != std::string::npos; g = s.find("__global__", g + 10)) {
    size_t p = s.find('(', g);
    if (p == std::string::npos) break;
    int depth = 0;
    for (; p < s.size(); ++p) {
      if (s[p] == '(') ++depth;
      if (s[p] == ')' && --depth == 0) break;
    }
    const size_t brace = s.find_first_of("{;", p);
    if (brace == std::string::npos || s[brace] == ';') continue;  // a declaration
    // Statements before the wait may only be weight prefetches (prefetch_*(...);).
    size_t first = s.find_first_not_of(" \t\r\n", brace + 1);
    while (first != std::string::npos && s.compare(first, 9, "prefetch_") == 0) {
      const size_t end = s.find(';', first);
      first = end == std::string::npos ? end : s.find_first_not_of(" \t\r\n", end + 1);
    }
    if (first == std::string::npos || s.compare(first, 13, "pdl::entry();") != 0)
      bad.push_back(name + ":" + std::to_string(line_of(s, g)) +
                    ": a __global__ function whose first statement is not pdl::entry();");
  }
  return bad;
}

TEST(PdlContract, CheckerFindsViolations) {
  const std::string good =
      "template <int N>\n__global__ void __launch_bounds__(128) k(int a, int b) {\n  pdl::entry();\n  x();\n}\n"
      "__global__ void decl(int);\n// k<<<1, 1>>>(); in a comment\nconst char* s = \"<<<\";\n";
  EXPECT_TRUE(check_source("good.cu", good).empty());
  EXPECT_TRUE(check_source("pf.cu", "__global__ void k(Args p) {\n  prefetch_w<64>(p, 1);\n  pdl::entry();\n}\n").empty());
  const auto late = check_source("late.cu", "__global__ void k(int a) {\n  int i = a;\n  pdl::entry();\n}\n");
  ASSERT_EQ(late.size(), 1u);
  EXPECT_NE(late[0].find("late.cu:1:"), std::string::npos) << late[0];
  const auto chevrons = check_source("c.cu", "void f() {\n  k<<<1, 32, 0, s>>>(a);\n}\n");
  ASSERT_EQ(chevrons.size(), 1u);
  EXPECT_NE(chevrons[0].find("c.cu:2:"), std::string::npos) << chevrons[0];
}

TEST(PdlContract, EveryKernelUnderSrcWaitsFirst) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(DSA_SOURCE_DIR) / "src" / "dsa";
  ASSERT_TRUE(fs::is_directory(root)) << root;
  int files = 0, kernels = 0;
  std::vector<std::string> bad;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cu" && ext != ".cuh")) continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const std::string code = strip(text);
    for (size_t g = code.find("__global__"); g != std::string::npos; g = code.find("__global__", g + 10)) ++kernels;
    ++files;
    for (auto& b : check_source(fs::relative(e.path(), root).string(), text)) bad.push_back(b);
  }
  EXPECT_GT(files, 20);
  EXPECT_GT(kernels, 40);  // the walk found the kernels (54 on 2026-12-04)
  for (const auto& b : bad) ADD_FAILURE() << b;
}

// With DSA_PDL=1 on a GPU where the build's code is SM90+, PDL must actually be on, or a test run
// meant to exercise the overlapping launches would not.
TEST(PdlCuda, OnWhenAskedForOnSm90AndLater) {
  DSA_REQUIRE_CUDA();
  const char* env = std::getenv("DSA_PDL");
  if (!env || std::string(env) != "1") {
    EXPECT_FALSE(dsa::pdl::enabled());
    GTEST_SKIP() << "DSA_PDL is not 1: PDL is off (the default)";
  }
  const auto& dev = dsa::cuda_devices().at(0);
  if (dev.capability.major < 9) GTEST_SKIP() << "capability " << dev.capability.str() << ": no PDL below SM90";
  EXPECT_TRUE(dsa::pdl::enabled()) << "device " << dev.name << " (" << dev.capability.str() << ")";
}

}  // namespace
