// DeepSeek-V4 causal LM (CausalLM interface, causal_lm.h): embedding copied into hc_mult residual
// streams; per layer mHC pre -> attn_norm -> attention -> mHC post, mHC pre -> ffn_norm -> MoE ->
// mHC post; final hyper-head, norm, LM head. The model declares its memory (sliding-window,
// compressed and indexer-key pools in cache groups "swa", "c4", "c128"; compressor state slots)
// and the engine owns it. The residual streams are kept in f32; linear layers take bf16
// activations. Runs on the CPU (reference ops) or on one CUDA device, where every step stays on
// the device (the step metadata arrives as device tensors; no host loop over requests). The
// sparse attention runs through the implementation of the backend the attention plan selected
// for each layer type (dsa select / DSA_ATTENTION_BACKEND).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dsa/attention/backend.h"
#include "dsa/attention/plan.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/deepseek_v4/step.h"
#include "dsa/model/deepseek_v4/weights.h"
#include "dsa/model/load_format.h"
#include "dsa/model/shard_group.h"
#include "dsa/ops/moe/moe_layer.h"

namespace dsa::model::v4 {

struct V4Options {
  int block_size = 256;  // tokens per logical block (MODEL1 pages)
  bool progress = false; // loading progress
  bool load_mtp = false; // the MTP layer (draft(); LoadModelOptions::mtp)
  WeightSource weights;  // checkpoint or dummy weights (LoadModelOptions::weights)
  // Tensor parallelism (sharding.h, docs/parallelism.md): the model is this rank's shard and
  // all-reduces the partial sums of its attention and MoE over `shards`. Null (or size 1): the
  // whole model. Must outlive the model.
  ShardGroup* shards = nullptr;
  // With shards: split the routed experts by expert instead of by intermediate slice (sharding.h).
  bool expert_parallel = false;
};

class DeepseekV4Model final : public CausalLM {
 public:
  DeepseekV4Model(ModelConfig config, ModelWeights weights, Device device, const V4Options& opt);
  const ModelConfig& config() const override { return config_; }
  Device device() const override { return device_; }
  kv::KvRequirements kv_requirements() const override;
  size_t weight_bytes() const override { return weight_bytes_; }
  std::vector<size_t> layer_weight_bytes() const override;
  void reserve(int64_t max_tokens, int max_requests) override;
  void forward(const StepInputs& in, const Tensor& logits) override;
  int num_draft_layers() const override { return static_cast<int>(w_.mtp.size()); }
  int64_t hidden_width() const override { return static_cast<int64_t>(config_.hc_mult) * config_.hidden_size; }
  // The MTP layer mtp.0 (causal_lm.h); its sliding-window cache is layer num_layers.
  void draft(const StepInputs& in, const Tensor& logits) override;
  const ModelWeights& weights() const { return w_; }  // tests: the MTP reference

 private:
  ModelConfig config_;
  ModelWeights w_;
  Device device_;
  int block_size_ = 256;
  size_t weight_bytes_ = 0;
  std::vector<attn::LayerPlan> plans_;
  std::vector<std::unique_ptr<attn::AttentionImpl>> impls_;  // one per layer type of the plan
  AttentionSetup attn_;                                       // per layer: impl, padded sink
  ops::MoeWorkspace moe_ws_;
  ShardGroup* shards_ = nullptr;  // set when the tensor-parallel size is above 1
};

std::unique_ptr<DeepseekV4Model> load_deepseek_v4_model(const std::string& dir, Device device,
                                                        const V4Options& opt = {});

}  // namespace dsa::model::v4
