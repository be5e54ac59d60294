// The batch metadata feeds ops/sparse_index directly: block tables, token_req and positions go in
// unchanged and the index lists that come out name exactly the slots the KV manager gave the
// entries (sliding window, all visible compressed entries, GLM top-k).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/testing.h"
#include "dsa/ops/sparse_index/sparse_index.h"
#include "util.h"

namespace dsa::kv {
namespace {

ops::BlockTable blocks_of(const GroupMetadata& g) { return ops::BlockTable{g.block_table, g.page_size, g.num_pages}; }

// Expected row: slots of request-local entries [lo, hi) in order, -1 padded to K.
std::vector<int32_t> expected_row(const GroupMetadata& g, int64_t r, int64_t lo, int64_t hi, int64_t K) {
  std::vector<int32_t> row(K, -1);
  for (int64_t i = lo; i < hi && i - lo < K; ++i) row[i - lo] = static_cast<int32_t>(test::reference_slot(g, r, i));
  return row;
}

void check_v4_step(const KvManager& kv, const BatchMetadata& m) {
  const int64_t T = m.num_tokens();
  const int32_t* req = m.token_req.data<int32_t>();
  const int32_t* pos = m.positions.data<int32_t>();
  for (size_t gi = 0; gi < kv.groups().size(); ++gi) {
    const GroupMetadata& g = m.groups[gi];
    ops::PositionSlotsParams p;
    p.positions = m.positions;
    p.token_req = m.token_req;
    p.blocks = blocks_of(g);
    const int64_t K = g.window > 0 ? g.window : std::max<int64_t>(m.max_seq_len / g.ratio, 1);
    p.slots = Tensor::empty({T, K}, DType::I32);
    p.valid_counts = Tensor::empty({T}, DType::I32);
    dsa::test::poison(p.slots);
    if (g.window > 0)
      ops::swa_window_slots(p);
    else
      ops::hca_visible_slots(p, g.ratio);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t lo = g.window > 0 ? std::max<int64_t>(pos[t] - g.window + 1, 0) : 0;
      const int64_t hi = g.window > 0 ? pos[t] + 1 : (pos[t] + 1) / g.ratio;
      auto want = expected_row(g, req[t], lo, hi, K);
      std::vector<int32_t> got(p.slots.data<int32_t>() + t * K, p.slots.data<int32_t>() + (t + 1) * K);
      ASSERT_EQ(got, want) << kv.groups()[gi].name << " token " << t << " position " << pos[t];
      ASSERT_EQ(p.valid_counts.data<int32_t>()[t], hi - lo);
      for (int64_t k = 0; k < hi - lo; ++k) ASSERT_GE(got[k], 0);
    }
  }
}

TEST(KvSparseIndex, DeepseekV4WindowAndCompressedLists) {
  KvManagerOptions opt;
  opt.num_blocks = 16;
  opt.max_requests = 3;
  opt.max_step_tokens = 1024;
  KvManager kv(test::reqs_of(test::tiny_v4({0, 4, 128, 4}), 256), opt);
  for (RequestId id : {1, 2, 3}) kv.add_request(id);
  const std::vector<std::vector<int64_t>> steps{{300, 5, 0}, {1, 700, 129}, {1, 1, 127}, {256, 1, 1}, {1, 1, 1}};
  for (const auto& s : steps) {
    Batch b;
    for (RequestId id : {3, 1, 2})
      if (s[id - 1] > 0) b.add_positions(id, kv.num_cached(id), s[id - 1]);
    auto m = kv.prepare(b);
    ASSERT_NO_FATAL_FAILURE(check_v4_step(kv, m));
  }
}

TEST(KvSparseIndex, GlmTopkToSlots) {
  dsa::test::Rng rng;
  KvManagerOptions opt;
  opt.num_blocks = 32;
  KvManager kv(test::reqs_of(test::tiny_glm({"full", "shared"}), 64), opt);
  kv.add_request(8);
  kv.add_request(9);
  kv.prepare(test::positions_batch(9, 0, 333));
  Batch b;
  b.add_positions(8, 0, 70);
  b.add_positions(9, 333, 1);
  auto m = kv.prepare(b);
  const GroupMetadata& g = m.groups[0];
  const int64_t T = m.num_tokens(), K = 16;
  ops::TopkToSlotsParams p;
  p.local = Tensor::empty({T, K}, DType::I32);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      p.local.data<int32_t>()[t * K + k] =
          static_cast<int32_t>(rng.randint(-1, m.positions.data<int32_t>()[t]));  // causal top-k, -1 = none
  p.token_req = m.token_req;
  p.blocks = blocks_of(g);
  p.slots = Tensor::empty({T, K}, DType::I32);
  dsa::test::poison(p.slots);
  ops::topk_to_global_slots(p);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int32_t i = p.local.data<int32_t>()[t * K + k];
      const int32_t s = p.slots.data<int32_t>()[t * K + k];
      ASSERT_EQ(s, test::reference_slot(g, m.token_req.data<int32_t>()[t], i));
      ASSERT_EQ(s >= 0, i >= 0);
    }
}

}  // namespace
}  // namespace dsa::kv
