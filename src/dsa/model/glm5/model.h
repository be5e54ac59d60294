// GLM-5 / GLM-5.1 (`glm_moe_dsa`) causal LM: embedding, decoder layers (attention.h, mlp.h),
// final RMSNorm and LM head, over a flat ragged batch (causal_lm.h). The MTP layer is loaded by
// the checkpoint validator but not run (greedy decoding without speculation).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "dsa/engine/kv_manager.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/kv_usage.h"
#include "dsa/model/glm5/attention.h"
#include "dsa/model/glm5/mlp.h"

namespace dsa::model::glm5 {

struct Options {
  int64_t kv_pages = 0;  // KV manager blocks of 64 tokens (all requests); 0: DSA_GLM5_KV_PAGES or 256
  std::optional<DType> absorbed_dtype;  // w_uk / w_uv storage (weights.h); unset: f32 on CPU, bf16 on CUDA
};

class Model final : public CausalLM {
 public:
  Model(const std::string& dir, Device device, const Options& opt = {});
  const ModelConfig& config() const override { return cfg_; }
  Device device() const override { return device_; }
  int add_request() override;
  void free_request(int id) override;
  Tensor forward(const ForwardBatch& batch, bool all_logits = false) override;
  std::vector<KvGroupUsage> kv_usage() const override { return engine_kv_usage(*kv_); }
  bool kv_can_hold(int64_t tokens) const override { return kv_->can_hold_alone(tokens); }
  // Read-only views for tests that drive one block with outside inputs.
  const Weights& weights() const { return w_; }
  const AttentionConfig& attention_config() const { return attn_cfg_; }

 private:
  Step prepare(const ForwardBatch& batch);

  ModelConfig cfg_;
  Device device_;
  weights::Glm5Dims dims_;
  Weights w_;
  AttentionConfig attn_cfg_;
  MlpConfig mlp_cfg_;
  std::unique_ptr<engine::KvManager> kv_;  // latent (and indexer-key) pools, block tables, lengths
  int latent_group_ = 0;
  std::unique_ptr<attn::AttentionImpl> attn_impl_;
  ops::MoeWorkspace moe_ws_;
  std::map<int, Request> requests_;  // model state beside the KV manager's (same ids)
  int next_id_ = 0;
};

}  // namespace dsa::model::glm5
