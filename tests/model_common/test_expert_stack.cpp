// The expert stacker both models load through (model/common/expert_stack.h): every expert's
// parts row after row, scales alike, each element where it belongs, and the mismatches refused by
// name.
#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/model/common/expert_stack.h"

namespace dsa::model {
namespace {

using test::error_of;

// A [rows][cols] f32 tensor whose element (r, c) is tag * 10000 + r * 100 + c.
Tensor tagged(int64_t rows, int64_t cols, int tag) {
  Tensor t = Tensor::empty({rows, cols}, DType::F32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t.data<float>()[r * cols + c] = static_cast<float>(tag * 10000 + r * 100 + c);
  return t;
}

TEST(ExpertStack, PartsFollowEachOtherInEveryExpertWeightsAndScales) {
  // Three experts of gate (256 rows, two scale blocks) and up (130 rows: the last part may end in
  // a partial block), K = 4 (as the stand-in for the e4m3 bytes) and 1 scale column.
  const int64_t E = 3;
  const int64_t rows[2] = {256, 130}, srows[2] = {2, 2};
  auto part = [&](int64_t e, int i) -> std::pair<Tensor, Tensor> {
    return {tagged(rows[i], 4, static_cast<int>(10 * e + i)), tagged(srows[i], 1, static_cast<int>(100 + 10 * e + i))};
  };
  const ops::ExpertWeights s = stack_expert_parts(E, 2, ops::WeightFormat::FP8Block, part, Device::cpu(), "w13");
  ASSERT_EQ(s.weight.shape(), (Shape{E, 386, 4}));
  ASSERT_EQ(s.scale.shape(), (Shape{E, 4, 1}));
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t r = 0; r < 386; ++r)
      for (int64_t c = 0; c < 4; ++c) {
        const int i = r < 256 ? 0 : 1;
        const float want = static_cast<float>((10 * e + i) * 10000 + (r - (i ? 256 : 0)) * 100 + c);
        ASSERT_EQ(s.weight.data<float>()[(e * 386 + r) * 4 + c], want) << "expert " << e << " row " << r;
      }
    for (int64_t r = 0; r < 4; ++r) {
      const int i = r < 2 ? 0 : 1;
      EXPECT_EQ(s.scale.data<float>()[e * 4 + r], static_cast<float>((100 + 10 * e + i) * 10000 + (r % 2) * 100));
    }
  }
}

TEST(ExpertStack, Bf16HasNoScaleAndOnePartStacksAsIs) {
  auto part = [](int64_t e, int) -> std::pair<Tensor, Tensor> { return {tagged(3, 5, static_cast<int>(e)), Tensor()}; };
  const ops::ExpertWeights s = stack_expert_parts(2, 1, ops::WeightFormat::BF16, part, Device::cpu(), "w2");
  EXPECT_FALSE(s.scale.defined());
  ASSERT_EQ(s.weight.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(s.weight.data<float>()[15 + 2 * 5 + 4], 10000.f + 204.f);
}

TEST(ExpertStack, MismatchesAreRefusedByExpertAndPart) {
  // expert 1's part 0 has other rows
  auto rows = [](int64_t e, int) -> std::pair<Tensor, Tensor> { return {tagged(e == 1 ? 4 : 3, 5, 0), Tensor()}; };
  EXPECT_NE(error_of([&] { stack_expert_parts(2, 1, ops::WeightFormat::BF16, rows, Device::cpu(), "w2"); })
                .find("w2: expert 1 part 0 weight is"),
            std::string::npos);
  // an FP8 part before the last that does not fill whole 128-row blocks
  auto ragged = [](int64_t, int i) -> std::pair<Tensor, Tensor> {
    return {tagged(i == 0 ? 100 : 128, 4, 0), tagged(1, 1, 0)};
  };
  EXPECT_NE(error_of([&] { stack_expert_parts(1, 2, ops::WeightFormat::FP8Block, ragged, Device::cpu(), "w13"); })
                .find("part 0 has 100 rows, not whole 128-row scale blocks"),
            std::string::npos);
  // a scaled format without its scale
  auto bare = [](int64_t, int) -> std::pair<Tensor, Tensor> { return {tagged(2, 4, 0), Tensor()}; };
  EXPECT_NE(error_of([&] { stack_expert_parts(1, 1, ops::WeightFormat::MXFP4, bare, Device::cpu(), "w2"); })
                .find("needs a scale"),
            std::string::npos);
  // parts of other K
  auto widths = [](int64_t, int i) -> std::pair<Tensor, Tensor> { return {tagged(128, i == 0 ? 4 : 6, 0), Tensor()}; };
  EXPECT_NE(error_of([&] { stack_expert_parts(1, 2, ops::WeightFormat::BF16, widths, Device::cpu(), "w13"); })
                .find("must share K and dtype"),
            std::string::npos);
}

}  // namespace
}  // namespace dsa::model
