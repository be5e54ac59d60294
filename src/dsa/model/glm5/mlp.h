// The GLM-5.1 feed-forward blocks: the dense SwiGLU MLP of the first `first_k_dense_replace`
// layers, and the MoE of the others (sigmoid routing with e_score_correction_bias, top-k
// normalised and scaled by routed_scaling_factor, plus one shared expert; docs/model-reference.md §3),
// both on the grouped expert GEMM of ops/moe (the dense MLP as a single "expert").
#pragma once
#include "dsa/model/glm5/weights.h"
#include "dsa/ops/moe/moe_layer.h"

namespace dsa::model::glm5 {

struct MlpConfig {
  int topk = 8;
  float routed_scaling = 2.5f;
};

// x: bf16 [T][hidden] (post_attention_layernorm output). Returns bf16 [T][hidden].
Tensor mlp_block(const LayerWeights& w, const Tensor& x, const MlpConfig& cfg, ops::MoeWorkspace& ws);

}  // namespace dsa::model::glm5
