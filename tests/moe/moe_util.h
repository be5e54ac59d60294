// Test helpers for the MoE/linear tests: random quantized expert weights in checkpoint layouts,
// an independent dequantizer (not the library's), and tolerance comparisons that fail on NaN.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/expert_gemm.h"

namespace dsa::test {

// MXFP4: random codes, scales 2^[-6, 0] (optionally a few extreme exponents).
inline ops::ExpertWeights random_mxfp4(int64_t E, int64_t N, int64_t K, Rng& rng, bool extreme_scales = false) {
  ops::ExpertWeights w;
  w.format = ops::WeightFormat::MXFP4;
  w.weight = random_bytes({E, N, K / 2}, DType::U8, rng);
  w.scale = Tensor::empty({E, N, K / 32}, DType::E8M0);
  for (int64_t i = 0; i < w.scale.numel(); ++i) {
    int s = static_cast<int>(rng.randint(121, 127));
    if (extreme_scales && rng.randint(0, 9) == 0) s = static_cast<int>(rng.randint(0, 1) ? rng.randint(129, 140) : rng.randint(1, 3));
    w.scale.data<uint8_t>()[i] = static_cast<uint8_t>(s);
  }
  return w;
}

// FP8 block: random finite e4m3 codes (no NaN code), fp32 scales in [0.001, 0.02) or UE8M0.
inline ops::ExpertWeights random_fp8(int64_t E, int64_t N, int64_t K, Rng& rng, bool ue8m0 = false) {
  ops::ExpertWeights w;
  w.format = ops::WeightFormat::FP8Block;
  w.weight = Tensor::empty({E, N, K}, DType::E4M3);
  for (int64_t i = 0; i < w.weight.numel(); ++i) {
    uint8_t c;
    do c = static_cast<uint8_t>(rng.randint(0, 255));
    while ((c & 0x7F) == 0x7F);
    w.weight.data<uint8_t>()[i] = c;
  }
  const int64_t NB = (N + 127) / 128, KB = (K + 127) / 128;
  if (ue8m0) {
    w.scale = Tensor::empty({E, NB, KB}, DType::E8M0);
    for (int64_t i = 0; i < w.scale.numel(); ++i) w.scale.data<uint8_t>()[i] = static_cast<uint8_t>(rng.randint(118, 122));
  } else {
    w.scale = Tensor::empty({E, NB, KB}, DType::F32);
    for (int64_t i = 0; i < w.scale.numel(); ++i) w.scale.data<float>()[i] = rng.uniform(0.001f, 0.02f);
  }
  return w;
}

// BF16: random bf16 weights with std ~ 1/sqrt(K) (unquantized checkpoints); no scale.
inline ops::ExpertWeights random_bf16_experts(int64_t E, int64_t N, int64_t K, Rng& rng) {
  ops::ExpertWeights w;
  w.format = ops::WeightFormat::BF16;
  w.weight = random_bf16({E, N, K}, rng, 2.f / std::sqrt(static_cast<float>(K)));
  return w;
}

// Weights of format 0 MXFP4, 1 FP8 (f32 scales), 2 FP8 (UE8M0 scales), 3 BF16.
inline ops::ExpertWeights random_experts(int fmt, int64_t E, int64_t N, int64_t K, Rng& rng, bool extreme = false) {
  if (fmt == 0) return random_mxfp4(E, N, K, rng, extreme);
  if (fmt == 3) return random_bf16_experts(E, N, K, rng);
  return random_fp8(E, N, K, rng, fmt == 2);
}

// Independent dequantization of expert e: [N][K] floats.
inline std::vector<float> dequant_ref(const ops::ExpertWeights& w, int64_t e) {
  const int64_t N = w.n(), K = w.k();
  std::vector<float> out(N * K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      float v;
      if (w.format == ops::WeightFormat::BF16) {
        v = bf16_bits_to_f32(w.weight.data<uint16_t>()[(e * N + n) * K + k]);
      } else if (w.format == ops::WeightFormat::MXFP4) {
        const uint8_t b = w.weight.data<uint8_t>()[(e * N + n) * (K / 2) + k / 2];
        const int code = (k % 2 == 0) ? (b & 15) : (b >> 4);
        static const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
        v = (code & 8 ? -1.f : 1.f) * mag[code & 7] *
            std::ldexp(1.f, static_cast<int>(w.scale.data<uint8_t>()[(e * N + n) * (K / 32) + k / 32]) - 127);
      } else {
        const int64_t NB = w.scale.size(1), KB = w.scale.size(2);
        const int64_t si = (e * NB + n / 128) * KB + k / 128;
        const float s = w.scale.dtype() == DType::F32
                            ? w.scale.data<float>()[si]
                            : std::ldexp(1.f, static_cast<int>(w.scale.data<uint8_t>()[si]) - 127);
        v = e4m3_to_f32(w.weight.data<uint8_t>()[(e * N + n) * K + k]) * s;
      }
      out[n * K + k] = v;
    }
  return out;
}

inline ops::ExpertWeights to_device(const ops::ExpertWeights& w, Device d) {
  ops::ExpertWeights r = w;
  r.weight = w.weight.to(d);
  r.scale = w.scale.defined() ? w.scale.to(d) : Tensor();
  return r;
}

inline float bf(const Tensor& t, int64_t i) { return bf16_bits_to_f32(t.data<uint16_t>()[i]); }

inline double rms_bf16(const Tensor& t, int64_t n = -1) {
  if (n < 0) n = t.numel();
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(bf(t, i)) * bf(t, i);
  return n ? std::sqrt(s / n) : 0.0;
}

// Element-wise |got - want| <= atol + rtol*|want| on host bf16 tensors (row subset optional).
// NaN in either never passes. Returns the number of failures (prints the first few).
inline int64_t compare_bf16(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what,
                            const std::vector<int64_t>* rows = nullptr) {
  const int64_t cols = got.size(got.dim() - 1);
  std::vector<int64_t> all;
  if (!rows) {
    for (int64_t r = 0; r < got.numel() / cols; ++r) all.push_back(r);
    rows = &all;
  }
  int64_t bad = 0;
  for (int64_t r : *rows)
    for (int64_t c = 0; c < cols; ++c) {
      const float g = bf(got, r * cols + c), w = bf(want, r * cols + c);
      const bool ok = std::isfinite(g) && std::isfinite(w) && std::fabs(g - w) <= atol + rtol * std::fabs(w);
      if (!ok && bad++ < 5) ADD_FAILURE() << what << ": row " << r << " col " << c << " got " << g << " want " << w;
    }
  return bad;
}

// The same for host f32 tensors (all rows).
inline int64_t compare_f32(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  const int64_t cols = got.size(got.dim() - 1);
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    const bool ok = std::isfinite(g) && std::isfinite(w) && std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok && bad++ < 5) ADD_FAILURE() << what << ": row " << i / cols << " col " << i % cols << " got " << g << " want " << w;
  }
  return bad;
}

inline double rms_f32(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += static_cast<double>(t.data<float>()[i]) * t.data<float>()[i];
  return t.numel() ? std::sqrt(s / t.numel()) : 0.0;
}

// Host bf16 copy of a host f32 tensor (round to nearest even, as the kernels' bf16 outputs).
inline Tensor to_bf16_host(const Tensor& t) {
  Tensor o = Tensor::empty(t.shape(), DType::BF16);
  for (int64_t i = 0; i < t.numel(); ++i) o.data<uint16_t>()[i] = f32_to_bf16_bits(t.data<float>()[i]);
  return o;
}

}  // namespace dsa::test
