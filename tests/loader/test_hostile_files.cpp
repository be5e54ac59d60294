// Files that are not what they claim (issue 20): a FIFO in place of a shard, of config.json or of
// the index, and symlink loops in place of a shard or the checkpoint directory. Opening never
// blocks and never throws anything but a dsa::Error naming the path; a FIFO would block a
// plain open(2) forever, so a regression here would hang (ctest's timeout reports it).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/testing.h"
#include "dsa/core/regular_file.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/checkpoint_tiny.h"
#include "loader_test_util.h"

using namespace dsa;
namespace fs = std::filesystem;

namespace {

// A tiny GLM checkpoint in `dir`; returns the name of its first shard.
std::string tiny(const std::string& dir) {
  TinyOptions o;
  o.arch = "glm_moe_dsa";
  return shard_file_name(0, make_tiny_checkpoint(o, dir).shards);
}

void replace_with_fifo(const fs::path& p) {
  fs::remove(p);
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p;
}

}  // namespace

TEST(HostileFiles, FifoInPlaceOfShardConfigOrIndex) {
  test::TempDir dir;
  const std::string shard = tiny(dir.str());
  LoadOptions lo;
  lo.progress = false;
  const model::ModelConfig cfg = model::load_model_config(dir.str());

  replace_with_fifo(fs::path(dir.str()) / shard);
  EXPECT_EQ(error_of([&] { Checkpoint::open(dir.str()); }), dir.file(shard) + ": is a FIFO, not a regular file");
  EXPECT_HAS(error_of([&] { load_model_weights(dir.str(), cfg, lo); }), "is a FIFO, not a regular file");

  replace_with_fifo(fs::path(dir.str()) / "model.safetensors.index.json");
  EXPECT_EQ(error_of([&] { Checkpoint::open(dir.str()); }),
            dir.file("model.safetensors.index.json") + ": is a FIFO, not a regular file");

  replace_with_fifo(fs::path(dir.str()) / "config.json");
  EXPECT_EQ(error_of([&] { model::load_model_config(dir.str()); }),
            dir.file("config.json") + ": is a FIFO, not a regular file");
  EXPECT_EQ(error_of([&] { read_regular_file(dir.file("config.json"), 100); }),
            dir.file("config.json") + ": is a FIFO, not a regular file");
}

TEST(HostileFiles, SymlinkLoopsAreNamedErrors) {
  test::TempDir dir;
  const std::string shard = tiny(dir.str());
  fs::remove(fs::path(dir.str()) / shard);
  fs::create_symlink(shard, fs::path(dir.str()) / shard);  // points at itself
  EXPECT_EQ(error_of([&] { Checkpoint::open(dir.str()); }),
            dir.file(shard) + ": cannot access: Too many levels of symbolic links");
  // The checkpoint directory itself.
  fs::create_symlink("a", fs::path(dir.str()) / "b");
  fs::create_symlink("b", fs::path(dir.str()) / "a");
  EXPECT_EQ(error_of([&] { Checkpoint::open(dir.file("a")); }),
            dir.file("a") + ": cannot access: Too many levels of symbolic links");
  EXPECT_EQ(error_of([&] { model::load_model_config(dir.file("a")); }),
            dir.file("a") + ": cannot access: Too many levels of symbolic links");
  EXPECT_EQ(path_kind(dir.file("nothing-here")), PathKind::Missing);
}

TEST(HostileFiles, ReadRegularFileIsBounded) {
  test::TempDir dir;
  test::write_file(dir.file("big.json"), std::string(1000, ' '));
  EXPECT_EQ(read_regular_file(dir.file("big.json"), 1000).size(), 1000u);
  EXPECT_EQ(error_of([&] { read_regular_file(dir.file("big.json"), 999); }),
            dir.file("big.json") + ": 1000 bytes is larger than the limit of 999 bytes for this file");
  EXPECT_EQ(error_of([&] { read_regular_file(dir.str(), 999); }), dir.str() + ": is a directory, not a regular file");
}

// A config.json claiming far more experts than the checkpoint holds fails before any weight list
// of that size is built (memory and time stay bounded by the checkpoint).
TEST(HostileFiles, ConfigCountsAreCheckedAgainstTheCheckpoint) {
  test::TempDir dir;
  tiny(dir.str());
  model::ModelConfig cfg = model::load_model_config(dir.str());
  cfg.num_layers = 1000;
  cfg.indexer_types.assign(1000, "full");
  cfg.n_routed_experts = 4096;
  LoadOptions lo;
  lo.progress = false;
  const size_t present = Checkpoint::open(dir.str()).size();
  EXPECT_EQ(error_of([&] { load_model_weights(dir.str(), cfg, lo); }),
            dir.str() + ": config.json describes 1000 MoE layers of 4096 experts (12288000 expert weights), but the "
                        "checkpoint holds only " + std::to_string(present) +
                " tensors: config.json does not belong to these weights");
}
