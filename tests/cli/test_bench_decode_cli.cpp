// `dsa bench decode` on the CPU with the tiny DeepSeek-V4 preset: several contexts in one run
// (K suffixes) give one row set per context x batch, and bad --context / --batch lists end with a
// "dsa: error:" naming the item, exit code 1. --speculative-tokens on the tiny V4 and GLM
// presets: per batch and N the JSON has the verification of B x (N + 1) tokens, the draft steps
// (B x (N + 1) tokens, then B), the round with every draft accepted and its speed-ups, next to
// N = 0, all with positive times; bad counts and a checkpoint without MTP layer are clean errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

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

// The row whose name starts with `prefix` (exactly one), or null.
const nlohmann::json* row(const nlohmann::json& j, const std::string& prefix) {
  const nlohmann::json* found = nullptr;
  for (const nlohmann::json& r : j.at("rows"))
    if (r.at("name").get<std::string>().rfind(prefix, 0) == 0) {
      EXPECT_EQ(found, nullptr) << "two rows named " << prefix << "...";
      found = &r;
    }
  EXPECT_NE(found, nullptr) << "no row named " << prefix << "...\n" << j.dump(1);
  return found;
}

// A positive time and the token count of a runner-call row.
void expect_call(const nlohmann::json& j, const std::string& prefix, int64_t tokens) {
  const nlohmann::json* r = row(j, prefix);
  if (r == nullptr) return;
  EXPECT_GT(r->at("us").get<double>(), 0) << prefix;
  EXPECT_GT(r->at("extra").at("wall_us").get<double>(), 0) << prefix;
  EXPECT_EQ(r->at("extra").at("tokens").get<int64_t>(), tokens) << prefix;
}

TEST(BenchDecodeCli, SpeculativeRowsOnTinyModels) {
  DSA_REQUIRE_DSA_BINARY();
  for (const char* preset : {"tiny-v4", "tiny-glm"}) {
    const std::string json =
        (std::filesystem::temp_directory_path() / ("dsa_bench_spec_" + std::to_string(::getpid()) + ".json")).string();
    const CliResult r = run_dsa(std::string("bench decode --preset ") + preset +
                                " --on cpu --batch 1,3 --context 9 --quick --speculative-tokens 2,1 --json " + json);
    ASSERT_EQ(r.rc, 0) << preset << "\n" << r.out;
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(json));
    std::filesystem::remove(json);
    for (const int64_t B : {1, 3}) {
      const std::string b = "B=" + std::to_string(B);
      const nlohmann::json* n0 = row(j, b + " N=0 step (");
      ASSERT_NE(n0, nullptr) << preset;
      EXPECT_GT(n0->at("us").get<double>(), 0);
      for (const int64_t N : {1, 2}) {
        const std::string p = b + " N=" + std::to_string(N) + " ";
        SCOPED_TRACE(std::string(preset) + " " + p);
        expect_call(j, p + "verify step (", B * (N + 1));
        expect_call(j, p + "draft step 1", B * (N + 1));  // the MTP cache catches up with N + 1 positions
        if (N == 2) expect_call(j, p + "draft steps 2-2", B);
        const nlohmann::json* round = row(j, p + "round (verify + " + std::to_string(N) + " drafts)");
        ASSERT_NE(round, nullptr);
        const nlohmann::json& x = round->at("extra");
        EXPECT_GT(round->at("us").get<double>(), 0);
        EXPECT_GT(x.at("wall_us").get<double>(), 0);
        EXPECT_EQ(x.at("tokens").get<double>(), static_cast<double>(B * (N + 1)));  // every draft accepted
        // Higher acceptance, more tokens per round of the same time.
        EXPECT_GT(x.at("speedup_a0.6").get<double>(), 0);
        EXPECT_GT(x.at("speedup_a0.9").get<double>(), x.at("speedup_a0.6").get<double>());
        EXPECT_GT(x.at("x_N0").get<double>(), 0);
      }
    }
  }
}

TEST(BenchDecodeCli, BadSpeculativeTokensAreErrors) {
  DSA_REQUIRE_DSA_BINARY();
  const std::string base = "bench decode --preset tiny-v4 --on cpu --batch 1 --context 8 --quick --speculative-tokens ";
  for (const char* bad : {"-1", "65", "1,,2", "x"}) {
    const CliResult r = run_dsa(base + "'" + bad + "'");
    EXPECT_EQ(r.rc, 1) << bad << ": " << r.out;
    EXPECT_HAS(r.out, "dsa: error: --speculative-tokens '" + std::string(bad) + "'");
  }
  // A checkpoint without its MTP layer (what transformers saves).
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dsa_bench_no_mtp_" + std::to_string(::getpid()))).string();
  ASSERT_EQ(run_dsa("make-tiny --arch deepseek_v4 --variant transformers --no-tokenizer --out " + dir).rc, 0);
  const CliResult r =
      run_dsa("bench decode --model " + dir + " --on cpu --batch 1 --context 8 --quick --speculative-tokens 1");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "dsa: error: bench decode: --speculative-tokens 1 needs an MTP layer");
}

}  // namespace
}  // namespace dsa::test
