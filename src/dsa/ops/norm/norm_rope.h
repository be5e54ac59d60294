// Fused RMSNorm + RoPE + bf16 rounding of DeepSeek-V4's attention inputs (one launch instead of
// rms_norm -> apply_rope -> cast [-> zero-padded copy] [-> kv_insert]):
//
//   rms_norm_rope:          q heads after wq_b (per-head unweighted norm) into the bf16 query the
//                           sparse-MLA kernels read, padded with zero heads to Hp >= H.
//   rms_norm_rope_model1:   the kv head after wkv (norm with kv_norm's weight) quantised straight
//                           into the MODEL1 sliding-window cache (formats/kv_cache_ops.h), and
//                           optionally also written as bf16.
//
// Per (token, head) row of D values: y = x * rsqrt(mean(x^2) + eps) [* weight] (f32), then the
// interleaved rotation of ops::apply_rope on y[offset, offset + rope_dim) at the token's position
// (f32), then one rounding to bf16. This is exactly the old sequence rms_norm (f32 out) ->
// apply_rope (f32) -> cast (bf16): the same f32 values, rounded the same way.
//   CPU (the reference): the old CPU ops' arithmetic (double statistics and rotation, each result
//     rounded to f32), so it equals the old CPU sequence bit for bit.
//   CUDA: the old CUDA kernels' arithmetic (the same block reduction over the same thread layout
//     as norm.cu's register kernel, the same rotation helper as rope.cu), so it equals the old CUDA
//     sequence bit for bit; against the CPU reference, one bf16 ulp (float vs double statistics
//     and rotation), the bound the tests check.
//
// Shapes: x f32|bf16 [T][H][D] or [T][D] (H = 1), last dimension contiguous, other strides free;
// weight undefined or f32|bf16 [D]; positions i32|i64 [T] (>= 0; checked on the CPU), same
// device. rope: interleaved pairs only (no half_split / deinterleave), offset even and
// offset + rope_dim <= D. The head counts are the tensors' (x: H, out: Hp), so a tensor-parallel
// rank passes its own heads.
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/rope/rope.h"

namespace dsa::ops {

struct NormRopeParams {
  NormParams norm;
  RopeConfig rope;
  int64_t rope_offset = 0;  // first rotated element of each head (even)
};

// out: bf16 [T][Hp][D] (Hp >= H; last dimension contiguous): heads [0, H) get the rows of x,
// heads [H, Hp) zeros.
void rms_norm_rope(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& out,
                   const NormRopeParams& p);

// x: [T][512] (MODEL1's row: 448 NoPE + 64 rope, so rope_offset must be 448 and rope_dim 64);
// cache / page_size / slots as formats::KvInsertParams (slots i64 [T], -1 skips the row; the CPU
// path rejects other out-of-range slots before writing, the CUDA kernel skips them). out_bf16:
// undefined, or bf16 [T][512] that also receives the rounded rows (every row, whatever its slot).
// The cache bytes equal formats::kv_insert(Model1) of those bf16 rows.
void rms_norm_rope_model1(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& cache,
                          int page_size, const Tensor& slots, const Tensor& out_bf16, const NormRopeParams& p);

// CPU references (called by the entry points for host tensors; public for the tests).
void rms_norm_rope_cpu(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& out,
                       const NormRopeParams& p);
void rms_norm_rope_model1_cpu(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& cache,
                              int page_size, const Tensor& slots, const Tensor& out_bf16, const NormRopeParams& p);

}  // namespace dsa::ops
