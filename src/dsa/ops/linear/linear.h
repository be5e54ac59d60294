// Dense linear layers: out[t][n] = sum_k x[t][k] * W[n][k].
//   linear_bf16:      bf16 weights (cuBLASLt on CUDA), out bf16 or f32.
//   linear_fp8_block: e4m3 weights with 128x128 block scales (fp32 or UE8M0), bf16 activations,
//                     out bf16 or f32 (fp32 sums written as they are).
//     act_fp8 = false: bf16 activations times exactly dequantized weights, fp32 accumulation
//                      (dsa's expert GEMM kernel in dense mode; portable SM90/SM120).
//     act_fp8 = true:  activations first quantized per 1x128 block to e4m3 with a power-of-two
//                      (UE8M0) scale, as DeepSeek's reference `act_quant` does; runs on
//                      cuBLASLt's block-scaled FP8 GEMM (VEC128_32F x BLK128x128_32F) where the
//                      device supports it, else on the same kernel with fake-quantized activations
//                      (always the kernel for f32 out: the cuBLASLt plan writes bf16).
// On CUDA the kernel splits K over extra CTAs when N alone gives too few (decode: T = 1..64 with
// N = 128..6144; expert_gemm.h, expert_gemm_split).
// See docs/perf/moe-linear-cublaslt.md for what cuBLASLt offers per device.
#pragma once
#include "dsa/core/tensor.h"

namespace dsa::ops {

struct Fp8BlockWeight {
  Tensor weight;  // [N][K] e4m3
  Tensor scale;   // [ceil(N/128)][K/128] f32 or E8M0
};

enum class LinearBackend { Auto, Kernel, CublasLt };

struct LinearFp8Params {
  bool act_fp8 = false;
  LinearBackend backend = LinearBackend::Auto;
  // The kernel's tactic and split-K (ExpertGemmParams::tactic / k_splits; -1: automatic), for
  // benchmarks and the tuner; ignored by cuBLASLt and the CPU.
  int tactic = -1;
  int k_splits = -1;
};

void linear_bf16(const Tensor& x, const Tensor& w, Tensor& out);
void linear_fp8_block(const Tensor& x, const Fp8BlockWeight& w, Tensor& out, const LinearFp8Params& p = {});

// Quantize-dequantize of activations per 1x128 block (the act_fp8 rounding), bf16 -> bf16.
void fake_quant_act_fp8(const Tensor& x, Tensor& out);

// Whether cuBLASLt returns an algorithm for the block-scaled FP8 GEMM on CUDA device `dev`
// (probed once per device with a small problem; false without CUDA).
bool cublaslt_fp8_block_supported(int dev = 0);

// Whether cuBLASLt has a block-scaled FP8 algorithm for this problem (it has none for some small
// T, e.g. T=1); linear_fp8_block then falls back to the kernel.
bool cublaslt_fp8_block_has_algo(int64_t T, int64_t N, int64_t K);

// Which backend linear_fp8_block uses for these parameters and shape on `dev`
// ("cpu", "kernel" or "cublaslt").
const char* linear_fp8_backend_name(const LinearFp8Params& p, Device dev, int64_t T, int64_t N, int64_t K,
                                    DType out = DType::BF16);

}  // namespace dsa::ops
