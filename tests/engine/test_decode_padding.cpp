// Decode steps padded to a batch bucket (ModelRunner::set_decode_padding, kv::pad_metadata): on
// the CPU the real rows' tokens and logits are bit-identical to the unpadded steps for both tiny
// models, over a mixed prefill and decode steps of 3 (padded to 4), 5 (to 8), 1, 7, 2, 6 and 4
// requests; and batch sizes 1..7 changing every step share the four bucket shapes (1, 2, 4, 8)
// where unpadded steps have seven; the padding rows themselves give finite logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/testing.h"
#include "dsa/kv/kv_manager.h"
#include "dsa/model/step_inputs.h"
#include "engine_models.h"
#include "varying_batches.h"

namespace dsa::engine::test {
namespace {

class DecodePaddingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodePaddingTest, RealRowsAreBitIdenticalToUnpaddedSteps) {
  auto lm = load_tiny_lm(GetParam());
  const VaryingRun plain = run_varying_batches(*lm, false, 0, 40);
  const VaryingRun padded = run_varying_batches(*lm, false, 8, 40);
  EXPECT_EQ(plain.padded_steps, 0);
  EXPECT_GT(padded.padded_steps, 20);  // every size but 1, 2, 4 pads
  ASSERT_EQ(padded.tokens.size(), plain.tokens.size());
  for (size_t s = 0; s < plain.tokens.size(); ++s) {
    EXPECT_EQ(padded.tokens[s], plain.tokens[s]) << "step " << s;
    ASSERT_EQ(padded.logits[s].size(), plain.logits[s].size()) << "step " << s;
    EXPECT_EQ(std::memcmp(padded.logits[s].data(), plain.logits[s].data(), plain.logits[s].size() * sizeof(float)), 0)
        << "step " << s << ": logits differ";  // bit-identical, not close
  }
}

TEST_P(DecodePaddingTest, BatchSizesOneToSevenShareTheBucketShapes) {
  auto lm = load_tiny_lm(GetParam());
  const std::vector<int> sizes{1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(run_varying_batches(*lm, false, 0, 7, sizes).decode_shapes, 7);
  EXPECT_EQ(run_varying_batches(*lm, false, 8, 7, sizes).decode_shapes, 4);  // 1, 2, 4, 8
  EXPECT_EQ(run_varying_batches(*lm, false, 4, 7, sizes).decode_shapes, 6);  // 1, 2, 4, then 5, 6, 7 unpadded
  // Without rows returning logits the shapes are the same buckets.
  EXPECT_EQ(run_varying_batches(*lm, false, 8, 7, sizes, /*want_logits=*/false).decode_shapes, 4);
}

// The padding rows themselves compute finite logits (their attention lists are empty), so no
// NaN reaches an op that sees every row (MoE routing picks experts for padding tokens too).
TEST_P(DecodePaddingTest, PaddingRowsGiveFiniteLogits) {
  auto lm = load_tiny_lm(GetParam());
  kv::KvManagerOptions ko;
  ko.max_requests = 4;
  ko.max_step_tokens = 64;
  ko.max_position = 256;
  ko.num_blocks = 8;
  kv::KvManager kv(lm->kv_requirements(), ko);
  kv.add_request(0);
  const auto prompt = random_prompts({13}, lm->config().vocab_size, 3)[0];
  kv::Batch pre;
  pre.add(0, 0, prompt);
  const kv::BatchMetadata m0 = kv.prepare(pre);
  const int64_t V = lm->config().vocab_size;
  auto forward = [&](const kv::BatchMetadata& m) {
    model::StepInputs in;
    in.kv = &kv;
    in.meta = &m;
    const int64_t T = m.num_tokens();
    in.logit_rows = Tensor::empty({T}, DType::I32);
    for (int64_t t = 0; t < T; ++t) in.logit_rows.data<int32_t>()[t] = static_cast<int32_t>(t);
    Tensor logits = Tensor::empty({T, V}, DType::F32);
    lm->forward(in, logits);
    return logits;
  };
  forward(m0);
  kv::Batch dec;
  dec.add(0, static_cast<int64_t>(prompt.size()), std::vector<int32_t>{prompt[0]});
  kv::BatchMetadata m = kv.prepare(dec);
  kv::pad_metadata(m, 3);
  const Tensor logits = forward(m);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t v = 0; v < V; ++v) ASSERT_TRUE(std::isfinite(logits.data<float>()[r * V + v])) << "row " << r;
  // A step of padding rows only (the start-up capture's) too.
  const Tensor only = forward(kv.padding_metadata(4, 256));
  for (int64_t i = 0; i < 4 * V; ++i) ASSERT_TRUE(std::isfinite(only.data<float>()[i])) << "logit " << i;
}

INSTANTIATE_TEST_SUITE_P(Tiny, DecodePaddingTest, ::testing::Values("glm_moe_dsa", "deepseek_v4"),
                         [](const auto& info) { return info.param == "glm_moe_dsa" ? "Glm5" : "DeepseekV4"; });

}  // namespace
}  // namespace dsa::engine::test
