// Dense linear layers: CPU references against naive loops; CUDA (kernel and cuBLASLt) against CPU.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/testing.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/expert_gemm.h"
#include "moe/moe_util.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {
Fp8BlockWeight fp8_weight(int64_t N, int64_t K, Rng& rng, bool ue8m0 = false) {
  ExpertWeights e = random_fp8(1, N, K, rng, ue8m0);
  return {e.weight.reshape({N, K}), e.scale.reshape({(N + 127) / 128, (K + 127) / 128})};
}
std::vector<float> deq(const Fp8BlockWeight& w) {
  ExpertWeights e{WeightFormat::FP8Block, w.weight.reshape({1, w.weight.size(0), w.weight.size(1)}),
                  w.scale.reshape({1, w.scale.size(0), w.scale.size(1)})};
  return dequant_ref(e, 0);
}
Fp8BlockWeight to_dev(const Fp8BlockWeight& w) { return {w.weight.to(Device::cuda()), w.scale.to(Device::cuda())}; }
}  // namespace

TEST(Linear, Bf16CpuMatchesNaive) {
  Rng rng;
  const int64_t T = 5, K = 64, N = 24;
  Tensor x = random_bf16({T, K}, rng), w = random_bf16({N, K}, rng), out = Tensor::empty({T, N}, DType::F32);
  linear_bf16(x, w, out);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(bf(x, t * K + k)) * bf(w, n * K + k);
      ASSERT_NEAR(out.data<float>()[t * N + n], s, 1e-4);
    }
}

TEST(Linear, Fp8BlockCpuMatchesNaiveAndActQuant) {
  Rng rng;
  const int64_t T = 3, K = 256, N = 200;  // N: partial last 128-row scale block
  Fp8BlockWeight w = fp8_weight(N, K, rng);
  auto W = deq(w);
  Tensor x = random_bf16({T, K}, rng);
  for (bool aq : {false, true}) {
    Tensor xa = x;
    if (aq) {
      xa = Tensor::empty({T, K}, DType::BF16);
      fake_quant_act_fp8(x, xa);
      // each value is an e4m3 value times a power of two, and close to the input
      for (int64_t i = 0; i < T * K; ++i) ASSERT_NEAR(bf(xa, i), bf(x, i), 0.07 * std::fabs(bf(x, i)) + 0.02);
    }
    LinearFp8Params p;
    p.act_fp8 = aq;
    Tensor out = Tensor::empty({T, N}, DType::BF16);
    poison(out);
    linear_fp8_block(x, w, out, p);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<double>(bf(xa, t * K + k)) * W[n * K + k];
        ASSERT_NEAR(bf(out, t * N + n), s, 8e-3 * std::fabs(s) + 1e-4) << "act_fp8=" << aq;
      }
  }
}

TEST(LinearCuda, Bf16MatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (int64_t T : {1, 7, 64, 1000}) {
    const int64_t K = 256, N = 136;
    Tensor x = random_bf16({T, K}, rng), w = random_bf16({N, K}, rng);
    Tensor want = Tensor::empty({T, N}, DType::BF16), got = Tensor::empty({T, N}, DType::BF16, Device::cuda());
    poison(got);
    linear_bf16(x, w, want);
    linear_bf16(x.to(Device::cuda()), w.to(Device::cuda()), got);
    ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 1e-2, 1e-2 * rms_bf16(want), "bf16 linear"), 0) << "T=" << T;
  }
}

