// DeepSeek-V4 MoE block: hash routing (tid2eid, first num_hash_layers layers) or sqrt-softplus
// top-k routing with a selection bias, routed experts (MXFP4) and the shared expert, SwiGLU with
// the gate clamped to <= limit and up to [-limit, limit] (ops/moe/moe_layer.h does the work).
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/model/config.h"
#include "dsa/model/deepseek_v4/weights.h"

namespace dsa::model::v4 {

// x: bf16 [T][hidden] (ffn_norm output); token_ids: i32 [T]. Returns bf16 [T][hidden].
Tensor moe_forward(const LayerWeights& w, const ModelConfig& c, const Tensor& x, const Tensor& token_ids,
                   ops::MoeWorkspace& ws);

}  // namespace dsa::model::v4
