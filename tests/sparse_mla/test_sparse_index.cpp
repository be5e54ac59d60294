// Index conversions (docs/kv-cache.md): hand-checked CPU cases and CUDA vs CPU on random
// inputs.
#include <vector>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::test {
namespace {

Tensor i32(const Shape& shape, std::vector<int32_t> v) {
  Tensor t = Tensor::empty(shape, DType::I32);
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}
std::vector<int32_t> vec(const Tensor& t0) {
  Tensor t = t0.to(Device::cpu());
  return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
}

TEST(SparseIndex, TopkToSlotsByHand) {
  // 2 requests, page 4, 3 blocks each; request 1's block 2 is unmapped.
  ops::TopkToSlotsParams p;
  p.blocks.table = i32({2, 3}, {5, 2, 7, 1, 0, -1});
  p.blocks.page_size = 4;
  p.blocks.num_pages = 7;  // page 7 is out of range
  p.local = i32({2, 5}, {0, 5, 9, -1, 12, 3, 4, 8, -3, 1});
  p.token_req = i32({2}, {0, 1});
  p.slots = Tensor::empty({2, 5}, DType::I32);
  p.valid_counts = Tensor::empty({2}, DType::I32);
  ops::topk_to_global_slots(p);
  // token 0 (req 0): 0 -> 5*4+0=20, 5 -> 2*4+1=9, 9 -> page 7 (>= num_pages) -1, -1, 12 -> block 3 (past width) -1
  // token 1 (req 1): 3 -> 1*4+3=7, 4 -> 0*4+0=0, 8 -> block 2 unmapped -1, -3 -> -1, 1 -> 5
  EXPECT_EQ(vec(p.slots), (std::vector<int32_t>{20, 9, -1, -1, -1, 7, 0, -1, -1, 5}));
  EXPECT_EQ(vec(p.valid_counts), (std::vector<int32_t>{2, 3}));
}

TEST(SparseIndex, HcaVisibleByHand) {
  ops::PositionSlotsParams p;
  p.blocks.table = i32({1, 4}, {3, 0, 2, 1});
  p.blocks.page_size = 2;  // HCA: 2 compressed entries per page
  p.positions = i32({4}, {0, 126, 127, 1000});  // visible: 0, 0, 1, 7 entries (ratio 128)
  p.token_req = i32({4}, {0, 0, 0, 0});
  p.slots = Tensor::empty({4, 6}, DType::I32);
  p.valid_counts = Tensor::empty({4}, DType::I32);
  ops::hca_visible_slots(p, 128);
  std::vector<int32_t> want = {-1, -1, -1, -1, -1, -1,  //
                               -1, -1, -1, -1, -1, -1,  //
                               6,  -1, -1, -1, -1, -1,  //
                               6,  7,  0,  1,  4,  5};  // 7 visible, row width 6: first 6
  EXPECT_EQ(vec(p.slots), want);
  EXPECT_EQ(vec(p.valid_counts), (std::vector<int32_t>{0, 0, 1, 6}));
}

TEST(SparseIndex, SlidingWindowByHand) {
  ops::PositionSlotsParams p;
  p.blocks.table = i32({2, 2}, {1, 0, 3, 2});
  p.blocks.page_size = 4;
  p.positions = i32({3}, {2, 6, 7});
  p.token_req = i32({3}, {0, 1, 0});
  p.slots = Tensor::empty({3, 4}, DType::I32);  // window 4
  p.valid_counts = Tensor::empty({3}, DType::I32);
  ops::swa_window_slots(p);
  // t0 req0 pos 2: positions 0..2 -> 4,5,6; t1 req1 pos 6: 3..6 -> 15, 8, 9, 10; t2 req0 pos 7: 4..7 -> 0..3
  EXPECT_EQ(vec(p.slots), (std::vector<int32_t>{4, 5, 6, -1, 15, 8, 9, 10, 0, 1, 2, 3}));
  EXPECT_EQ(vec(p.valid_counts), (std::vector<int32_t>{3, 4, 4}));
}

TEST(SparseIndex, RejectsBadShapes) {
  ops::TopkToSlotsParams p;
  p.blocks.table = i32({1, 1}, {0});
  p.local = i32({2, 3}, {0, 0, 0, 0, 0, 0});
  p.token_req = i32({2}, {0, 0});
  p.slots = Tensor::empty({2, 4}, DType::I32);
  EXPECT_THROW(ops::topk_to_global_slots(p), Error);
  p.slots = Tensor::empty({2, 3}, DType::I32);
  p.blocks.page_size = 0;
  EXPECT_THROW(ops::topk_to_global_slots(p), Error);
}

struct RandomTables {
  Tensor table, token_req, positions;
  int page = 0;
  int64_t num_pages = 0;
};
RandomTables random_tables(Rng& rng, int64_t T, int page) {
  RandomTables r;
  const int R = 3, MB = 10;
  r.page = page;
  r.num_pages = 25;
  r.table = Tensor::empty({R, MB}, DType::I32);
  for (int64_t i = 0; i < r.table.numel(); ++i) r.table.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(-1, 27));
  r.token_req = Tensor::empty({T}, DType::I32);
  r.positions = Tensor::empty({T}, DType::I32);
  for (int64_t t = 0; t < T; ++t) {
    r.token_req.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(-1, R));  // includes bad requests
    r.positions.data<int32_t>()[t] = static_cast<int32_t>(rng.randint(-1, MB * page + 5));
  }
  return r;
}

