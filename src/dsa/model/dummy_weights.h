// Dummy weights (`--load-format dummy`, vLLM's name): every tensor a model's weight spec lists,
// with its name, shape and dtype, filled with random but well-behaved values (dummy_fill.h)
// where the model keeps it, without a checkpoint: on a CUDA device each tensor is allocated
// there and filled by a kernel (no host buffer, no transfer), on the CPU by a multi-threaded
// host loop. The values depend only on the seed and the tensor names, so a CPU and a CUDA load
// hold the same bytes.
//
// DeepSeek-V4's routed and shared experts are allocated pre-stacked, as the model reads them
// ([E][2I][..] gate/up, [E][H][..] down; LoadedWeights::expert_stacks), and each expert's
// tensors are views into the stacks, so the model's build copies nothing and the device holds
// the weights once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/model/checkpoint_load.h"
#include "dsa/model/config.h"
#include "dsa/model/dummy_fill.h"
#include "dsa/model/schema/weight_spec.h"

namespace dsa {

struct DummyOptions {
  Device device = Device::cpu();
  uint64_t seed = 0;
  int64_t experts = 1;  // range of the hash-routing tables (n_routed_experts)
};

// The values of one tensor of the spec list: `specs` gives the linear a scale belongs to.
model::dummy::FillRecipe dummy_recipe(const schema::WeightSpec& s, const std::vector<schema::WeightSpec>& specs,
                                      int64_t experts);
// Per-tensor seed: the load seed mixed with the tensor's name.
uint64_t dummy_tensor_seed(uint64_t seed, const std::string& name);
// Fills a contiguous tensor (CPU or CUDA) with `recipe`'s values.
void dummy_fill(Tensor& t, const model::dummy::FillRecipe& recipe, uint64_t tensor_seed);

// Every tensor of `specs` on opt.device, filled. `label` names the model in the log line.
LoadedWeights dummy_weights(const std::vector<schema::WeightSpec>& specs, const DummyOptions& opt,
                            const std::string& label);

// The weights of `config` (its spec: schema::weight_specs), filled; `mtp` false leaves the MTP
// layers out (the model does not read them unless it drafts with them).
LoadedWeights dummy_model_weights(const model::ModelConfig& config, Device device, uint64_t seed = 0,
                                  bool mtp = true);

}  // namespace dsa
