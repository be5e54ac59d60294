// DeepSeek-V4 attention block (docs/model-reference.md §2, transformers' DeepseekV4Attention):
//   q_res = RMSNorm(wq_a x); q = wq_b q_res as [H][512], per-head unweighted RMS norm, RoPE on the
//   trailing 64 dims; kv = RMSNorm(wkv x), RoPE, stored FP8 (MODEL1) in the sliding-window cache;
//   CSA/HCA layers: compressor entries (persistent windows in the request state) into the
//   compressed cache; CSA: the indexer's compressor keys into the indexer cache and its top-k over
//   them; sparse attention over [SWA window | compressed entries] with the per-head sink; inverse
//   RoPE on the output; grouped output projection wo_a (per group) then wo_b.
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/model/deepseek_v4/step.h"
#include "dsa/model/deepseek_v4/weights.h"

namespace dsa::model::v4 {

// x: bf16 [T][hidden] (the attn_norm output); returns bf16 [T][hidden] (wo_b's output rounding).
Tensor attention_forward(const LayerWeights& w, int layer, const Step& s, const Tensor& x);

}  // namespace dsa::model::v4
