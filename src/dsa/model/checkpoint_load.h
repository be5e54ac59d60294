// Loading a model's weights from a checkpoint directory: validate against the weight spec
// (every expected tensor present with its shape and dtype; unknown tensors listed, not used),
// then hand out tensors in their checkpoint formats (FP8 + scales, MXFP4, BF16, F32): memory-
// mapped views on the CPU, or copies on a CUDA device. A progress bar runs on stderr while
// tensors are copied, and the load time is reported.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/config.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/deepseek_v4/schema.h"
#include "dsa/model/glm5/schema.h"
#include "dsa/model/schema/weight_spec.h"

namespace dsa {

struct LoadOptions {
  Device device = Device::cpu();  // CUDA: every tensor is copied to the device
  bool progress = true;           // progress bar on stderr (plain lines when not a TTY)
  bool strict = true;             // throw when the checkpoint does not match the spec
};

struct LoadedWeights {
  std::map<std::string, Tensor, std::less<>> tensors;  // spec name -> tensor (checkpoint format)
  // Dummy loads (dummy_weights.h) only: DeepSeek-V4 experts already stacked as the model reads
  // them, "<ffn>.experts.w13.weight" / ".w13.scale" / ".w2.weight" / ".w2.scale" (and the same
  // under "<ffn>.shared_experts."); the per-expert entries of `tensors` are views into these.
  std::map<std::string, Tensor, std::less<>> expert_stacks;
  schema::ValidationReport report;
  double seconds = 0;  // wall time of validation + copies
  uint64_t bytes = 0;  // bytes of the loaded tensors

  bool has(std::string_view name) const { return tensors.count(name) != 0; }
  const Tensor& get(std::string_view name) const;  // throws naming the tensor when absent
};

// Named tensors as a model sees them (names of the spec), with where each one comes from.
struct TensorSet {
  std::map<std::string, Tensor, std::less<>> tensors;
  std::map<std::string, std::string, std::less<>> origin;  // name -> "file" or "file: hf_name[slice]"
};

// The checkpoint's tensors under their own names.
TensorSet tensor_set(const Checkpoint& ckpt);

// A DeepSeek-V4 checkpoint in transformers 5.17's layout ("model.layers.N.self_attn.q_a_proj.weight",
// fused experts "mlp.experts.gate_up_proj" [E][2I][H] and "down_proj" [E][H][I]) seen under the
// official names: renamed tensors, and per-expert w1/w3/w2 views sliced from the fused tensors.
// Names with no official counterpart are returned in `unmapped`.
TensorSet deepseek_v4_official_view(const Checkpoint& ckpt, std::vector<std::string>* unmapped = nullptr);

schema::ValidationReport validate(const TensorSet& set, const std::vector<schema::WeightSpec>& specs);

LoadedWeights load_weights(const TensorSet& set, const std::vector<schema::WeightSpec>& specs,
                           const LoadOptions& opt, const std::string& label);

// config.json (model::load_model_config: the one reader and validator of config.json) +
// checkpoint directory -> validated weights, for each model. DeepSeek-V4 accepts the official
// layout and transformers' layout (detected from the tensor names). Every linear may be stored in
// any form its spec accepts and small vectors in any float dtype (weight_forms.h).
LoadedWeights load_deepseek_v4(const std::string& dir, const LoadOptions& opt = {},
                               schema::DeepseekV4Dims* dims_out = nullptr);
LoadedWeights load_glm5(const std::string& dir, const LoadOptions& opt = {}, schema::Glm5Dims* dims_out = nullptr);
LoadedWeights load_glm5(const std::string& dir, const schema::Glm5Dims& dims, const LoadOptions& opt);
// With the numbers given (dims_out: as adjusted for the layout found, e.g. MTP absent).
LoadedWeights load_deepseek_v4(const std::string& dir, schema::DeepseekV4Dims dims, const LoadOptions& opt,
                               schema::DeepseekV4Dims* dims_out = nullptr);
// For the engine: the weights of `config` (model::ModelConfig, parsed from the same directory's
// config.json or a built-in) from checkpoint directory `dir`.
LoadedWeights load_model_weights(const std::string& dir, const model::ModelConfig& config, const LoadOptions& opt = {});

}  // namespace dsa
