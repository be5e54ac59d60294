#include "dsa/model/glm5/mlp.h"

#include "dsa/ops/moe/expert_gemm.h"

namespace dsa::model::glm5 {

Tensor mlp_block(const LayerWeights& w, const Tensor& x, const MlpConfig& cfg, ops::MoeWorkspace& ws) {
  const int64_t T = x.size(0), H = x.size(1);
  Tensor out = Tensor::empty({T, H}, DType::BF16, x.device());
  if (w.dense) {
    // down(silu(gate x) * up x), gate/up in one GEMM with the SwiGLU fused (no clamp for GLM).
    Tensor act = Tensor::empty({T, w.moe.shared_w13.n() / 2}, DType::BF16, x.device());
    ops::ExpertGemmParams gp;
    gp.fuse_swiglu = true;
    gp.swiglu_limit = 0.f;
    ops::expert_gemm(x, Tensor(), Tensor(), w.moe.shared_w13, act, gp);
    ops::expert_gemm(act, Tensor(), Tensor(), w.moe.shared_w2, out, ops::ExpertGemmParams{});
    return out;
  }
  ops::MoeLayerParams p;
  p.router.score = ops::ScoreFunc::Sigmoid;
  p.router.topk = cfg.topk;
  p.router.routed_scaling = cfg.routed_scaling;
  p.swiglu_limit = 0.f;
  p.expert_base = w.expert_base;
  ops::moe_layer(x, Tensor(), w.moe, p, out, ws);
  return out;
}

}  // namespace dsa::model::glm5
