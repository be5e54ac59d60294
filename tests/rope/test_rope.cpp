#include <cmath>
#include <numbers>

#include "dsa/ops/rope/rope.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {
Tensor positions_i64(const std::vector<int64_t>& p) {
  Tensor t = Tensor::empty({static_cast<int64_t>(p.size())}, DType::I64);
  for (size_t i = 0; i < p.size(); ++i) t.data<int64_t>()[i] = p[i];
  return t;
}
}  // namespace

TEST(ModelopsRope, PlainInvFreq) {
  RopeConfig c = RopeConfig::v4_main();
  std::vector<float> f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_EQ(f[0], 1.f);
  // computed in double, rounded once to float
  EXPECT_EQ(f[1], static_cast<float>(std::pow(10000.0, -2.0 / 64)));
  EXPECT_EQ(f[31], static_cast<float>(std::pow(10000.0, -62.0 / 64)));
  std::vector<float> g = rope_inv_freq(RopeConfig::glm());
  EXPECT_EQ(g[16], static_cast<float>(std::pow(1e6, -32.0 / 64)));
}

TEST(ModelopsRope, YarnInvFreqV4Compress) {
  // dim 64, base 160000, original 65536: correction dims 64 ln(65536/(r 2 pi)) / (2 ln 160000)
  // = 15.45 for r = 32 (floor 15) and 24.71 for r = 1 (ceil 25). Below 15: original frequency;
  // from 25 on: divided by 16; linear in between.
  RopeConfig c = RopeConfig::v4_compress();
  std::vector<float> f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    double base = std::pow(160000.0, -2.0 * i / 64);
    double ramp = std::clamp((i - 15.0) / 10.0, 0.0, 1.0);
    double want = base * (1 - ramp) + base / 16 * ramp;
    EXPECT_NEAR(f[i], want, 1e-7 * want) << i;
  }
  EXPECT_NEAR(f[20], std::pow(160000.0, -40.0 / 64) * (0.5 + 0.5 / 16), 1e-7 * f[20]);
}

TEST(ModelopsRope, HandRotation) {
  // rope_dim 2: inv_freq = 1, so position p rotates (x0, x1) by p radians.
  RopeConfig c;
  c.rope_dim = 2;
  Tensor x = f32_from({1.f, 0.f, 7.f, 0.f, 1.f, 5.f}, {2, 3});
  apply_rope(x, positions_i64({0, 1}), c, RopeParams{1});  // offset 1: dims [1, 3)
  EXPECT_EQ(at(x, 0), 1.f);  // untouched
  EXPECT_EQ(at(x, 1), 0.f);  // position 0: identity
  EXPECT_EQ(at(x, 2), 7.f);
  EXPECT_EQ(at(x, 3), 0.f);  // untouched
  EXPECT_NEAR(at(x, 4), std::cos(1.0) - 5 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(at(x, 5), 5 * std::cos(1.0) + std::sin(1.0), 1e-6);
}

TEST(ModelopsRope, PreservesNormsAndInverseUndoes) {
  Rng rng;
  for (RopeConfig c : {RopeConfig::v4_main(), RopeConfig::v4_compress(), RopeConfig::glm()}) {
    Tensor x = random_f32({9, 3, 512}, rng);
    std::vector<float> orig = values(x);
    Tensor pos = positions_i64({0, 1, 2, 127, 128, 4095, 65535, 65536, 1000003});
    RopeParams p{512 - 64};
    apply_rope(x, pos, c, p);
    std::vector<float> rot = values(x);
    for (int r = 0; r < 27; ++r) {
      double n0 = 0, n1 = 0;
      for (int k = 448; k < 512; ++k) n0 += double(orig[r * 512 + k]) * orig[r * 512 + k], n1 += double(rot[r * 512 + k]) * rot[r * 512 + k];
      EXPECT_NEAR(n1, n0, 1e-5 * n0) << r;
      for (int k = 0; k < 448; ++k) ASSERT_EQ(rot[r * 512 + k], orig[r * 512 + k]);
    }
    p.inverse = true;
    apply_rope(x, pos, c, p);
    expect_close(values(x), orig, 1e-5, 1e-5, "inverse rope");
  }
}

TEST(ModelopsRope, DotProductDependsOnlyOnDistance) {
  Rng rng;
  RopeConfig c = RopeConfig::v4_compress();
  Tensor q = random_f32({2, 64}, rng), k = random_f32({2, 64}, rng);
  // row 0 at (q 10, k 3), row 1 at (q 1010, k 1003) after copying the same vectors
  for (int i = 0; i < 64; ++i) q.data<float>()[64 + i] = q.data<float>()[i], k.data<float>()[64 + i] = k.data<float>()[i];
  apply_rope(q, positions_i64({10, 1010}), c, {});
  apply_rope(k, positions_i64({3, 1003}), c, {});
  double d0 = 0, d1 = 0;
  for (int i = 0; i < 64; ++i) d0 += double(at(q, i)) * at(k, i), d1 += double(at(q, 64 + i)) * at(k, 64 + i);
  EXPECT_NEAR(d0, d1, 2e-4 * (1 + std::abs(d0)));
}

TEST(ModelopsRope, DeinterleavedOutputIsAPermutation) {
  Rng rng;
  RopeConfig c = RopeConfig::glm();
  Tensor a = random_f32({4, 2, 128}, rng);
  Tensor b = a.contiguous();
  b = Tensor::empty(a.shape(), DType::F32);
  b.copy_from(a);
  Tensor pos = positions_i64({0, 5, 77, 2047});
  apply_rope(a, pos, c, RopeParams{0, false, false});  // GLM indexer: first 64 of 128
  apply_rope(b, pos, c, RopeParams{0, false, true});
  std::vector<float> va = values(a), vb = values(b);
  for (int r = 0; r < 8; ++r) {
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(vb[r * 128 + i], va[r * 128 + 2 * i]);
      ASSERT_EQ(vb[r * 128 + 32 + i], va[r * 128 + 2 * i + 1]);
    }
    for (int k = 64; k < 128; ++k) ASSERT_EQ(vb[r * 128 + k], va[r * 128 + k]);
  }
}

