// indexer_scores_paged (ops/indexer/indexer.h): scores read straight from a paged FP8 indexer key
// cache, for every request of a step in one call. The reference is the per-request form: gather
// and dequantize each request's keys (kv_gather) and score them with indexer_scores. Pages are
// shuffled, one block-table entry is missing (-1: its entries score -inf), requests differ in
// length and ratio-4 visibility cuts entries mid-page. CUDA must match the CPU within float
// accumulation error and write every score.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/common/indexer_rows.h"
#include "dsa/ops/indexer/indexer.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

struct Problem {
  Tensor cache, block_table, token_req, q, weights, positions;
  int page = 16;
  int64_t N = 0;
  IndexerParams p;
  std::vector<int64_t> req_len;  // entries of each request
};

// page: entries per page (16; 2 takes the CUDA kernel's 4-byte load path). long_rows: a request
// of 700 entries (22 tiles of 32 on CUDA) instead of 77.
// tokens: per request (at positions just below what it holds, 3 apart; clamped at 0).
Problem make(int64_t ratio, int64_t H, Rng& rng, int page = 16, bool long_rows = false, int64_t tokens = 4) {
  Problem pr;
  pr.p = IndexerParams::v4(7, H, 128, ratio);
  pr.page = page;
  const int P = pr.page;
  pr.req_len = {40, 3, long_rows ? 700 : 77};  // entries per request
  const int64_t R = 3, blocks = (pr.req_len[2] + P - 1) / P + 1;
  int64_t pages = 1;  // one spare
  for (int64_t len : pr.req_len) pages += (len + P - 1) / P;
  pr.cache = Tensor::zeros({static_cast<int64_t>(formats::kv_page_bytes(formats::KvFormat::Indexer, P)) * pages}, DType::U8);
  pr.block_table = Tensor::empty({R, blocks}, DType::I32);
  std::vector<int32_t> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng.gen());
  int next = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t b = 0; b < blocks; ++b)
      pr.block_table.data<int32_t>()[r * blocks + b] = b * P < pr.req_len[r] ? perm[next++] : -1;
  pr.block_table.data<int32_t>()[0 * blocks + 1] = -1;  // request 0 lost its second page
  // Keys of every mapped slot.
  std::vector<int64_t> slots;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t e = 0; e < pr.req_len[r]; ++e) {
      const int32_t page = pr.block_table.data<int32_t>()[r * blocks + e / P];
      if (page >= 0) slots.push_back(static_cast<int64_t>(page) * P + e % P);
    }
  Tensor s = Tensor::empty({static_cast<int64_t>(slots.size())}, DType::I64);
  std::copy(slots.begin(), slots.end(), s.data<int64_t>());
  formats::kv_insert_cpu({.format = formats::KvFormat::Indexer, .page_size = P, .cache = pr.cache,
                          .kv = random_bf16({s.size(0), 128}, rng), .slots = s});
  // Tokens: a few per request at positions near the end of what it holds.
  std::vector<int32_t> treq, pos;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < tokens; ++k) {
      treq.push_back(static_cast<int32_t>(r));
      pos.push_back(static_cast<int32_t>(std::max<int64_t>(pr.req_len[r] * ratio - 1 - 3 * k, 0)));
    }
  const int64_t T = static_cast<int64_t>(treq.size());
  pr.token_req = Tensor::empty({T}, DType::I32);
  pr.positions = Tensor::empty({T}, DType::I32);
  std::copy(treq.begin(), treq.end(), pr.token_req.data<int32_t>());
  std::copy(pos.begin(), pos.end(), pr.positions.data<int32_t>());
  pr.q = random_bf16({T, H, 128}, rng);
  pr.weights = random_f32({T, H}, rng);
  pr.N = pr.req_len[2] + 3;  // more than any request holds
  return pr;
}

