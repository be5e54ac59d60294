// Cache groups from the attention plan, pool lookup per layer, and sizing from a byte budget.
#include <gtest/gtest.h>

#include <string>

#include "common/testing.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/model/cache_specs.h"
#include "util.h"

using dsa::test::error_of;

namespace dsa::kv {
namespace {

using attn::CacheRole;
using test::groups_of;

int count_role(const CacheGroupSpec& g, CacheRole role) {
  int n = 0;
  for (const auto& p : g.pools) n += p.role == role;
  return n;
}

TEST(CacheGroups, DeepseekV4FlashAt256) {
  auto config = model::builtin_model_config("deepseek-v4-flash");
  int csa = 0, hca = 0;
  for (int r : config.compress_ratios) (r == 4 ? csa : r == 128 ? hca : r) += 1;
  ASSERT_EQ(csa, 21);  // docs/model-reference.md §1: [0, 0, 4, 128, ..., 4]
  ASSERT_EQ(hca, 20);
  auto g = groups_of(config, 256);
  ASSERT_EQ(g.size(), 3u);
  // swa: every layer (43 main + 1 MTP), pages of 256 tokens, window 128, 2 live pages.
  EXPECT_EQ(g[0].name, "swa");
  EXPECT_EQ(g[0].ratio, 1);
  EXPECT_EQ(g[0].page_size, 256);
  EXPECT_EQ(g[0].window, 128);
  EXPECT_EQ(g[0].max_live_pages, 2);
  EXPECT_EQ(count_role(g[0], CacheRole::SlidingWindow), 44);
  EXPECT_EQ(g[0].pools.size(), 44u);
  EXPECT_EQ(g[0].pools[0].page_bytes, kv::model1::page_bytes(256));
  EXPECT_EQ(g[0].pools[0].layout, "fp8_model1");
  // c4: CSA compressed + CSA indexer keys share one block table (64 entries per page).
  EXPECT_EQ(g[1].name, "c4");
  EXPECT_EQ(g[1].ratio, 4);
  EXPECT_EQ(g[1].page_size, 64);
  EXPECT_EQ(g[1].window, 0);
  EXPECT_EQ(count_role(g[1], CacheRole::Compressed), csa);
  EXPECT_EQ(count_role(g[1], CacheRole::IndexerKeys), csa);
  EXPECT_EQ(g[1].page_bytes(), csa * (kv::model1::page_bytes(64) + kv::indexer::page_bytes(64)));
  // c128: HCA compressed, 2 entries per page.
  EXPECT_EQ(g[2].name, "c128");
  EXPECT_EQ(g[2].page_size, 2);
  EXPECT_EQ(count_role(g[2], CacheRole::Compressed), hca);
  // Layer 2 is the first CSA layer: its pools are in c4, layer 3 (HCA) in c128.
  EXPECT_EQ(g[1].pools[0].layer, 2);
  EXPECT_EQ(g[2].pools[0].layer, 3);
}

TEST(CacheGroups, Glm51SharedIndexerLayersHaveNoKeys) {
  auto g = groups_of(model::builtin_model_config("glm-5.1"), 64);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].name, "tokens");
  EXPECT_EQ(g[0].page_size, 64);
  EXPECT_EQ(count_role(g[0], CacheRole::Latent), 79);
  EXPECT_EQ(count_role(g[0], CacheRole::IndexerKeys), 79);
  EXPECT_EQ(g[0].pools[0].page_bytes, kv::ds_mla::page_bytes(64));

  auto tiny = test::tiny_glm({"full", "shared", "shared", "full"});
  auto t = groups_of(tiny, 64);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(count_role(t[0], CacheRole::Latent), 5);
  std::vector<int> idx_layers;
  for (const auto& p : t[0].pools)
    if (p.role == CacheRole::IndexerKeys) idx_layers.push_back(p.layer);
  EXPECT_EQ(idx_layers, (std::vector<int>{0, 3, 4}));  // full layers + the MTP layer
}

