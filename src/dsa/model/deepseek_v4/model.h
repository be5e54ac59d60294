// DeepSeek-V4 causal LM (CausalLM interface, causal_lm.h): embedding copied into hc_mult residual
// streams; per layer mHC pre -> attn_norm -> attention -> mHC post, mHC pre -> ffn_norm -> MoE ->
// mHC post; final hyper-head, norm, LM head. Paged KV memory is owned by an engine::KvManager
// (sliding-window, compressed and indexer-key pools); per-request compressor windows live in
// V4RequestState. The residual streams are kept in f32; linear layers take bf16 activations.
// Runs on the CPU (reference ops) or on one CUDA device: every per-token tensor lives on the
// model's device; only per-step metadata (request ranges, block tables) is read on the host. The
// sparse attention runs through the implementation of the backend the attention plan selected
// for each layer type (dsa select / DSA_ATTENTION_BACKEND).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "dsa/engine/kv_manager.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/kv_usage.h"
#include "dsa/attention/backend.h"
#include "dsa/model/deepseek_v4/step.h"
#include "dsa/model/deepseek_v4/weights.h"
#include "dsa/ops/moe/moe_layer.h"

namespace dsa::model::v4 {

struct V4Options {
  int64_t num_blocks = 64;          // pages of each unbounded cache group (block_size tokens each)
  int block_size = 256;             // tokens per logical block (MODEL1 pages)
  int max_requests = 16;
  int64_t max_step_tokens = 8192;   // tokens of one forward
  bool progress = false;            // loading progress bar
};

class DeepseekV4Model final : public CausalLM {
 public:
  DeepseekV4Model(ModelConfig config, ModelWeights weights, Device device, const V4Options& opt);
  const ModelConfig& config() const override { return config_; }
  Device device() const override { return device_; }
  int add_request() override;
  void free_request(int id) override;
  Tensor forward(const ForwardBatch& batch, bool all_logits = false) override;
  std::vector<KvGroupUsage> kv_usage() const override { return engine_kv_usage(*kv_); }
  bool kv_can_hold(int64_t tokens) const override { return kv_->can_hold_alone(tokens); }
  const engine::KvManager& kv() const { return *kv_; }

 private:
  ModelConfig config_;
  ModelWeights w_;
  Device device_;
  std::unique_ptr<engine::KvManager> kv_;
  std::vector<std::unique_ptr<attn::AttentionImpl>> impls_;  // one per layer type of the plan
  AttentionSetup attn_;                                       // per layer: impl, padded sink
  ops::MoeWorkspace moe_ws_;
  int next_id_ = 0;
};

std::unique_ptr<DeepseekV4Model> load_deepseek_v4_model(const std::string& dir, Device device,
                                                        const V4Options& opt = {});

}  // namespace dsa::model::v4