TEST(SparseIndexCuda, MatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device dev = Device::cuda(0);
  for (int page : {2, 64}) {
    const int64_t T = 77, K = 130;
    RandomTables r = random_tables(rng, T, page);
    // top-k
    ops::TopkToSlotsParams c;
    c.local = Tensor::empty({T, K}, DType::I32);
    for (int64_t i = 0; i < c.local.numel(); ++i)
      c.local.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(-2, 10 * page + 3));
    c.token_req = r.token_req;
    c.blocks = {r.table, page, r.num_pages};
    c.slots = Tensor::empty({T, K}, DType::I32);
    c.valid_counts = Tensor::empty({T}, DType::I32);
    ops::topk_to_global_slots(c);
    ops::TopkToSlotsParams g = c;
    g.local = c.local.to(dev);
    g.token_req = c.token_req.to(dev);
    g.blocks.table = r.table.to(dev);
    g.slots = Tensor::empty({T, K}, DType::I32, dev);
    g.valid_counts = Tensor::empty({T}, DType::I32, dev);
    poison(g.slots);
    ops::topk_to_global_slots(g);
    EXPECT_EQ(vec(g.slots), vec(c.slots));
    EXPECT_EQ(vec(g.valid_counts), vec(c.valid_counts));
    // HCA and sliding window
    for (int which = 0; which < 2; ++which) {
      ops::PositionSlotsParams pc;
      pc.positions = r.positions;
      pc.token_req = r.token_req;
      pc.blocks = {r.table, page, r.num_pages};
      pc.slots = Tensor::empty({T, which ? 128 : K}, DType::I32);
      pc.valid_counts = Tensor::empty({T}, DType::I32);
      ops::PositionSlotsParams pg = pc;
      pg.positions = r.positions.to(dev);
      pg.token_req = r.token_req.to(dev);
      pg.blocks.table = r.table.to(dev);
      pg.slots = Tensor::empty(pc.slots.shape(), DType::I32, dev);
      pg.valid_counts = Tensor::empty({T}, DType::I32, dev);
      poison(pg.slots);
      if (which == 0) {
        ops::hca_visible_slots(pc, 4);
        ops::hca_visible_slots(pg, 4);
      } else {
        ops::swa_window_slots(pc);
        ops::swa_window_slots(pg);
      }
      EXPECT_EQ(vec(pg.slots), vec(pc.slots)) << (which ? "swa" : "hca");
      EXPECT_EQ(vec(pg.valid_counts), vec(pc.valid_counts)) << (which ? "swa" : "hca");
    }
  }
}

}  // namespace
}  // namespace dsa::test
