// GLM-5 / GLM-5.1 (`glm_moe_dsa`) causal LM: embedding, decoder layers (attention.h, mlp.h),
// final RMSNorm and LM head, over a flat ragged batch (causal_lm.h). The model declares one cache
// group ("tokens", pages of 64 tokens) holding every layer's fp8_ds_mla latent cache and the
// paged FP8 indexer keys of the layers that run the indexer (the MTP layer's caches included);
// the engine owns the memory. The MTP layer drafts tokens for speculative decoding (draft()).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsa/attention/plan.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/glm5/attention.h"
#include "dsa/model/glm5/mlp.h"
#include "dsa/model/load_format.h"
#include "dsa/model/shard_group.h"

namespace dsa::model::glm5 {

struct Options {
  std::optional<DType> absorbed_dtype;  // w_uk / w_uv storage (weights.h); unset: f32 on CPU, bf16 on CUDA
  // Tensor parallelism: the model is this rank's shard (sharding.h) and all-reduces the partial
  // sums of its attention and MLP blocks over `shards`. Null (or size 1): the whole model.
  ShardGroup* shards = nullptr;
  bool expert_parallel = false;         // with shards: routed experts split by expert (sharding.h)
  bool load_mtp = false;                // the MTP layer (draft(); LoadModelOptions::mtp)
  // Checkpoint or dummy weights (LoadModelOptions::weights). Dummy weights are filled on the
  // host (multi-threaded) and then built and moved like a checkpoint's: host memory holds the
  // whole model once (no device-direct fill for GLM yet).
  WeightSource weights;
};

class Model final : public CausalLM {
 public:
  Model(const std::string& dir, Device device, const Options& opt = {});
  const ModelConfig& config() const override { return cfg_; }
  Device device() const override { return device_; }
  kv::KvRequirements kv_requirements() const override;
  size_t weight_bytes() const override { return weight_bytes_; }
  std::vector<size_t> layer_weight_bytes() const override;
  void reserve(int64_t max_tokens, int max_requests) override;
  void forward(const StepInputs& in, const Tensor& logits) override;
  int num_draft_layers() const override { return static_cast<int>(w_.mtp.size()); }
  // The MTP layer (layer num_hidden_layers; causal_lm.h).
  void draft(const StepInputs& in, const Tensor& logits) override;
  // Read-only views for tests that drive one block with outside inputs.
  const Weights& weights() const { return w_; }
  const AttentionConfig& attention_config() const { return attn_cfg_; }

 private:
  ModelConfig cfg_;
  Device device_;
  schema::Glm5Dims dims_;
  Weights w_;
  size_t weight_bytes_ = 0;
  AttentionConfig attn_cfg_;
  MlpConfig mlp_cfg_;
  std::vector<attn::LayerPlan> plans_;
  std::unique_ptr<attn::AttentionImpl> attn_impl_;
  ops::MoeWorkspace moe_ws_;
  ShardGroup* shards_ = nullptr;  // set when the tensor-parallel size is above 1

  Step make_step(const StepInputs& in) const;
  // One decoder layer on the residual x (f32 [T][hidden]; h: bf16 scratch of the same shape);
  // sharded: the layer holds this rank's tensor-parallel shard and all-reduces its two blocks.
  // The residual adds run fused with the norm after them (ops::add_rms_norm): `pending` is the
  // previous layer's MLP output not yet added to x (undefined: none), and the layer returns its
  // own, which the caller adds (into the next layer's input norm, or with add_into).
  Tensor layer_forward(const LayerWeights& L, int layer, const Tensor& x, const Tensor& h, Step& step, bool sharded,
                       const Tensor& pending);
  void head_logits(const Tensor& x, const Tensor& logit_rows, const Tensor& norm, const Tensor& logits) const;
};

}  // namespace dsa::model::glm5
