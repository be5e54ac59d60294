// The pools and the metadata drive the real cache ops: rows inserted with a step's slots
// (kv_insert) read back unchanged (kv_gather through the block tables) after later steps of
// other requests, for every live entry. Catches pool geometry that kv_insert rejects, slots that
// collide across requests, and window pages reused while still live.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "common/testing.h"
#include "dsa/formats/kv_cache_ops.h"
#include "util.h"

namespace dsa::kv {
namespace {

using formats::KvFormat;

KvFormat format_of(const KvPool& p) {
  if (p.role == attn::CacheRole::IndexerKeys) return KvFormat::Indexer;
  return p.layout == "fp8_model1" ? KvFormat::Model1 : KvFormat::DsMla;
}

Tensor i64_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I64);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// Dequantized rows at `slots` of one pool.
std::vector<float> gather(const KvPool& pool, const std::vector<int64_t>& slots) {
  const int dim = formats::kv_row_dim(format_of(pool));
  formats::KvGatherParams g;
  g.format = format_of(pool);
  g.page_size = pool.page_size;
  g.cache = pool.data;
  g.slots = i64_tensor(slots);
  g.out = Tensor::empty({static_cast<int64_t>(slots.size()), dim}, DType::F32);
  dsa::test::poison(g.out);
  formats::kv_gather(g);
  return std::vector<float>(g.out.data<float>(), g.out.data<float>() + g.out.numel());
}

// Runs a schedule, inserting random rows into the given pools each step (all tokens for ratio 1
// through `slots`, compressed entries through the compact `entry_slots`), and checks after
// every step that every live entry of every request reads back what was written for it.
void run(const model::ModelConfig& config, int block, std::vector<std::pair<int, attn::CacheRole>> which,
         const std::vector<std::vector<int64_t>>& steps) {
  dsa::test::Rng rng;
  KvManagerOptions opt;
  opt.num_blocks = 64;
  opt.max_requests = 3;
  opt.max_step_tokens = 1024;
  KvManager kv(test::reqs_of(config, block), opt);
  for (RequestId id : {1, 2, 3}) kv.add_request(id);
  // (pool index, request, entry) -> dequantized row read right after its insert
  std::map<std::tuple<size_t, RequestId, int64_t>, std::vector<float>> expect;
  for (const auto& s : steps) {
    Batch b;
    for (RequestId id : {2, 3, 1})
      if (s[id - 1] > 0) b.add_positions(id, kv.num_cached(id), s[id - 1]);
    BatchMetadata m = kv.prepare(b);
    for (size_t w = 0; w < which.size(); ++w) {
      const KvPool& pool = kv.pool(which[w].first, which[w].second);
      const GroupMetadata& g = m.groups[pool.group];
      const int dim = formats::kv_row_dim(format_of(pool));
      const int64_t E = g.entry_slots.numel();
      formats::KvInsertParams ins;
      ins.format = format_of(pool);
      ins.page_size = pool.page_size;
      ins.cache = pool.data;
      ins.kv = dsa::test::random_bf16({E, dim}, rng);
      ins.slots = g.entry_slots;
      formats::kv_insert(ins);
      std::vector<int64_t> slots(g.entry_slots.data<int64_t>(), g.entry_slots.data<int64_t>() + E);
      const std::vector<float> rows = gather(pool, slots);
      for (int64_t e = 0; e < E; ++e) {
        const int32_t t = g.entry_tokens.data<int32_t>()[e];
        if (t < 0) continue;  // a row past its request's entries (slot -1: nothing written)
        const RequestId id = m.request_ids[m.token_req.data<int32_t>()[t]];
        const int64_t entry = (m.positions.data<int32_t>()[t] + 1) / g.ratio - 1;
        expect[{w, id, entry}] = std::vector<float>(rows.begin() + e * dim, rows.begin() + (e + 1) * dim);
      }
    }
    // Every live entry (held page) still reads back its own row.
    int64_t checked = 0;
    for (size_t w = 0; w < which.size(); ++w) {
      const KvPool& pool = kv.pool(which[w].first, which[w].second);
      const CacheGroupSpec& grp = kv.groups()[pool.group];
      for (RequestId id : {1, 2, 3}) {
        const auto& table = kv.block_table(id, pool.group);
        const int64_t entries = kv.num_cached(id) / grp.ratio;
        std::vector<int64_t> slots, idx;
        for (int64_t e = 0; e < entries; ++e)
          if (table[e / grp.page_size] >= 0) {
            slots.push_back(static_cast<int64_t>(table[e / grp.page_size]) * grp.page_size + e % grp.page_size);
            idx.push_back(e);
          }
        const std::vector<float> rows = gather(pool, slots);
        const int dim = formats::kv_row_dim(format_of(pool));
        for (size_t k = 0; k < idx.size(); ++k) {
          const auto& want = expect.at({w, id, idx[k]});
          ASSERT_EQ(std::memcmp(want.data(), rows.data() + k * dim, dim * sizeof(float)), 0)
              << "layer " << pool.layer << " " << attn::cache_role_name(pool.role) << " request " << id << " entry "
              << idx[k];
          ++checked;
        }
      }
    }
    ASSERT_GT(checked, 0);
  }
}

TEST(KvPools, DeepseekV4InsertAndReadBack) {
  using attn::CacheRole;
  const std::vector<std::vector<int64_t>> steps{{300, 5, 0}, {1, 513, 129}, {1, 1, 127}, {256, 1, 1},
                                                {1, 1, 1},   {64, 1, 200},  {1, 1, 1}};
  run(test::tiny_v4({0, 4, 128, 4}), 256,
      {{0, CacheRole::SlidingWindow}, {1, CacheRole::Compressed}, {1, CacheRole::IndexerKeys},
       {2, CacheRole::Compressed}, {4, CacheRole::SlidingWindow}},
      steps);
  run(test::tiny_v4({0, 4, 0}), 64, {{1, CacheRole::SlidingWindow}, {1, CacheRole::Compressed}}, steps);
}

TEST(KvPools, GlmInsertAndReadBack) {
  using attn::CacheRole;
  run(test::tiny_glm({"full", "shared"}), 64, {{0, CacheRole::Latent}, {0, CacheRole::IndexerKeys}, {1, CacheRole::Latent}},
      {{100, 1, 0}, {1, 64, 33}, {1, 1, 1}, {200, 1, 64}, {1, 1, 1}});
}

}  // namespace
}  // namespace dsa::kv