// Per-request form: gather the request's keys (missing pages -> zero rows, masked below) and
// score them densely.
Tensor reference(const Problem& pr) {
  const int64_t T = pr.q.size(0), blocks = pr.block_table.size(1);
  Tensor out = Tensor::empty({T, pr.N}, DType::F32);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t r = pr.token_req.data<int32_t>()[t];
    Tensor slots = Tensor::empty({pr.N}, DType::I64);
    for (int64_t e = 0; e < pr.N; ++e) {
      const int64_t b = e / pr.page;
      const int32_t page = b < blocks ? pr.block_table.data<int32_t>()[r * blocks + b] : -1;
      slots.data<int64_t>()[e] = page < 0 ? -1 : static_cast<int64_t>(page) * pr.page + e % pr.page;
    }
    Tensor keys = Tensor::empty({pr.N, 128}, DType::F32);
    formats::kv_gather_cpu({.format = formats::KvFormat::Indexer, .page_size = pr.page, .cache = pr.cache,
                            .slots = slots, .out = keys});
    Tensor row = out.slice(0, t, t + 1);
    indexer_scores(pr.q.slice(0, t, t + 1), keys, pr.weights.slice(0, t, t + 1), pr.positions.slice(0, t, t + 1),
                   pr.p, row);
    for (int64_t e = 0; e < pr.N; ++e)
      if (slots.data<int64_t>()[e] < 0) row.data<float>()[e] = -INFINITY;
  }
  return out;
}

void expect_scores(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  const Tensor g = got.to(Device::cpu());
  ASSERT_EQ(g.shape(), want.shape());
  for (int64_t i = 0; i < g.numel(); ++i) {
    const float a = g.data<float>()[i], b = want.data<float>()[i];
    if (std::isinf(b)) {
      ASSERT_TRUE(std::isinf(a) && a < 0) << what << ": element " << i << " should be -inf, got " << a;
      continue;
    }
    ASSERT_TRUE(std::isfinite(a)) << what << ": element " << i << " is " << a;
    ASSERT_LE(std::abs(a - b), tol * (1 + std::abs(b))) << what << ": element " << i << ": " << a << " vs " << b;
  }
}

TEST(ModelopsIndexerPaged, CpuEqualsPerRequestGatherForm) {
  Rng rng;
  for (int64_t ratio : {1, 4})
    for (int64_t H : {4, 64}) {
      Problem pr = make(ratio, H, rng);
      Tensor scores = Tensor::empty({pr.q.size(0), pr.N}, DType::F32);
      poison(scores);
      indexer_scores_paged(pr.q, {pr.cache, pr.page, pr.block_table, pr.token_req}, pr.weights, pr.positions, pr.p,
                           scores);
      expect_scores(scores, reference(pr), 1e-6, fmt::format("cpu ratio {} heads {}", ratio, H));
    }
}

// Head counts on both sides of the kernel's heads-per-warp steps (8 warps x 1, 2, 4, 8), both
// load paths (pages of 16 and 2 entries), one tile and many.
TEST(ModelopsIndexerPaged, CudaMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device g = Device::cuda(0);
  struct Case {
    int64_t H;
    int page;
    bool long_rows;
  };
  const Case cases[] = {{1, 16, false}, {5, 16, false}, {9, 2, false}, {17, 16, true},
                        {32, 16, false}, {33, 2, true}, {64, 16, true}};
  for (int64_t ratio : {1, 4})
    for (const Case& c : cases) {
      const int64_t H = c.H;
      Problem pr = make(ratio, H, rng, c.page, c.long_rows);
      Tensor want = Tensor::empty({pr.q.size(0), pr.N}, DType::F32);
      indexer_scores_paged(pr.q, {pr.cache, pr.page, pr.block_table, pr.token_req}, pr.weights, pr.positions, pr.p,
                           want);
      Tensor got = Tensor::empty({pr.q.size(0), pr.N}, DType::F32, g);
      poison(got);
      indexer_scores_paged(pr.q.to(g), {pr.cache.to(g), pr.page, pr.block_table.to(g), pr.token_req.to(g)},
                           pr.weights.to(g), pr.positions.to(g), pr.p, got);
      expect_scores(got, want, 1e-4,
                    fmt::format("cuda ratio {} heads {} page {} entries {}", ratio, H, c.page, pr.N));
    }
}

