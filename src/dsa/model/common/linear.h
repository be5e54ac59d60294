// The dense projections both forwards hold: one Linear type over the weight formats the
// checkpoints use, and FusedLinear, the projections of one input kept as one weight.
//
// Linear: bf16 weights, or e4m3 weights with f32 128x128 block scales (checkpoints store the
// scales as f32 or UE8M0; UE8M0 is widened once at load, exact since they are powers of two).
//
// FusedLinear: its parts' rows one after another in one weight, each part a view of its rows.
// At one token every part's output is a contiguous piece of one GEMM's output row, so a decode
// step reads all of them in one launch (at T = 1 a small projection costs a launch's latency, not
// its bytes: 5-9 us for 2-13 MB on the H200). With more tokens each part runs on its own rows of
// the weight (the views), so nothing is copied in either case. Parts that cannot share a weight
// (formats differ, or an FP8 part before the last does not fill whole 128-row scale blocks) stay
// separate and run one by one.
#pragma once
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/ops/linear/linear.h"

namespace dsa::model {

struct Linear {
  Tensor weight;  // [N][K] e4m3 or bf16
  Tensor scale;   // FP8: f32 [ceil(N/128)][ceil(K/128)]; bf16: undefined
  bool fp8() const { return scale.defined(); }
  int64_t out_features() const { return weight.size(0); }
  int64_t in_features() const { return weight.size(1); }
  ops::Fp8BlockWeight fp8_block() const { return {weight, scale}; }
  // Both tensors on `dev` (themselves when already there).
  Linear to(Device dev) const;
  // Output rows [begin, end) as views (FP8: begin on a 128-row block boundary).
  Linear rows(int64_t begin, int64_t end) const;
  size_t nbytes() const;
  // x: bf16 [T][K]; out: bf16 or f32 [T][N], contiguous. FP8 GEMMs round to bf16 (their output
  // rounding) before an f32 out is widened.
  void apply(const Tensor& x, Tensor& out) const;
  Tensor apply(const Tensor& x, DType out = DType::BF16) const;
};

// A checkpoint's weight (and scale, for e4m3) as a Linear on `dev`: e4m3 needs its block scales
// (f32 or UE8M0); bf16 is kept; f32 is rounded to bf16 (nearest even). `what` names the tensor in
// errors.
Linear make_linear(const Tensor& weight, const Tensor& scale, Device dev, const std::string& what);

// FP8 block scales as f32 on their device (UE8M0 widened; f32 returned as is).
Tensor block_scales_f32(const Tensor& s);

class FusedLinear {
 public:
  FusedLinear() = default;
  // The parts (same K) as one weight on their device when they can share one; the parts are
  // copied once and the originals can go. `what` names the set in errors.
  static FusedLinear of(const std::vector<Linear>& parts, const std::string& what);

  bool fused() const { return whole_.weight.defined(); }
  size_t size() const { return parts_.size(); }
  const Linear& part(size_t i) const { return parts_.at(i); }
  size_t nbytes() const;
  // x: bf16 [T][K] -> one output per part, [T][N_i] of dtype `out` (bf16 or f32).
  std::vector<Tensor> apply(const Tensor& x, DType out) const;

 private:
  Linear whole_;  // defined when the parts share one weight
  std::vector<Linear> parts_;
};

}  // namespace dsa::model
