// Manifold-constrained hyper-connections (mHC) of DeepSeek-V4, batched over tokens.
//
// The residual of every token is hc = hc_mult (4) streams X[t][i][0..d). Around each sub-layer F
// (attention, MoE) the model does
//   mhc_pre:  x = flatten(X[t]) (hc*d values, fp32); mix = (fn . x) * rsqrt(mean(x^2) + norm_eps)
//             ((2+hc)*hc logits); pre/post/comb from mix (mhc_math.h: sigmoid, Sinkhorn);
//             y[t] = sum_i pre[i] * X[t][i]   (rounded to y's dtype)
//   (model):  y' = RMSNorm(y) with the layer's attn_norm / ffn_norm weight -- NOT part of mHC:
//             DeepSeek's Block.forward calls hc_pre, then attn_norm; transformers'
//             DeepseekV4DecoderLayer calls attn_hc, then input_layernorm. (docs/model-reference.md §2's
//             "y = RMSNorm(sum_i pre_i X_i)" means that norm.)
//   (model):  f = F(y')
//   mhc_post: X'[t][j] = post[t][j] * f[t] + sum_i comb[t][i][j] * X[t][i]   (fp32, rounded once)
// and before the LM head
//   mhc_head: mix = (fn_head . x) * rsqrt(mean(x^2) + norm_eps) (hc logits);
//             pre = sigmoid(scale0 * mix + base) + hc_eps (no Sinkhorn); y[t] = sum_i pre[i] X[t][i]
//   (model):  final RMSNorm (norm.weight), LM head.
// norm_eps is the model's rms_norm_eps (DeepSeek: norm_eps; transformers: the HC input_norm uses
// rms_norm_eps), hc_eps the separate hc_eps; both are 1e-6 in V4-Flash/Pro. comb is used with the
// FIRST index as the input stream (transformers: comb^T @ X; DeepSeek: sum over dim 2 of
// comb[..., i, j, None] * X[..., i, None, :]); comb is doubly stochastic but not symmetric.
//
// Shapes and dtypes (all contiguous, all on one device):
//   X [T][hc][d] f32|bf16;  fn [(2+hc)*hc][hc*d] f32;  base [(2+hc)*hc] f32;  scale [3] f32
//   mix [T][(2+hc)*hc] f32 (out: the normalised logits)
//   y [T][d] f32|bf16;  post [T][hc] f32;  comb [T][hc][hc] f32
//   head: fn [hc][hc*d], base [hc], scale [1], mix [T][hc]
//   mhc_post: f [T][d] f32|bf16, out [T][hc][d] f32|bf16 (out may be X: in place)
// The CPU reference accumulates the dot products in double; the CUDA kernels in float.
//
// Fused pre + RMSNorm (mhc_pre_norm / mhc_head_norm): the same as mhc_pre (mhc_head) followed by
// rms_norm(y, norm_weight, yn, np) -- y is rounded to its dtype before it is normalised, as the
// two-op sequence does -- in one pass over X on CUDA (the collapse CTA of a token keeps y in
// registers). y may be undefined (not stored; it is then rounded to yn's dtype); yn [T][d]
// f32|bf16; norm_weight f32|bf16 [d] or undefined (unweighted). On CUDA d <= 8192 takes the fused
// kernel; longer rows run the two ops. The CPU reference is the two CPU references in sequence.
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/ops/norm/norm.h"

namespace dsa::ops {

struct MhcParams {
  int hc_mult = 4;
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  float norm_eps = 1e-6f;
  void validate() const;  // 1 <= hc_mult <= 8, iters >= 1, eps finite >= 0
};

void mhc_pre(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
             const Tensor& mix, const Tensor& y, const Tensor& post, const Tensor& comb);
void mhc_post(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& out);
void mhc_head(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
              const Tensor& mix, const Tensor& y);
void mhc_pre_norm(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                  const Tensor& norm_weight, const NormParams& np, const Tensor& mix, const Tensor& y, const Tensor& yn,
                  const Tensor& post, const Tensor& comb);
void mhc_head_norm(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                   const Tensor& norm_weight, const NormParams& np, const Tensor& mix, const Tensor& y,
                   const Tensor& yn);

// mhc_post of one sub-layer, then mhc_pre_norm of the next over the new streams, X updated in
// place: X <- post * f + comb^T X; then mix/y/yn/post_out/comb_out of the next sub-layer (fn,
// base, scale, norm_weight). post/comb may be the same tensors as post_out/comb_out. The CPU
// runs the two CPU references in sequence. On CUDA with hc = 4 (and d <= 8192) one kernel writes
// the new streams and the next mix's partial dot products, so a sub-layer boundary is two
// launches instead of three; the new X is bit-identical to mhc_post's, the mix logits differ from
// the two ops by float summation order only (then pre/post/comb/y follow them).
void mhc_post_pre_norm(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& fn,
                       const Tensor& base, const Tensor& scale, const MhcParams& p, const Tensor& norm_weight,
                       const NormParams& np, const Tensor& mix, const Tensor& y, const Tensor& yn,
                       const Tensor& post_out, const Tensor& comb_out);

// CPU references (what the entry points run for CPU tensors).
void mhc_pre_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                 const Tensor& mix, const Tensor& y, const Tensor& post, const Tensor& comb);
void mhc_post_cpu(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& out);
void mhc_head_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                  const Tensor& mix, const Tensor& y);
void mhc_pre_norm_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                      const Tensor& norm_weight, const NormParams& np, const Tensor& mix, const Tensor& y,
                      const Tensor& yn, const Tensor& post, const Tensor& comb);
void mhc_head_norm_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale,
                       const MhcParams& p, const Tensor& norm_weight, const NormParams& np, const Tensor& mix,
                       const Tensor& y, const Tensor& yn);

}  // namespace dsa::ops
