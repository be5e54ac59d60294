// CPU references of the dense linear layers and dispatch to CUDA.
#include "dsa/ops/linear/linear.h"

#include <cmath>
#include <vector>

#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/linear/act_quant.h"
#include "dsa/ops/moe/expert_gemm.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/linear/cuda/kernels.h"
#include "dsa/ops/linear/cuda_ops.h"
#endif

namespace dsa::ops {

static void check_x(const Tensor& x, const char* what) {
  DSA_CHECK(x.defined() && x.dim() == 2 && x.dtype() == DType::BF16 && x.is_contiguous(),
            "{}: x must be contiguous bf16 [T][K], got {}", what, x.defined() ? x.str() : "undefined");
}

void linear_bf16(const Tensor& x, const Tensor& w, Tensor& out) {
  check_x(x, "linear_bf16");
  const int64_t T = x.size(0), K = x.size(1);
  DSA_CHECK(w.defined() && w.dim() == 2 && w.dtype() == DType::BF16 && w.size(1) == K && w.is_contiguous(),
            "linear_bf16: w must be contiguous bf16 [N][{}], got {}", K, w.defined() ? w.str() : "undefined");
  const int64_t N = w.size(0);
  DSA_CHECK(out.defined() && (out.dtype() == DType::BF16 || out.dtype() == DType::F32) && out.is_contiguous(),
            "linear_bf16: out must be contiguous bf16 or f32");
  out.check("linear_bf16: out", out.dtype(), {T, N});
  DSA_CHECK(w.device() == x.device() && out.device() == x.device(), "linear_bf16: tensors must be on {}", x.device().str());
  if (x.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::linear_bf16(x, w, out);
    return;
#else
    fail("linear_bf16: no CUDA in this build");
#endif
  }
  const uint16_t* xp = x.data<uint16_t>();
  const uint16_t* wp = w.data<uint16_t>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += static_cast<double>(bf16_bits_to_f32(xp[t * K + k])) * bf16_bits_to_f32(wp[n * K + k]);
      if (out.dtype() == DType::F32)
        out.data<float>()[t * N + n] = static_cast<float>(s);
      else
        out.data<uint16_t>()[t * N + n] = f32_to_bf16_bits(static_cast<float>(s));
    }
}

void fake_quant_act_fp8(const Tensor& x, Tensor& out) {
  check_x(x, "fake_quant_act_fp8");
  DSA_CHECK(x.size(1) % 128 == 0, "fake_quant_act_fp8: K={} must be a multiple of 128", x.size(1));
  out.check("fake_quant_act_fp8: out", DType::BF16, x.shape());
  DSA_CHECK(out.device() == x.device() && out.is_contiguous(), "fake_quant_act_fp8: out must be contiguous on {}",
            x.device().str());
  if (x.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::launch_act_quant(x.raw(), x.size(0), x.size(1), nullptr, nullptr, true, out.raw());
    cuda_launch::check_launch("act_quant_kernel");
    return;
#else
    fail("fake_quant_act_fp8: no CUDA in this build");
#endif
  }
  const int64_t T = x.size(0), K = x.size(1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t kb = 0; kb < K / 128; ++kb) {
      const uint16_t* in = x.data<uint16_t>() + t * K + kb * 128;
      float v[128];
      for (int i = 0; i < 128; ++i) v[i] = bf16_bits_to_f32(in[i]);
      const float s = act_block_scale(v, 128);
      for (int i = 0; i < 128; ++i)
        out.data<uint16_t>()[t * K + kb * 128 + i] = f32_to_bf16_bits(e4m3_to_f32(f32_to_e4m3(v[i] / s)) * s);
    }
}