TEST(CacheGroups, PoolsPerLayer) {
  auto config = test::tiny_v4({0, 4, 128, 4});
  KvManagerOptions opt;
  opt.num_blocks = 3;
  opt.window_pages = 4;
  auto kv = KvManager(test::reqs_of(config, 256), opt);
  ASSERT_EQ(kv.groups().size(), 3u);
  EXPECT_EQ(kv.pools().size(), 5u + 2 * 2 + 1);
  const KvPool& swa = kv.pool(4, CacheRole::SlidingWindow);  // the MTP layer
  EXPECT_EQ(swa.group, test::group_index(kv, "swa"));
  EXPECT_EQ(swa.num_pages, 4);
  EXPECT_EQ(swa.data.nbytes(), 4 * kv::model1::page_bytes(256));
  EXPECT_EQ(swa.data.dtype(), DType::U8);
  const KvPool& idx = kv.pool(3, CacheRole::IndexerKeys);
  EXPECT_EQ(idx.group, test::group_index(kv, "c4"));
  EXPECT_EQ(idx.page_size, 64);
  EXPECT_EQ(idx.data.nbytes(), 3 * kv::indexer::page_bytes(64));
  EXPECT_EQ(kv.pool(2, CacheRole::Compressed).page_size, 2);
  EXPECT_EQ(kv.find_pool(0, CacheRole::Compressed), nullptr);
  EXPECT_EQ(kv.find_pool(7, CacheRole::SlidingWindow), nullptr);
  EXPECT_EQ(error_of([&] { kv.pool(2, CacheRole::IndexerKeys); }), "KV manager: layer 2 has no indexer cache");
  size_t sum = 0;
  for (const auto& p : kv.pools()) sum += p.data.nbytes();
  EXPECT_EQ(kv.total_bytes(), sum);
  EXPECT_NE(kv.summary().find("c128: 1 pools, ratio 128, 2 entries/page, 3 pages x 1728 B"), std::string::npos) << kv.summary();
}

TEST(CacheGroups, BudgetBytesSplit) {
  auto config = test::tiny_v4({0, 4, 128, 4});
  auto groups = groups_of(config, 256);
  KvManagerOptions opt;
  opt.max_requests = 4;
  opt.max_step_tokens = 512;
  const int64_t window = window_group_pages(groups[0], 4, 512);
  EXPECT_EQ(window, (512 + 4 * 126) / 256 + 8);
  const size_t window_bytes = window * groups[0].page_bytes();
  const size_t block_bytes = groups[1].page_bytes() + groups[2].page_bytes();
  opt.budget_bytes = window_bytes + 10 * block_bytes + block_bytes / 2;
  KvManager kv(test::reqs_of(groups, 256), opt);
  EXPECT_EQ(kv.num_pages(0), window);
  EXPECT_EQ(kv.num_pages(1), 10);
  EXPECT_EQ(kv.num_pages(2), 10);
  EXPECT_LE(kv.total_bytes(), opt.budget_bytes);

  opt.budget_bytes = window_bytes + block_bytes - 1;
  EXPECT_NE(error_of([&] { KvManager k(test::reqs_of(groups, 256), opt); }).find("is too small: the sliding-window caches and state slots take"),
            std::string::npos);
  opt.budget_bytes = 0;
  EXPECT_EQ(error_of([&] { KvManager k(test::reqs_of(groups, 256), opt); }),
            "KV manager: give exactly one of num_blocks (0) and budget_bytes (0)");
  opt.num_blocks = 2;
  opt.max_requests = 0;
  EXPECT_EQ(error_of([&] { KvManager k(test::reqs_of(groups, 256), opt); }),
            "KV manager: max_requests = 0 (must be > 0 to size the 'swa' window cache)");
  // GLM has no window: only the block count matters.
  auto glm = groups_of(test::tiny_glm({"full", "shared"}), 64);
  KvManagerOptions g;
  g.budget_bytes = 5 * glm[0].page_bytes() + 1;
  EXPECT_EQ(KvManager(test::reqs_of(glm, 64), g).num_pages(0), 5);
}

TEST(CacheGroups, SlotRangeAndConfigMismatch) {
  auto groups = groups_of(test::tiny_glm({"full"}), 64);
  KvManagerOptions opt;
  opt.num_blocks = (int64_t{1} << 31) / 64;  // 2^31 slots: one too many
  EXPECT_EQ(error_of([&] { KvManager k(test::reqs_of(groups, 64), opt); }),
            "KV manager: group 'tokens' would hold 33554432 pages x 64 entries: slots must stay below 2^31");

  // A plan made for another config does not fit.
  auto config = test::tiny_v4({0, 4});
  auto plan = test::cpu_plan(test::tiny_v4({0, 4, 4}), 64);
  EXPECT_EQ(error_of([&] { model::kv_cache_groups(config, plan); }),
            "KV caches of tiny-v4: the plan counts 2 csa swa caches but the config's layers give 1");
  auto hca_config = test::tiny_v4({0, 128});
  EXPECT_EQ(error_of([&] { model::kv_cache_groups(hca_config, plan); }),
            "KV caches of tiny-v4: the attention plan has no hca layer type");
}

}  // namespace
}  // namespace dsa::kv
