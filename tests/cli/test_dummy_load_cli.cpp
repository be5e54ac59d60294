// `--load-format dummy` through the command line: `dsa generate` and `dsa check-model` run a
// model from a directory holding only config.json, `dsa bench decode` keeps the older
// written-checkpoint path under --load-format safetensors, and bad values end with a
// "dsa: error:" saying what to give instead.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/cli_run.h"
#include "dsa/model/checkpoint_tiny.h"

namespace dsa::test {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// The config.json of the tiny DeepSeek-V4 model, alone in a fresh directory.
struct ConfigOnlyDir {
  fs::path path;
  ConfigOnlyDir() {
    path = fs::temp_directory_path() / ("dsa_cli_dummy_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
    std::ofstream(path / "config.json") << deepseek_v4_config_json(tiny_deepseek_v4_dims(), 4, 128).dump(2);
  }
  ~ConfigOnlyDir() { fs::remove_all(path); }
};

TEST(DummyLoadCli, GenerateFromConfigOnly) {
  DSA_REQUIRE_DSA_BINARY();
  ConfigOnlyDir d;
  const CliResult r = run_dsa("generate --model " + d.path.string() + " --load-format dummy --prompt-ids 1,2,3 --max-tokens 3");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "outputs are meaningless");
  EXPECT_HAS(r.out, "ids: ");
  // The same directory without --load-format dummy: no weights to load.
  const CliResult n = run_dsa("generate --model " + d.path.string() + " --prompt-ids 1,2,3 --max-tokens 1");
  EXPECT_EQ(n.rc, 1) << n.out;
}

TEST(DummyLoadCli, CheckModelScansDummyWeights) {
  DSA_REQUIRE_DSA_BINARY();
  ConfigOnlyDir d;
  const CliResult r = run_dsa("check-model --model " + d.path.string() + " --load-format dummy --no-progress");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "tensors");
}

TEST(DummyLoadCli, BadValuesAreErrors) {
  DSA_REQUIRE_DSA_BINARY();
  ConfigOnlyDir d;
  CliResult r = run_dsa("generate --model " + d.path.string() + " --load-format pt --prompt-ids 1 --max-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "dsa: error: --load-format 'pt': expected auto, safetensors or dummy");
  r = run_dsa("generate --model deepseek-v4-flash --prompt-ids 1 --max-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "add --load-format dummy");
  r = run_dsa("generate --model " + (d.path / "none").string() + " --load-format dummy --prompt-ids 1 --max-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "is neither a built-in");
  fs::remove(d.path / "config.json");
  r = run_dsa("check-model --model " + d.path.string() + " --load-format dummy");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "has no config.json");
}

TEST(DummyLoadCli, BenchDecodeBothPaths) {
  DSA_REQUIRE_DSA_BINARY();
  CliResult r = run_dsa("bench decode --preset tiny-v4 --on cpu --batch 1 --context 9 --quick --graphs off");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "no checkpoint written");
  r = run_dsa("bench decode --preset tiny-v4 --load-format safetensors --on cpu --batch 1 --context 9 --quick --graphs off");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "writing a tiny-v4 checkpoint");
}

}  // namespace
}  // namespace dsa::test
