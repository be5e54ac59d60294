#include "dsa/model/deepseek_v4/moe_block.h"

#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model::v4 {

Tensor moe_forward(const LayerWeights& w, const ModelConfig& c, const Tensor& x, const Tensor& token_ids,
                   ops::MoeWorkspace& ws) {
  ops::MoeLayerParams p;
  p.router.score = ops::ScoreFunc::SqrtSoftplus;
  p.router.topk = c.num_experts_per_tok;
  p.router.routed_scaling = static_cast<float>(c.routed_scaling_factor);
  p.swiglu_limit = static_cast<float>(c.swiglu_limit);
  p.expert_base = w.expert_base;
  DSA_CHECK(x.dtype() == DType::BF16, "deepseek_v4: MoE input must be bf16, got {}", x.str());
  Tensor out = Tensor::empty({x.size(0), c.hidden_size}, DType::BF16, x.device());
  ops::moe_layer(x, token_ids, w.moe, p, out, ws);
  return out;  // bf16: mhc_post reads it as it is
}

}  // namespace dsa::model::v4