TEST(ModelopsRope, HalfSplitIsInterleavedOnPermutedDims) {
  // half-split pairs (x[i], x[i+32]) == interleaved pairs after moving x[i] -> 2i, x[i+32] -> 2i+1
  Rng rng;
  RopeConfig c = RopeConfig::v4_compress();
  Tensor a = random_f32({3, 64}, rng);
  Tensor b = Tensor::empty({3, 64}, DType::F32);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 32; ++i) {
      b.data<float>()[r * 64 + 2 * i] = at(a, r * 64 + i);
      b.data<float>()[r * 64 + 2 * i + 1] = at(a, r * 64 + 32 + i);
    }
  Tensor pos = positions_i64({0, 9, 4000});
  RopeParams hs;
  hs.half_split = true;
  apply_rope(a, pos, c, hs);
  apply_rope(b, pos, c, {});
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(at(a, r * 64 + i), at(b, r * 64 + 2 * i));
      ASSERT_EQ(at(a, r * 64 + 32 + i), at(b, r * 64 + 2 * i + 1));
    }
  hs.deinterleave_out = true;
  EXPECT_THROW(apply_rope(a, pos, c, hs), Error);
}

TEST(ModelopsRope, StridedHeadsBf16AndI32Positions) {
  Rng rng;
  RopeConfig c = RopeConfig::glm();
  Tensor full = random_bf16({3, 4, 256}, rng);  // GLM q head: [192 nope | 64 rope], extra columns
  Tensor view = full.slice(2, 0, 256);
  Tensor pos = Tensor::empty({3}, DType::I32);
  pos.data<int32_t>()[0] = 3, pos.data<int32_t>()[1] = 900, pos.data<int32_t>()[2] = 0;
  Tensor ref = Tensor::empty({3, 4, 256}, DType::F32);
  for (int64_t i = 0; i < ref.numel(); ++i) ref.data<float>()[i] = at(full, i);
  apply_rope(view, pos, c, RopeParams{192});
  apply_rope(ref, positions_i64({3, 900, 0}), c, RopeParams{192});
  for (int64_t i = 0; i < ref.numel(); ++i) ASSERT_EQ(at(full, i), round_to_bf16(at(ref, i))) << i;
}

TEST(ModelopsRope, Validation) {
  Tensor x = Tensor::zeros({2, 64}, DType::F32);
  Tensor pos = positions_i64({0, 1});
  EXPECT_THROW(apply_rope(x, pos, RopeConfig{}, RopeParams{1}), Error);  // 1 + 64 > 64
  EXPECT_THROW(apply_rope(x, positions_i64({0}), RopeConfig{}, {}), Error);
  EXPECT_THROW(apply_rope(x, positions_i64({0, -1}), RopeConfig{}, {}), Error);
  RopeConfig odd;
  odd.rope_dim = 3;
  EXPECT_THROW(apply_rope(x, pos, odd, {}), Error);
}

// ---- CUDA vs CPU ------------------------------------------------------------------------------

TEST(ModelopsRope, CudaMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  struct Case {
    RopeConfig cfg;
    int64_t T, H, D, stride, offset;
    bool inverse, deint;
    DType dt;
    bool half_split = false;
  };
  std::vector<Case> cases = {
      {RopeConfig::v4_main(), 5, 64, 512, 512, 448, false, false, DType::BF16},
      {RopeConfig::v4_compress(), 33, 8, 512, 512, 448, true, false, DType::F32},
      {RopeConfig::v4_compress(), 7, 1, 128, 128, 64, false, false, DType::BF16},
      {RopeConfig::glm(), 9, 32, 128, 128, 0, false, true, DType::BF16},
      {RopeConfig::glm(), 3, 16, 256, 260, 192, false, false, DType::F32},
      {RopeConfig::glm(), 1, 1, 64, 64, 0, true, true, DType::F32},
      {RopeConfig::glm(), 4, 8, 128, 128, 0, false, false, DType::BF16, true},
      {RopeConfig::v4_compress(), 6, 3, 128, 130, 64, true, false, DType::F32, true},
  };
  for (const Case& c : cases) {
    Tensor x = random_act({c.T, c.H, c.stride}, c.dt, rng);
    Tensor pos = Tensor::empty({c.T}, DType::I64);
    for (int64_t t = 0; t < c.T; ++t) pos.data<int64_t>()[t] = rng.randint(0, 200000);
    Tensor xd = x.to(Device::cuda());
    RopeParams p{c.offset, c.inverse, c.deint, c.half_split};
    apply_rope_cpu(x.slice(2, 0, c.D), pos, c.cfg, p);
    apply_rope(xd.slice(2, 0, c.D), pos.to(Device::cuda()), c.cfg, p);
    const double tol = c.dt == DType::BF16 ? 8e-3 : 2e-5;
    expect_close(xd, x, tol, tol, fmt::format("rope T={} H={} D={} off={}", c.T, c.H, c.D, c.offset));
  }
}
