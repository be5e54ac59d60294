// Chunked prefill and ragged batches give the same logits as one full prefill: per-request state
// (latent pages, indexer keys, cached length) carries across forwards, and requests sharing a
// batch do not see each other. The tiny FP8 checkpoint (seed 1), CPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/testing.h"
#include "dsa/engine/session.h"
#include "dsa/model/causal_lm.h"
#include "glm5_test_util.h"

using namespace dsa;

namespace {

// Every row is computed from its own token's values and the cache, so chunking changes nothing
// but the order of independent work: the CPU path is expected to be bit-identical. The bound
// leaves room for a batched kernel that regroups sums (bf16-level noise), not for real errors.
constexpr double kTol = 1e-3;

double max_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i]));
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

std::vector<int32_t> prompt(int n, uint64_t seed) {
  test::Rng rng(seed);
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng.randint(2, 501)));
  return p;
}

void append(engine::ForwardBatch& b, int64_t req, const std::vector<int32_t>& ids, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; ++t) {
    b.token_ids.push_back(ids[t]);
    b.request.push_back(req);
    b.positions.push_back(t);
  }
}

}  // namespace

TEST(Glm5Chunked, ChunkedPrefillAndRaggedBatchMatchFullPrefill) {
  auto model = model::load_causal_lm(test::glm5_tiny_dir(), Device::cpu());
  engine::Session s(*model);
  engine::Session* lm = &s;
  const int64_t V = model->config().vocab_size;
  const std::vector<int32_t> p = prompt(150, 7);  // > 2 pages of 64, > index_topk
  const int64_t T = static_cast<int64_t>(p.size());

  // Reference: one request, one full prefill.
  const kv::RequestId a = lm->add_request();
  engine::ForwardBatch full;
  append(full, a, p, 0, T);
  const Tensor ref = lm->forward(full, true);

  // Request b in chunks of 50, 14 (page boundary at 64) and 86; request c is prefilled in the
  // same forwards (ragged batches of two requests) with a shorter prompt.
  const kv::RequestId b = lm->add_request(), c = lm->add_request();
  const std::vector<int32_t> pc = prompt(40, 9);
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 50}, {50, 64}, {64, T}};
  const std::vector<std::pair<int64_t, int64_t>> chunks_c = {{0, 1}, {1, 39}, {39, 40}};
  double worst = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    engine::ForwardBatch batch;
    append(batch, c, pc, chunks_c[k].first, chunks_c[k].second);
    const int64_t off = static_cast<int64_t>(batch.token_ids.size());
    append(batch, b, p, chunks[k].first, chunks[k].second);
    const Tensor got = lm->forward(batch, true);
    const int64_t n = chunks[k].second - chunks[k].first;
    worst = std::max(worst, max_diff(got.data<float>() + off * V, ref.data<float>() + chunks[k].first * V, n * V));
  }
  // c alone in one forward equals c built up inside the ragged batches.
  const kv::RequestId c2 = lm->add_request();
  engine::ForwardBatch solo;
  append(solo, c2, pc, 0, 40);
  const Tensor c_solo = lm->forward(solo);

  // Decode a, b (and c, c2) together: a and b are the same sequence, so their rows must agree;
  // so must c's and c2's.
  double worst_decode = 0;
  int32_t next_ab = 5, next_c = 9;
  for (int step = 0; step < 4; ++step) {
    engine::ForwardBatch d{{next_ab, next_c, next_ab, next_c}, {a, c, b, c2}, {T + step, 40 + step, T + step, 40 + step}};
    const Tensor rows = lm->forward(d);
    ASSERT_EQ(rows.shape(), (Shape{4, V}));
    worst_decode = std::max(worst_decode, max_diff(rows.data<float>(), rows.data<float>() + 2 * V, V));
    worst_decode = std::max(worst_decode, max_diff(rows.data<float>() + V, rows.data<float>() + 3 * V, V));
    next_ab = static_cast<int32_t>(std::max_element(rows.data<float>(), rows.data<float>() + V) - rows.data<float>());
    next_c = static_cast<int32_t>(std::max_element(rows.data<float>() + V, rows.data<float>() + 2 * V) -
                                  (rows.data<float>() + V));
  }
  std::printf("[glm5 chunked] prefill max |diff| chunked vs full %.3g; decode max |diff| between equal requests %.3g\n",
              worst, worst_decode);
  EXPECT_LE(worst, kTol);
  EXPECT_LE(worst_decode, kTol);
  EXPECT_TRUE(c_solo.defined());
  for (int64_t id : {a, b, c, c2}) lm->free_request(id);
}

TEST(Glm5Chunked, RejectsBadBatches) {
  auto model = model::load_causal_lm(test::glm5_tiny_dir(), Device::cpu());
  engine::Session s(*model);
  engine::Session* lm = &s;
  const kv::RequestId a = lm->add_request(), b = lm->add_request();
  EXPECT_THROW(lm->forward(engine::ForwardBatch{{3}, {a}, {1}}), Error);       // position skips 0
  EXPECT_THROW(lm->forward(engine::ForwardBatch{{3}, {a + 7}, {0}}), Error);   // unknown request
  EXPECT_THROW(lm->forward(engine::ForwardBatch{{9999}, {a}, {0}}), Error);    // id outside the vocabulary
  EXPECT_THROW(lm->forward(engine::ForwardBatch{{3, 4, 5}, {a, b, a}, {0, 0, 1}}), Error);  // a split in two runs
  EXPECT_THROW(lm->forward(engine::ForwardBatch{{3, 4}, {a}, {0, 1}}), Error);             // lengths differ
  EXPECT_THROW(lm->forward(engine::ForwardBatch{}), Error);
  // After the errors the requests still work from position 0.
  EXPECT_EQ(lm->forward(engine::ForwardBatch{{3, 4}, {a, a}, {0, 1}}).size(0), 1);
  lm->free_request(a);
  lm->free_request(b);
  EXPECT_THROW(lm->free_request(a), Error);
}
