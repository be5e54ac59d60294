// What one forward step of the DeepSeek-V4 model hands to its blocks: the config, the engine's
// step inputs (KV pools, state pools and the step metadata on the model's device) and the
// attention implementation of every layer (the selected backend). Built by
// DeepseekV4Model::forward.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "dsa/attention/backend.h"
#include "dsa/model/config.h"
#include "dsa/model/step_inputs.h"

namespace dsa::model::v4 {

// Per-layer attention setup, made once by the model: the sparse-MLA kernels run 16/32/64/128
// heads, so smaller models are padded with zero queries (outputs dropped) and zero sinks.
struct AttentionSetup {
  int64_t heads = 0;  // the heads this model runs: num_attention_heads, or a tensor-parallel rank's share
  int64_t heads_padded = 0;
  std::vector<const attn::AttentionImpl*> impl;  // [layer] the backend's implementation for its type
  std::vector<Tensor> sink;                      // [layer] f32 [heads_padded] on the model's device
};

struct Step {
  const ModelConfig* config = nullptr;
  const StepInputs* in = nullptr;
  const AttentionSetup* attn = nullptr;
  Device device = Device::cpu();
  int64_t tokens() const { return in->tokens(); }
  const kv::BatchMetadata& meta() const { return *in->meta; }
  const kv::KvPool& pool(int layer, attn::CacheRole role) const { return in->pool(layer, role); }
  const kv::GroupMetadata& group(int layer, attn::CacheRole role) const { return in->group(layer, role); }

  // Index lists that depend only on the step metadata and one cache group, not on the layer (the
  // SWA window slots of the "swa" group, the HCA visible slots of the "c128" group): made by the
  // first layer that asks, shared by every later layer of the same group in this step (a Step
  // lives for one forward, so the list never outlives its metadata).
  enum class SlotList : uint8_t { SwaWindow, HcaVisible };
  template <class Make>
  Tensor shared_slots(int cache_group, SlotList kind, Make&& make) const {
    for (const auto& [key, t] : slot_lists_)
      if (key.first == cache_group && key.second == kind) return t;
    slot_lists_.emplace_back(std::pair{cache_group, kind}, make());
    return slot_lists_.back().second;
  }

 private:
  mutable std::vector<std::pair<std::pair<int, SlotList>, Tensor>> slot_lists_;
};

}  // namespace dsa::model::v4
