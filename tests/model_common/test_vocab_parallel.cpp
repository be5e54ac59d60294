// The vocabulary-parallel LM head (model/common/vocab_parallel.h): ranks holding their share of
// the head rows, joined by an all-gather over the in-process communicator, give the logits of the
// whole head (bit for bit on the CPU, where each logit is its own dot product); a vocabulary the
// size does not divide stays whole; zero rows still run the collective on every rank; a share
// without a group is an error naming the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "common/testing.h"
#include "dsa/engine/communicator_shards.h"
#include "dsa/model/common/vocab_parallel.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/parallel/in_process_group.h"

namespace dsa::model {
namespace {

using test::error_of;

Tensor whole_logits(const Tensor& hn, const Tensor& head) {
  Tensor out = Tensor::empty({hn.size(0), head.size(0)}, DType::F32, hn.device());
  ops::linear_bf16(hn, head, out);
  return out.to(Device::cpu());
}

// Every rank's logits through lm_head_logits over n in-process ranks (each its own thread).
std::vector<Tensor> rank_logits(const Tensor& hn, const Tensor& head, int n) {
  parallel::InProcessGroup g(n);
  std::vector<Tensor> out(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      engine::CommunicatorShards shards(g.rank(r));
      const Range v = vocab_shard(head.size(0), r, n);
      const Tensor mine = v.size() == head.size(0) ? head : gather_ranges(head, 0, {v});
      Tensor logits = Tensor::empty({hn.size(0), head.size(0)}, DType::F32, hn.device());
      test::poison(logits);
      lm_head_logits(hn, mine, &shards, logits);
      out[static_cast<size_t>(r)] = logits.to(Device::cpu());
    });
  for (auto& t : th) t.join();
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, float tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    ASSERT_TRUE(std::isfinite(g)) << what << " element " << i;
    ASSERT_LE(std::fabs(g - w), tol * (1.f + std::fabs(w))) << what << " element " << i;
  }
}

TEST(VocabParallel, SharesSplitEvenlyOrStayWhole) {
  EXPECT_EQ(vocab_shard(512, 1, 4).begin, 128);
  EXPECT_EQ(vocab_shard(512, 1, 4).end, 256);
  EXPECT_EQ(vocab_shard(129280, 7, 8).end, 129280);
  EXPECT_EQ(vocab_shard(510, 3, 4).begin, 0);  // 4 does not divide 510: replicated
  EXPECT_EQ(vocab_shard(510, 3, 4).end, 510);
  EXPECT_EQ(vocab_shard(7, 0, 1).end, 7);
}

TEST(VocabParallel, RankSharesGiveTheWholeHeadsLogits) {
  test::Rng rng;
  const Tensor hn = test::random_bf16({3, 64}, rng), head = test::random_bf16({40, 64}, rng);
  const Tensor want = whole_logits(hn, head);
  for (const int n : {1, 2, 4}) {
    const auto got = rank_logits(hn, head, n);
    for (int r = 0; r < n; ++r) expect_close(got[static_cast<size_t>(r)], want, 0.f, "n=" + std::to_string(n) + " rank " + std::to_string(r));
  }
  // 3 ranks do not divide 40 rows: every rank keeps the whole head and no collective runs.
  const auto got = rank_logits(hn, head, 3);
  for (const Tensor& t : got) expect_close(t, want, 0.f, "n=3");
}

TEST(VocabParallel, ZeroRowsStillMeetInTheCollective) {
  test::Rng rng;
  const Tensor hn = Tensor::empty({0, 64}, DType::BF16), head = test::random_bf16({40, 64}, rng);
  const auto got = rank_logits(hn, head, 2);  // would hang if one rank skipped the all-gather
  for (const Tensor& t : got) EXPECT_EQ(t.numel(), 0);
}

TEST(VocabParallel, AShareWithoutAGroupIsAnError) {
  test::Rng rng;
  const Tensor hn = test::random_bf16({2, 64}, rng), part = test::random_bf16({20, 64}, rng);
  Tensor logits = Tensor::empty({2, 40}, DType::F32);
  EXPECT_EQ(error_of([&] { lm_head_logits(hn, part, nullptr, logits); }),
            "lm_head_logits: a head of 20 rows for 40 logits needs 2 ranks, not 1");
  Tensor wrong = Tensor::empty({2, 41}, DType::F32);
  EXPECT_NE(error_of([&] { lm_head_logits(hn, part, nullptr, wrong); }).find("needs"), std::string::npos);
}

TEST(VocabParallel, CudaRankSharesMatchTheWholeHead) {
  DSA_REQUIRE_CUDA();
  test::Rng rng;
  const Tensor hn = test::random_bf16({5, 256}, rng).to(Device::cuda()),
               head = test::random_bf16({512, 256}, rng).to(Device::cuda());
  const Tensor want = whole_logits(hn, head);
  for (const int n : {2, 4}) {
    const auto got = rank_logits(hn, head, n);
    // cuBLASLt may pick another kernel for the narrower head: summation order only.
    for (int r = 0; r < n; ++r) expect_close(got[static_cast<size_t>(r)], want, 1e-3f, "cuda n=" + std::to_string(n));
  }
}

}  // namespace
}  // namespace dsa::model
