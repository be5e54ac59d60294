// Row normalisations used by the DeepSeek-V4 and GLM-5.1 forwards.
//
//   rms_norm:   out = x * rsqrt(mean(x^2) + eps) * weight      (weight undefined: unweighted)
//   layer_norm: out = (x - mean) * rsqrt(var + eps) * weight + bias   (biased variance)
//
// x and out: f32 or bf16, any shape whose last dimension is contiguous and whose leading
// dimensions fold into one row stride (see rows.h); the last dimension is normalised. out may be
// x itself (in place). weight/bias: f32 or bf16 [cols]. Statistics in double on the CPU, float on
// the GPU; the result is rounded to out's dtype once (DeepSeek's reference computes
// (weight * x_normed) in fp32 and rounds once; transformers rounds x_normed to the activation
// dtype before the weight multiply: a difference of one bf16 rounding).
//
// Uses in the models (eps): V4 attn_norm/ffn_norm/q_norm/kv_norm/compressor norm (1e-6); V4 per-head
// unweighted q normalisation (rms_norm with no weight on q viewed [T*H][512], eps 1e-6; DeepSeek's
// model.py: q * rsqrt(mean(q^2) + norm_eps)); GLM q_a/kv_a layernorms (1e-5); GLM indexer k_norm
// (LayerNorm with weight and bias, eps 1e-6). V4's attention q/kv norms run fused with their RoPE
// and bf16 rounding (and the kv's MODEL1 cache insert): norm_rope.h.
//
// Dispatch: CPU tensors run the reference; CUDA tensors run the CUDA kernel when the build has
// CUDA (else dsa::Error). All tensors must be on the same device.
#pragma once
#include "dsa/core/tensor.h"

namespace dsa::ops {

struct NormParams {
  float eps = 1e-6f;
  void validate() const;  // eps finite and >= 0
};

void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p);
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out, const NormParams& p);

// The residual add and the norm after it in one pass over the row (GLM-5's add + post-attention
// norm, and the MLP's add + the next layer's input norm): x += delta, then out = rms_norm(x) *
// weight. x: the f32 residual stream, contiguous, written back; delta: f32 or bf16 of x's shape,
// contiguous; out: as for rms_norm, not overlapping x or delta. The result, x and out, is bit for
// bit that of add_into(x, delta) followed by rms_norm(x, weight, out) on the same device: the add
// is the same float add, and the norm reads the sums it wrote.
void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, const Tensor& out, const NormParams& p);

// CPU references (called by the entry points; public so that tests can call them directly).
void rms_norm_cpu(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p);
void layer_norm_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                    const NormParams& p);
void add_rms_norm_cpu(const Tensor& x, const Tensor& delta, const Tensor& weight, const Tensor& out,
                      const NormParams& p);

}  // namespace dsa::ops
