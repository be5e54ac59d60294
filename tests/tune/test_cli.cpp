// `dsa tune` end to end: the self-test tunes then finds everything on a second run, into the
// cache directory given by DSA_CACHE_DIR; without a GPU `--model` says there is nothing to tune.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "tune/tune_test_util.h"

using namespace dsa;
using namespace dsa::tune::test;
namespace fs = std::filesystem;

namespace {

fs::path dsa_binary() {
  if (const char* b = std::getenv("DSA_TEST_BINARY_DIR")) return fs::path(b) / "apps" / "dsa" / "dsa";
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "apps" / "dsa" / "dsa";
}

struct CliRun {
  int rc = -1;
  std::string out;  // stdout and stderr
};

CliRun run(const std::string& args, const fs::path& cache_dir) {
  std::string cmd = fmt::format("DSA_CACHE_DIR='{}' DSA_PROGRESS=0 '{}' {} 2>&1", cache_dir.string(),
                                dsa_binary().string(), args);
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST(TuneCli, SelftestTunesThenFindsEverything) {
  if (!fs::exists(dsa_binary())) GTEST_SKIP() << dsa_binary() << " not built";
  TempDir d;
  const std::string args = "tune --selftest --max-batched-tokens 64 --max-seqs 8 --warmups 1 --repeats 3";
  CliRun first = run(args, d.path);
  EXPECT_EQ(first.rc, 0) << first.out;
  EXPECT_NE(first.out.find("tuned 7 bucket(s), found 0 in the cache, 0 failed"), std::string::npos) << first.out;
  EXPECT_TRUE(fs::exists(d.path / "tuning-selftest-cpu.json"));
  CliRun second = run(args, d.path);
  EXPECT_EQ(second.rc, 0) << second.out;
  EXPECT_NE(second.out.find("tuned 0 bucket(s), found 7 in the cache, 0 failed"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("loaded 7 tuned entries"), std::string::npos) << second.out;
  CliRun forced = run(args + " --force", d.path);
  EXPECT_NE(forced.out.find("tuned 7 bucket(s), found 0"), std::string::npos) << forced.out;
}

TEST(TuneCli, WithoutAGpuThereIsNothingToTune) {
  if (!fs::exists(dsa_binary())) GTEST_SKIP() << dsa_binary() << " not built";
  if (!cuda_devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  TempDir d;
  CliRun r = run("tune --model glm-5.1", d.path);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("nothing to tune on this device"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(d.path));  // no cache file written
  CliRun bad = run("tune --model no-such-model", d.path);
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find("no-such-model"), std::string::npos) << bad.out;
  CliRun none = run("tune", d.path);
  EXPECT_EQ(none.rc, 1) << none.out;
  EXPECT_NE(none.out.find("--model NAME|DIR is required"), std::string::npos) << none.out;
}
