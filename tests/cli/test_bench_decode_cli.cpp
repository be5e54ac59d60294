// `dsa bench decode` on the CPU with the tiny DeepSeek-V4 preset: several contexts in one run
// (K suffixes) give one row set per context x batch, and bad --context / --batch lists end with a
// "dsa: error:" naming the item, exit code 1.
#include <gtest/gtest.h>

#include "common/cli_run.h"

namespace dsa::test {
namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(BenchDecodeCli, SeveralContextsGiveOneRowSetEach) {
  DSA_REQUIRE_DSA_BINARY();
  const CliResult r = run_dsa("bench decode --preset tiny-v4 --on cpu --batch 1 --context 9,1K --quick");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "ctx=9 B=1 step");
  EXPECT_HAS(r.out, "ctx=1024 B=1 step");
}

TEST(BenchDecodeCli, BadListsAreErrors) {
  DSA_REQUIRE_DSA_BINARY();
  for (const char* bad : {"0", "abc", "3G", "4M", ",5", "99999999999"}) {
    const CliResult r = run_dsa(std::string("bench decode --preset tiny-v4 --on cpu --batch 1 --context '") + bad + "'");
    EXPECT_EQ(r.rc, 1) << bad << ": " << r.out;
    EXPECT_HAS(r.out, "dsa: error: --context");
  }
  const CliResult r = run_dsa("bench decode --preset tiny-v4 --on cpu --batch 1,0 --context 8");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "dsa: error: --batch '1,0': '0' is not a count");
}

}  // namespace
}  // namespace dsa::test