TEST(LinearCuda, Fp8BlockKernelMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (int64_t T : {1, 7, 64, 1000})
    for (bool aq : {false, true})
      for (bool ue : {false, true}) {
        const int64_t K = 384, N = 576;  // GLM kv_a_proj-like N: 4.5 scale blocks
        Fp8BlockWeight w = fp8_weight(N, K, rng, ue);
        Tensor x = random_bf16({T, K}, rng);
        LinearFp8Params p;
        p.act_fp8 = aq;
        p.backend = LinearBackend::Kernel;
        Tensor want = Tensor::empty({T, N}, DType::BF16), got = Tensor::empty({T, N}, DType::BF16, Device::cuda());
        linear_fp8_block(x, w, want, p);
        poison(got);
        linear_fp8_block(x.to(Device::cuda()), to_dev(w), got, p);
        ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 1e-2, 1e-2 * rms_bf16(want), "fp8 kernel"), 0)
            << "T=" << T << " act_fp8=" << aq << " ue8m0=" << ue;
      }
}

// f32 outputs on the CPU: the bf16 result unrounded; cuBLASLt cannot be forced for them.
TEST(Linear, Fp8BlockF32Out) {
  Rng rng;
  const int64_t T = 3, K = 256, N = 136;
  Fp8BlockWeight w = fp8_weight(N, K, rng);
  Tensor x = random_bf16({T, K}, rng);
  Tensor b = Tensor::empty({T, N}, DType::BF16), f = Tensor::empty({T, N}, DType::F32);
  poison(f);
  linear_fp8_block(x, w, b);
  linear_fp8_block(x, w, f);
  for (int64_t i = 0; i < T * N; ++i) ASSERT_EQ(f32_to_bf16_bits(f.data<float>()[i]), b.data<uint16_t>()[i]) << i;
  EXPECT_STREQ(linear_fp8_backend_name(LinearFp8Params{}, Device::cpu(), T, N, K, DType::F32), "cpu");
  LinearFp8Params p;
  p.act_fp8 = true;
  p.backend = LinearBackend::CublasLt;
  EXPECT_THROW(linear_fp8_block(x, w, f, p), Error);
  Tensor bad = Tensor::empty({T, N}, DType::F16);
  EXPECT_THROW(linear_fp8_block(x, w, bad), Error);
}

// Decode-size dense FP8 linears on the kernel (split-K where N alone gives too few CTAs) against
// the CPU: T in {1, 3, 8, 32, 64}, N in {128, 576, 2112} (2048 + 64: a partial last 128-row scale
// block), K in {512, 6144, 12288}, fp32 and UE8M0 scales (UE8M0 on K <= 6144, to bound the CPU
// reference's time), bf16 and f32 outputs, poisoned. The narrow shapes must actually split on this
// device (the plan the call uses). Bounds: bf16 1e-2 relative + 1e-2 rms; f32 2e-3 relative +
// 2e-3 rms (the kernel's fp32 sums of exact bf16 products against the CPU's double sums).
TEST(LinearCuda, Fp8BlockSplitKMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  const int sm = cuda_devices()[0].sm_count;
  for (int64_t N : {128, 576, 2112})
    for (int64_t K : {512, 6144, 12288})
      for (bool ue : {false, true}) {
        if (ue && K > 6144) continue;
        Fp8BlockWeight w = fp8_weight(N, K, rng, ue);
        Fp8BlockWeight wd = to_dev(w);
        const ExpertWeights ew{WeightFormat::FP8Block, wd.weight.reshape({1, N, K}),
                               wd.scale.reshape({1, wd.scale.size(0), wd.scale.size(1)})};
        for (int64_t T : {1, 3, 8, 32, 64}) {
          const std::string what = "T=" + std::to_string(T) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                   " ue8m0=" + std::to_string(ue);
          const ExpertGemmSplit plan = expert_gemm_planned_split(ew, T, false, ExpertGemmParams{}, d);
          std::printf("[split-k] %s: %d x %d chunks\n", what.c_str(), plan.splits, plan.chunks);
          if (sm >= 64 && T <= 8 && N <= 576 && K >= 6144) {
            EXPECT_GT(plan.splits, 1) << what << ": narrow shape not split";
          }
          Tensor x = random_bf16({T, K}, rng);
          Tensor want = Tensor::empty({T, N}, DType::F32);
          linear_fp8_block(x, w, want);
          const Tensor want_b = to_bf16_host(want);
          const double rms = rms_f32(want);
          Tensor xd = x.to(d);
          Tensor gb = Tensor::empty({T, N}, DType::BF16, d), gf = Tensor::empty({T, N}, DType::F32, d);
          poison(gb);
          poison(gf);
          linear_fp8_block(xd, wd, gb);
          linear_fp8_block(xd, wd, gf);
          ASSERT_EQ(compare_bf16(gb.to(Device::cpu()), want_b, 1e-2, 1e-2 * rms, what + " bf16"), 0) << what;
          ASSERT_EQ(compare_f32(gf.to(Device::cpu()), want, 2e-3, 2e-3 * rms, what + " f32"), 0) << what;
        }
      }
}

