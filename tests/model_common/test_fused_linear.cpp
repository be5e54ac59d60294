// The forwards' Linear and FusedLinear (model/common/linear.h): a fused set gives each part the
// output its own weight gives (one GEMM at one token, the parts' views at more), sets that cannot
// share a weight stay separate, and bad weights are refused naming the tensor.
#include <cmath>
#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/model/common/linear.h"
#include "dsa/ops/tensor/tensor_ops.h"
#include "moe/moe_util.h"

using namespace dsa;
using namespace dsa::test;
using model::FusedLinear;
using model::Linear;

namespace {

Linear fp8_linear(int64_t N, int64_t K, Rng& rng, bool ue8m0 = false) {
  const ops::ExpertWeights e = random_fp8(1, N, K, rng, ue8m0);
  return model::make_linear(e.weight.reshape({N, K}), e.scale.reshape({(N + 127) / 128, (K + 127) / 128}),
                            Device::cpu(), "test.fp8");
}

Linear bf16_linear(int64_t N, int64_t K, Rng& rng) {
  return model::make_linear(random_bf16({N, K}, rng, 0.05f), Tensor(), Device::cpu(), "test.bf16");
}

std::vector<float> floats(const Tensor& t) {
  const Tensor h = ops::cast(t.to(Device::cpu()), DType::F32);
  return {h.data<float>(), h.data<float>() + h.numel()};
}

// Each part's output of the fused set against its own Linear's, for T tokens.
void expect_parts_match(const FusedLinear& f, const std::vector<Linear>& own, const Tensor& x, DType out,
                        double tol) {
  const std::vector<Tensor> got = f.apply(x, out);
  ASSERT_EQ(got.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    const Tensor want = own[i].to(x.device()).apply(x, out);
    ASSERT_EQ(got[i].shape(), want.shape()) << "part " << i;
    ASSERT_TRUE(got[i].is_contiguous()) << "part " << i;
    const std::vector<float> g = floats(got[i]), w = floats(want);
    for (size_t j = 0; j < g.size(); ++j) {
      ASSERT_FALSE(std::isnan(g[j])) << "part " << i << " element " << j;
      ASSERT_NEAR(g[j], w[j], tol * (1 + std::fabs(w[j]))) << "part " << i << " element " << j << " T " << x.size(0);
    }
  }
}

}  // namespace

TEST(FusedLinear, Fp8PartsGiveTheirOwnOutputs) {
  Rng rng;
  const int64_t K = 256;
  // The last part does not fill its last 128-row scale block (GLM's kv_a: 576 rows).
  const std::vector<Linear> parts{fp8_linear(256, K, rng, true), fp8_linear(128, K, rng), fp8_linear(72, K, rng)};
  const FusedLinear f = FusedLinear::of(parts, "test set");
  ASSERT_TRUE(f.fused());
  EXPECT_EQ(f.nbytes(), parts[0].nbytes() + parts[1].nbytes() + parts[2].nbytes());
  for (int64_t T : {1, 3}) {
    const Tensor x = random_bf16({T, K}, rng);
    expect_parts_match(f, parts, x, DType::BF16, 0);
    expect_parts_match(f, parts, x, DType::F32, 0);
  }
}

TEST(FusedLinear, Bf16PartsGiveTheirOwnOutputs) {
  Rng rng;
  const int64_t K = 96;
  const std::vector<Linear> parts{bf16_linear(64, K, rng), bf16_linear(24, K, rng), bf16_linear(40, K, rng)};
  const FusedLinear f = FusedLinear::of(parts, "test set");
  ASSERT_TRUE(f.fused());
  for (int64_t T : {1, 5}) expect_parts_match(f, parts, random_bf16({T, K}, rng), DType::F32, 0);
}

TEST(FusedLinear, PartsThatCannotShareAWeightRunOneByOne) {
  Rng rng;
  const int64_t K = 128;
  // An FP8 part before the last that ends inside a scale block, and a format mix.
  for (const std::vector<Linear>& parts : {std::vector<Linear>{fp8_linear(72, K, rng), fp8_linear(128, K, rng)},
                                           std::vector<Linear>{fp8_linear(128, K, rng), bf16_linear(32, K, rng)}}) {
    const FusedLinear f = FusedLinear::of(parts, "test set");
    EXPECT_FALSE(f.fused());
    for (int64_t T : {1, 2}) expect_parts_match(f, parts, random_bf16({T, K}, rng), DType::BF16, 0);
  }
}

TEST(FusedLinear, RefusesPartsOfOtherInputsAndBadWeights) {
  Rng rng;
  EXPECT_EQ(error_of([&] { FusedLinear::of({bf16_linear(8, 64, rng), bf16_linear(8, 32, rng)}, "layers.0.x"); }),
            "layers.0.x: part 1 reads 32 features, part 0 64");
  const ops::ExpertWeights e = random_fp8(1, 128, 128, rng);
  const Tensor w = e.weight.reshape({128, 128});
  EXPECT_EQ(error_of([&] { model::make_linear(w, Tensor(), Device::cpu(), "a.weight"); }),
            "a.weight: an F8_E4M3 weight needs its block scales");
  EXPECT_NE(error_of([&] { model::make_linear(w, Tensor::zeros({2, 1}, DType::F32), Device::cpu(), "a.weight"); })
                .find("a.weight: block scales"),
            std::string::npos);
  EXPECT_NE(error_of([&] { model::make_linear(Tensor::zeros({4, 4}, DType::I32), Tensor(), Device::cpu(), "b.weight"); })
                .find("b.weight: a linear weight must be F8_E4M3, BF16 or F32"),
            std::string::npos);
}

TEST(FusedLinear, CudaPartsMatchTheirOwnOutputs) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const int64_t K = 1024;
  // V4's wq_a / wkv and GLM's q_a / wk / kv_a in miniature, and a bf16 set with f32 out.
  const std::vector<Linear> fp8{fp8_linear(512, K, rng), fp8_linear(128, K, rng), fp8_linear(192, K, rng)};
  const std::vector<Linear> bf16{bf16_linear(256, K, rng), bf16_linear(256, K, rng), bf16_linear(64, K, rng)};
  for (const auto& [parts, out] : {std::pair{fp8, DType::BF16}, std::pair{bf16, DType::F32}}) {
    std::vector<Linear> dev;
    for (const Linear& p : parts) dev.push_back(p.to(Device::cuda()));
    const FusedLinear f = FusedLinear::of(dev, "cuda set");
    ASSERT_TRUE(f.fused());
    // The fused GEMM may split K differently from a part's own: bf16 rounding apart at most.
    for (int64_t T : {1, 4}) expect_parts_match(f, parts, random_bf16({T, K}, rng).to(Device::cuda()), out, 1e-2);
  }
}
