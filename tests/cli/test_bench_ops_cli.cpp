// `dsa bench mhc | norm | rope | compressor | indexer`: the per-op benchmarks of a decode step's
// small kernels. Without a CUDA device each ends with one "dsa: error:" line saying it needs one
// (exit 1, no crash); with one, `--quick --json` writes rows whose times are positive and finite
// and whose floor and anchor columns are there.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "common/testing.h"

namespace dsa::test {
namespace {

const char* const kBenches[] = {"mhc", "norm", "rope", "compressor", "indexer"};

TEST(BenchOpsCli, NeedACudaDeviceAndSaySo) {
  DSA_REQUIRE_DSA_BINARY();
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: BenchOpsCli.RunQuickOnCuda covers it";
  for (const char* b : kBenches) {
    const CliResult r = run_dsa(std::string("bench ") + b + " --quick");
    EXPECT_EQ(r.rc, 1) << b << ": " << r.out;
    EXPECT_NE(r.out.find(std::string("dsa: error: bench ") + b + " needs a CUDA"), std::string::npos) << r.out;
  }
}

TEST(BenchOpsCli, RunQuickOnCuda) {
  DSA_REQUIRE_DSA_BINARY();
  DSA_REQUIRE_CUDA();
  const auto dir = std::filesystem::temp_directory_path() / ("dsa_bench_ops_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* b : {"mhc", "norm", "rope", "compressor"}) {
    const std::string json = (dir / (std::string(b) + ".json")).string();
    const CliResult r = run_dsa(std::string("bench ") + b + " --quick --json " + json);
    ASSERT_EQ(r.rc, 0) << b << ": " << r.out;
    std::ifstream in(json);
    const nlohmann::json j = nlohmann::json::parse(in);
    ASSERT_FALSE(j.at("rows").empty()) << b;
    for (const auto& row : j.at("rows")) {
      const double us = row.at("us").get<double>();
      EXPECT_TRUE(std::isfinite(us) && us > 0) << b << " " << row.dump();
      EXPECT_GT(row.at("extra").at("floor_us").get<double>(), 0) << row.dump();
      EXPECT_GT(row.at("extra").at("min_kernel_us").get<double>(), 0) << row.dump();
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsa::test
