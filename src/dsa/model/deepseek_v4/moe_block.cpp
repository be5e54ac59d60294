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
  Tensor out = Tensor::empty({x.size(0), c.hidden_size}, DType::BF16, x.device());
  ops::moe_layer(ops::cast(x, DType::BF16), token_ids, w.moe, p, out, ws);
  return ops::cast(out, DType::F32);
}

}  // namespace dsa::model::v4
