// Decode steps padded to a batch bucket (ModelRunner::set_decode_padding, kv::pad_metadata): on
// the CPU the real rows' tokens and logits are bit-identical to the unpadded steps for both tiny
// models, over a mixed prefill and decode steps of 3 (padded to 4), 5 (to 8), 1, 7, 2, 6 and 4
// requests; and batch sizes 1..7 changing every step share the four bucket shapes (1, 2, 4, 8)
// where unpadded steps have seven.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/testing.h"
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

INSTANTIATE_TEST_SUITE_P(Tiny, DecodePaddingTest, ::testing::Values("glm_moe_dsa", "deepseek_v4"),
                         [](const auto& info) { return info.param == "glm_moe_dsa" ? "Glm5" : "DeepseekV4"; });

}  // namespace
}  // namespace dsa::engine::test
