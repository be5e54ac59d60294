#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/testing.h"
#include "dsa/model/checkpoint.h"
#include "loader_test_util.h"

using namespace dsa;
using dsa::test::error_of;

TEST(Checkpoint, ShardedRoundTrip) {
  test::Rng rng;
  test::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> ts;
  for (int i = 0; i < 10; ++i) ts.emplace_back("t" + std::to_string(i), test::random_f32({100 + i}, rng));
  // ~400 bytes per tensor, 1000-byte shards: several files.
  auto shards = write_sharded_checkpoint(dir.str(), ts, 1000);
  EXPECT_GT(shards.size(), 2u);
  Checkpoint c = Checkpoint::open(dir.str());
  EXPECT_EQ(c.size(), ts.size());
  EXPECT_EQ(c.files().size(), shards.size());
  EXPECT_TRUE(c.unindexed().empty());
  uint64_t total = 0;
  for (const auto& [n, t] : ts) {
    Tensor r = c.get(n);
    ASSERT_EQ(r.shape(), t.shape());
    EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << n;
    total += t.nbytes();
  }
  EXPECT_EQ(c.total_bytes(), total);
  std::ifstream idx(dir.file("model.safetensors.index.json"));
  nlohmann::json j = nlohmann::json::parse(idx);
  EXPECT_EQ(j["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(j["weight_map"].size(), ts.size());
  EXPECT_HAS(error_of([&] { c.get("absent"); }), "absent");
}

TEST(Checkpoint, SingleFileAndDirectoryOfFiles) {
  test::Rng rng;
  test::TempDir dir;
  write_safetensors(dir.file("model.safetensors"), {{"a", test::random_f32({3}, rng)}});
  EXPECT_EQ(Checkpoint::open(dir.str()).names(), std::vector<std::string>{"a"});
  EXPECT_EQ(Checkpoint::open(dir.file("model.safetensors")).size(), 1u);

  test::TempDir d2;
  write_safetensors(d2.file("x.safetensors"), {{"a", test::random_f32({3}, rng)}});
  write_safetensors(d2.file("y.safetensors"), {{"b", test::random_f32({3}, rng)}});
  EXPECT_EQ(Checkpoint::open(d2.str()).size(), 2u);
  write_safetensors(d2.file("z.safetensors"), {{"b", test::random_f32({3}, rng)}});
  std::string e = error_of([&] { Checkpoint::open(d2.str()); });
  EXPECT_HAS(e, "'b'");
  EXPECT_HAS(e, "y.safetensors");
  EXPECT_HAS(e, "z.safetensors");

  test::TempDir empty;
  EXPECT_HAS(error_of([&] { Checkpoint::open(empty.str()); }), "no model.safetensors");
  EXPECT_HAS(error_of([&] { Checkpoint::open(empty.file("nope")); }), "does not exist");
}

TEST(Checkpoint, BadIndexErrorsNameIndexTensorAndFile) {
  test::Rng rng;
  test::TempDir dir;
  write_safetensors(dir.file("s1.safetensors"), {{"a", test::random_f32({3}, rng)}, {"extra", test::random_f32({1}, rng)}});
  auto index = [&](const std::string& body) { test::write_file(dir.file("model.safetensors.index.json"), body); };

  index(R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  std::string e = error_of([&] { Checkpoint::open(dir.str()); });
  EXPECT_HAS(e, "'b'");
  EXPECT_HAS(e, "s1.safetensors");
  EXPECT_HAS(e, "does not contain");

  index(R"({"weight_map": {"a": "s2.safetensors"}})");
  e = error_of([&] { Checkpoint::open(dir.str()); });
  EXPECT_HAS(e, "s2.safetensors");
  EXPECT_HAS(e, "does not exist");

  index(R"({"weight_map": {"a": "../s1.safetensors"}})");
  EXPECT_HAS(error_of([&] { Checkpoint::open(dir.str()); }), "not a plain file name");

  index(R"({"weight_map": {"a": 3}})");
  EXPECT_HAS(error_of([&] { Checkpoint::open(dir.str()); }), "'a'");

  index(R"({"metadata": {}})");
  EXPECT_HAS(error_of([&] { Checkpoint::open(dir.str()); }), "weight_map");

  index(R"({"weight_map": )");
  EXPECT_HAS(error_of([&] { Checkpoint::open(dir.str()); }), "not valid JSON");

  // Tensors in a shard but not in the index stay visible and are reported.
  index(R"({"weight_map": {"a": "s1.safetensors"}})");
  Checkpoint c = Checkpoint::open(dir.str());
  EXPECT_EQ(c.unindexed(), std::vector<std::string>{"extra"});
  EXPECT_TRUE(c.has("extra"));
}