static ExpertWeights as_expert(const Fp8BlockWeight& w) {
  ExpertWeights e;
  e.format = WeightFormat::FP8Block;
  DSA_CHECK(w.weight.defined() && w.weight.dim() == 2, "linear_fp8_block: weight must be [N][K] e4m3, got {}",
            w.weight.defined() ? w.weight.str() : "undefined");
  DSA_CHECK(w.scale.defined() && w.scale.dim() == 2, "linear_fp8_block: scale must be [ceil(N/128)][K/128], got {}",
            w.scale.defined() ? w.scale.str() : "undefined");
  e.weight = w.weight.reshape({1, w.weight.size(0), w.weight.size(1)});
  e.scale = w.scale.reshape({1, w.scale.size(0), w.scale.size(1)});
  e.validate("linear_fp8_block");
  return e;
}

static bool use_cublaslt(const LinearFp8Params& p, Device dev) {
  if (!dev.is_cuda() || !p.act_fp8) return false;
  if (p.backend == LinearBackend::Kernel) return false;
  // Under DSA_DEVICE_CAPABILITY (e.g. the SM120 route on an H200) the hardware probe says nothing
  // about the emulated device: take the portable kernel unless the cuBLASLt backend is forced.
  const auto ov = capability_override();
  const bool emulated = ov && !cuda_devices().empty() && !(*ov == cuda_devices()[0].capability);
  if (emulated && p.backend == LinearBackend::Auto) return false;
  const bool ok = cublaslt_fp8_block_supported(dev.index);
  DSA_CHECK(ok || p.backend != LinearBackend::CublasLt,
            "linear_fp8_block: backend CublasLt requested but cuBLASLt has no block-scaled FP8 algorithm on {}", dev.str());
  return ok;
}

const char* linear_fp8_backend_name(const LinearFp8Params& p, Device dev, int64_t T, int64_t N, int64_t K, DType out) {
  if (!dev.is_cuda()) return "cpu";
  return out == DType::BF16 && use_cublaslt(p, dev) && cublaslt_fp8_block_has_algo(T, N, K) ? "cublaslt" : "kernel";
}

void linear_fp8_block(const Tensor& x, const Fp8BlockWeight& w, Tensor& out, const LinearFp8Params& p) {
  check_x(x, "linear_fp8_block");
  ExpertWeights e = as_expert(w);
  const int64_t T = x.size(0), K = x.size(1), N = e.n();
  DSA_CHECK(e.k() == K, "linear_fp8_block: weight K={} != x K={}", e.k(), K);
  const bool f32 = out.defined() && out.dtype() == DType::F32;
  out.check("linear_fp8_block: out (bf16 or f32)", f32 ? DType::F32 : DType::BF16, {T, N});
  DSA_CHECK(p.backend != LinearBackend::CublasLt || p.act_fp8,
            "linear_fp8_block: the cuBLASLt backend needs act_fp8 (FP8 x FP8 GEMM)");
  DSA_CHECK(p.backend != LinearBackend::CublasLt || !f32, "linear_fp8_block: the cuBLASLt backend writes bf16 only");
  if (!f32 && x.device().is_cuda() && use_cublaslt(p, x.device())) {
#ifdef DSA_WITH_CUDA
    DSA_CHECK(K % 128 == 0, "linear_fp8_block: K={} must be a multiple of 128", K);
    if (cuda::linear_fp8_block_cublaslt(x, w, out)) return;
    DSA_CHECK(p.backend != LinearBackend::CublasLt,
              "linear_fp8_block: cuBLASLt has no block-scaled FP8 algorithm for T={} N={} K={}", T, N, K);
#endif
  }
  Tensor a = x;
  if (p.act_fp8) {
    a = Tensor::empty(x.shape(), DType::BF16, x.device());
    fake_quant_act_fp8(x, a);
  }
  ExpertGemmParams ep;
  ep.tactic = p.tactic;
  ep.k_splits = p.k_splits;
  expert_gemm(a, Tensor(), Tensor(), e, out, ep);
}

#ifndef DSA_WITH_CUDA
bool cublaslt_fp8_block_supported(int) { return false; }
bool cublaslt_fp8_block_has_algo(int64_t, int64_t, int64_t) { return false; }
#endif

}  // namespace dsa::ops