// Tries every scale layout cuBLASLt could mean for VEC128_32F / BLK128x128_32F, prints which
// reproduce the CPU reference, and requires the default one to.
TEST(LinearCuda, CublasLtFp8BlockScaleLayouts) {
  DSA_REQUIRE_CUDA();
  if (!cublaslt_fp8_block_supported(0)) GTEST_SKIP() << "cuBLASLt has no block-scaled FP8 algorithm on this device";
  Rng rng;
  const int64_t T = 64, K = 512, N = 384;
  Fp8BlockWeight w = fp8_weight(N, K, rng);
  Fp8BlockWeight wd = to_dev(w);
  Tensor x = random_bf16({T, K}, rng, 1.f);
  // Uneven block scales: an outlier in blocks with (t + kb) % 3 == 0 only, so a transposed or
  // misplaced activation scale shows up as wrong outputs.
  for (int64_t t = 0; t < T; ++t)
    for (int64_t kb = 0; kb < K / 128; ++kb)
      if ((t + kb) % 3 == 0) x.data<uint16_t>()[t * K + kb * 128 + (t * 7 + kb) % 128] = f32_to_bf16_bits(60.f);
  LinearFp8Params p;
  p.act_fp8 = true;
  Tensor want = Tensor::empty({T, N}, DType::BF16);
  linear_fp8_block(x, w, want, p);
  p.backend = LinearBackend::CublasLt;
  const char* saved = std::getenv("DSA_CUBLASLT_SCALE_LAYOUT");
  std::string good;
  for (int a : {0, 1, 2})
    for (int b : {0, 1}) {
      const std::string v = std::to_string(a) + "," + std::to_string(b);
      setenv("DSA_CUBLASLT_SCALE_LAYOUT", v.c_str(), 1);
      Tensor got = Tensor::empty({T, N}, DType::BF16, Device::cuda());
      poison(got);
      linear_fp8_block(x.to(Device::cuda()), wd, got, p);
      Tensor h = got.to(Device::cpu());
      int64_t bad = 0;
      for (int64_t i = 0; i < T * N; ++i) {
        const float g = bf(h, i), r = bf(want, i);
        if (!(std::fabs(g - r) <= 2e-2 * std::fabs(r) + 2e-2 * rms_bf16(want, 64))) ++bad;
      }
      std::printf("[cublaslt scale layout] A=%d B=%d: %lld of %lld outside tolerance\n", a, b,
                  static_cast<long long>(bad), static_cast<long long>(T * N));
      if (bad == 0) good += "(" + v + ")";
    }
  if (saved) setenv("DSA_CUBLASLT_SCALE_LAYOUT", saved, 1); else unsetenv("DSA_CUBLASLT_SCALE_LAYOUT");
  std::printf("[cublaslt scale layout] correct layouts: %s\n", good.c_str());
  Tensor got = Tensor::empty({T, N}, DType::BF16, Device::cuda());
  poison(got);
  linear_fp8_block(x.to(Device::cuda()), wd, got, p);
  EXPECT_EQ(compare_bf16(got.to(Device::cpu()), want, 2e-2, 2e-2 * rms_bf16(want), "cublaslt default layout"), 0);
}
