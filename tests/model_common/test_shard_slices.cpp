// The weight slicing of tensor-parallel shards (model/common/shard_slices.h): ranges of rows and
// columns with the scale blocks that cover them, and the errors for cuts through a block.
#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/model/common/shard_slices.h"

namespace dsa::model {
namespace {

using test::error_of;

Tensor iota(const Shape& s, DType dt = DType::I32) {
  Tensor t = Tensor::empty(s, dt);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::I32) t.data<int32_t>()[i] = static_cast<int32_t>(i);
    else t.data<float>()[i] = static_cast<float>(i);
  }
  return t;
}

TEST(ShardSlices, RankRangesSplitEvenlyOrSayWhy) {
  EXPECT_EQ(rank_range(12, 2, 4, "x").begin, 6);
  EXPECT_EQ(rank_range(12, 2, 4, "x").end, 9);
  EXPECT_EQ(error_of([] { rank_range(10, 0, 4, "heads"); }), "tensor parallel size 4 does not divide heads (10)");
}

TEST(ShardSlices, GatherRangesConcatenatesAlongAnyDim) {
  const Tensor t = iota({2, 6, 3});
  const Tensor g = gather_ranges(t, 1, {{1, 2}, {4, 6}});  // rows 1, 4, 5 of each outer block
  ASSERT_EQ(g.shape(), (Shape{2, 3, 3}));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t src_row = j == 0 ? 1 : 3 + j;
        EXPECT_EQ(g.data<int32_t>()[(o * 3 + j) * 3 + k], (o * 6 + src_row) * 3 + k);
      }
  EXPECT_NE(error_of([&] { gather_ranges(t, 1, {{4, 7}}); }).find("range [4, 7) outside dim 1"), std::string::npos);
}

TEST(ShardSlices, Fp8ScalesFollowTheirBlocks) {
  ops::ExpertWeights w;
  w.format = ops::WeightFormat::FP8Block;
  w.weight = Tensor::zeros({2, 512, 256}, DType::E4M3);
  w.scale = iota({2, 4, 2}, DType::F32);  // [E][512/128][256/128]
  // Gate/up style: rows [128, 256) and [384, 512) -> scale rows 1 and 3.
  const ops::ExpertWeights r = expert_rows(w, {{128, 256}, {384, 512}}, "w13");
  ASSERT_EQ(r.weight.shape(), (Shape{2, 256, 256}));
  ASSERT_EQ(r.scale.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(r.scale.data<float>()[0], 2.f);  // e0, block row 1, col 0
  EXPECT_EQ(r.scale.data<float>()[2], 6.f);  // e0, block row 3, col 0
  const ops::ExpertWeights c = expert_cols(w, {{128, 256}}, "w2");
  ASSERT_EQ(c.scale.shape(), (Shape{2, 4, 1}));
  EXPECT_EQ(c.scale.data<float>()[1], 3.f);  // e0, block row 1, col 1
  EXPECT_EQ(error_of([&] { expert_rows(w, {{0, 64}, {256, 320}}, "layer 1 gate/up"); }),
            "layer 1 gate/up: the shard [0, 64) cuts the 128-wide quantization scale blocks (the split part must be a "
            "multiple of 128)");
}

TEST(ShardSlices, Mxfp4ColumnsTakeBytesAndScaleGroups) {
  ops::ExpertWeights w;
  w.format = ops::WeightFormat::MXFP4;
  w.weight = Tensor::zeros({1, 16, 128}, DType::U8);         // K = 256
  w.scale = Tensor::zeros({1, 16, 8}, DType::U8);            // K / 32
  const ops::ExpertWeights c = expert_cols(w, {{128, 256}}, "w2");
  EXPECT_EQ(c.weight.shape(), (Shape{1, 16, 64}));
  EXPECT_EQ(c.scale.shape(), (Shape{1, 16, 4}));
  EXPECT_NE(error_of([&] { expert_cols(w, {{0, 48}}, "w2"); }).find("cuts the 32-wide"), std::string::npos);
}

}  // namespace
}  // namespace dsa::model
