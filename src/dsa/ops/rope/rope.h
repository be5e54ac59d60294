// Rotary position embedding, interleaved pairs (GPT-J style): within the rotated slice
// [offset, offset + rope_dim) of the last dimension, pair i = (x[2i], x[2i+1]) is rotated by the
// angle pos * inv_freq[i]:
//   y[2i]   = x[2i] cos - x[2i+1] sin
//   y[2i+1] = x[2i+1] cos + x[2i] sin          (inverse: sin -> -sin, i.e. rotate by -pos)
// This is what DeepSeek's model.py does with complex multiplication (view_as_complex over
// adjacent pairs) and what transformers' DeepSeek-V4 `apply_rotary_pos_emb` does with its
// interleaved `rotate_half`.
//
// Where it is used (docs/model-reference.md §1-§3, checked against transformers 5.17):
//   V4 q/kv, compressor entries, indexer q/k: trailing 64 dims (offset = head_dim - 64);
//     sliding layers: plain theta 10000; CSA/HCA layers (and their compressor/indexer): theta
//     160000 + YaRN (factor 16, original 65536, beta_fast 32, beta_slow 1), attention factor 1.0.
//   V4 attention output: inverse rotation at the query position on o[-64:].
//   GLM q_rot/k_rot (last 64 of each q head, 64-dim tail of kv_a_proj_with_mqa): theta 1e6, plain.
//   GLM indexer: the FIRST 64 of the 128 dims (offset 0), same theta.
//
// Output order. transformers' GLM code (`apply_rotary_pos_emb_interleave`) writes the rotated
// slice de-interleaved: [y0, y2, y4, ..., y1, y3, ...]. It does so for q and k alike, so q.k is
// unchanged. dsa keeps the interleaved order by default (deinterleave_out = false) for GLM too,
// consistently for q, k and the latent/indexer caches; deinterleave_out = true reproduces
// transformers' layout bit for bit (for golden comparisons of intermediate tensors).
//
// Angles: inv_freq is computed in double and rounded to float; the angle is the float product
// float(pos) * inv_freq (what the references compute in fp32), cos/sin of that angle are exact to
// float. transformers additionally rounds cos/sin to the activation dtype (bf16) for bf16 models;
// DeepSeek's model.py keeps them fp32, as dsa does.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::ops {

struct RopeConfig {
  int64_t rope_dim = 64;  // rotated dims (even); rope_dim/2 frequencies
  double theta = 10000.0;
  // YaRN: used when yarn_factor > 1 and original_max_position > 0 (DeepSeek's precompute_freqs_cis
  // / transformers' _compute_yarn_parameters with truncate=True: floor/ceil correction range).
  double yarn_factor = 1.0;
  int64_t original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // multiplies cos and sin; V4 forces 1.0 (no mscale)

  static RopeConfig v4_main();      // theta 10000, plain
  static RopeConfig v4_compress();  // theta 160000, YaRN 16 / 65536 / 32 / 1, attention factor 1
  static RopeConfig glm(double theta = 1e6);
  bool yarn() const { return yarn_factor > 1.0 && original_max_position > 0; }
  void validate() const;  // rope_dim even in [2, 256], theta > 1, finite factors
};

// The rope_dim/2 inverse frequencies (float), YaRN applied when configured.
std::vector<float> rope_inv_freq(const RopeConfig& cfg);

struct RopeParams {
  int64_t offset = 0;             // first rotated element within the last dimension
  bool inverse = false;           // rotate by -pos (V4 attention output)
  bool deinterleave_out = false;  // write transformers' GLM order (see above)
  // Half-split pairs (x[i], x[i + rope_dim/2]) instead of interleaved ones (GPT-NeoX style: the
  // DeepSeek-V3.2 indexer, and GLM's indexer_rope_interleave = false should a checkpoint set it;
  // transformers 5.17's GLM indexer is always interleaved). Excludes deinterleave_out.
  bool half_split = false;
};

// In place on x: [T][D] or [T][H][D] (f32 or bf16; last dimension contiguous, other strides
// free), positions: [T] i32 or i64 on x's device, each >= 0 (checked on the CPU; the CUDA kernel
// trusts them). Requires offset + rope_dim <= D.
void apply_rope(const Tensor& x, const Tensor& positions, const RopeConfig& cfg, const RopeParams& p);
void apply_rope_cpu(const Tensor& x, const Tensor& positions, const RopeConfig& cfg, const RopeParams& p);

}  // namespace dsa::ops