// Many tokens over long rows: the CUDA launcher gives each CTA several tiles of entries (450
// tokens x 22 tiles of 32), as in a long prefill.
TEST(ModelopsIndexerPaged, CudaManyTokensMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng(8);
  const Device g = Device::cuda(0);
  Problem pr = make(4, 8, rng, 16, true, 150);
  Tensor want = Tensor::empty({pr.q.size(0), pr.N}, DType::F32);
  indexer_scores_paged(pr.q, {pr.cache, pr.page, pr.block_table, pr.token_req}, pr.weights, pr.positions, pr.p, want);
  Tensor got = Tensor::empty({pr.q.size(0), pr.N}, DType::F32, g);
  poison(got);
  indexer_scores_paged(pr.q.to(g), {pr.cache.to(g), pr.page, pr.block_table.to(g), pr.token_req.to(g)},
                       pr.weights.to(g), pr.positions.to(g), pr.p, got);
  expect_scores(got, want, 1e-4, fmt::format("cuda {} tokens, {} entries", pr.q.size(0), pr.N));
}

// model::paged_indexer_topk cuts the step's rows into chunks whose scores fit a byte budget; any
// budget (one row per chunk, a ragged last chunk, all rows at once) gives the same top-k, on the
// CPU and on CUDA.
void expect_chunked_topk_equal(Device dev) {
  Rng rng(21);
  for (int64_t ratio : {1, 4}) {
    Problem pr = make(ratio, 8, rng);
    const int64_t T = pr.q.size(0), k = pr.p.topk;
    const ops::PagedIndexerKeys keys{pr.cache.to(dev), pr.page, pr.block_table.to(dev), pr.token_req.to(dev)};
    auto run = [&](int64_t budget) {
      Tensor local = Tensor::empty({T, k}, DType::I32, dev);
      local.fill_bytes(0x7F);  // not -1 (poison's bytes): an unwritten index must show
      model::paged_indexer_topk(pr.q.to(dev), keys, pr.weights.to(dev), pr.positions.to(dev), pr.p, pr.N, local, budget);
      return local.to(Device::cpu());
    };
    const Tensor whole = run(int64_t{1} << 30);
    bool any_entry = false;
    for (int64_t i = 0; i < whole.numel(); ++i) any_entry |= whole.data<int32_t>()[i] >= 0;
    ASSERT_TRUE(any_entry) << "the problem must select entries";
    for (int64_t rows : {int64_t{1}, int64_t{5}, T - 1}) {
      const Tensor got = run(rows * pr.N * 4);
      for (int64_t i = 0; i < whole.numel(); ++i)
        ASSERT_EQ(got.data<int32_t>()[i], whole.data<int32_t>()[i])
            << dev.str() << " ratio " << ratio << " rows per chunk " << rows << " element " << i;
    }
    Tensor none = Tensor::empty({T, k}, DType::I32, dev);
    none.fill_bytes(0x7F);
    model::paged_indexer_topk(pr.q.to(dev), keys, pr.weights.to(dev), pr.positions.to(dev), pr.p, 0, none);
    const Tensor nh = none.to(Device::cpu());
    for (int64_t i = 0; i < nh.numel(); ++i) ASSERT_EQ(nh.data<int32_t>()[i], -1) << "N = 0 leaves no entry";
  }
}

TEST(ModelopsIndexerPaged, ChunkedRowsEqualOnePass) { expect_chunked_topk_equal(Device::cpu()); }

TEST(ModelopsIndexerPaged, CudaChunkedRowsEqualOnePass) {
  DSA_REQUIRE_CUDA();
  expect_chunked_topk_equal(Device::cuda(0));
}

TEST(ModelopsIndexerPaged, RejectsBadArguments) {
  Rng rng(9);
  Problem pr = make(4, 4, rng);
  Tensor scores = Tensor::empty({pr.q.size(0), pr.N}, DType::F32);
  PagedIndexerKeys k{pr.cache, pr.page, pr.block_table, pr.token_req};
  Tensor bad_q = random_bf16({pr.q.size(0), 4, 64}, rng);
  EXPECT_NE(error_of([&] { indexer_scores_paged(bad_q, k, pr.weights, pr.positions, pr.p, scores); }).find("[T][H][128]"),
            std::string::npos);
  Tensor req = pr.token_req.contiguous();
  Tensor wrong = Tensor::empty(req.shape(), DType::I32);
  std::copy(req.data<int32_t>(), req.data<int32_t>() + req.numel(), wrong.data<int32_t>());
  wrong.data<int32_t>()[0] = 9;
  k.token_req = wrong;
  EXPECT_NE(error_of([&] { indexer_scores_paged(pr.q, k, pr.weights, pr.positions, pr.p, scores); })
                .find("token 0 has request row 9"),
            std::string::npos);
}

}  // namespace
