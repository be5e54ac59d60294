// What one forward step of the DeepSeek-V4 model hands to its blocks: the config, the KV manager
// and its metadata for this batch (block tables, slots; on the model's device), the per-request
// states, host copies of the per-request token ranges, and the attention implementation of every
// layer (the selected backend). Built by DeepseekV4Model::forward.
#pragma once
#include <map>
#include <vector>

#include "dsa/attention/backend.h"
#include "dsa/engine/kv_manager.h"
#include "dsa/model/config.h"
#include "dsa/model/deepseek_v4/request_state.h"

namespace dsa::model::v4 {

// Per-layer attention setup, made once by the model: the sparse-MLA kernels run 16/32/64/128
// heads, so smaller models are padded with zero queries (outputs dropped) and zero sinks.
struct AttentionSetup {
  int64_t heads_padded = 0;
  std::vector<const attn::AttentionImpl*> impl;  // [layer] the backend's implementation for its type
  std::vector<Tensor> sink;                      // [layer] f32 [heads_padded] on the model's device
};

struct Step {
  const ModelConfig* config = nullptr;
  engine::KvManager* kv = nullptr;
  const engine::BatchMetadata* meta = nullptr;  // tensors on the model's device
  const AttentionSetup* attn = nullptr;
  Device device = Device::cpu();
  std::vector<V4RequestState*> states;  // [R], row order of meta
  std::vector<int64_t> query_start;     // [R + 1] host copy of meta->query_start
  std::vector<int64_t> seq_lens;        // [R] host copy: tokens of request r after this step
  int64_t tokens() const { return query_start.back(); }
  int requests() const { return static_cast<int>(states.size()); }
  const engine::GroupMetadata& group(int layer, attn::CacheRole role) const {
    return meta->groups.at(kv->pool(layer, role).group);
  }

  // Entries of cache group g written by request r in this step: rows [offset, offset + count) of
  // meta->groups[g].entry_slots (the KV manager lists them request by request, in entry order).
  struct EntryRange {
    int64_t first_entry = 0;  // request-local index of the first entry written
    int64_t offset = 0;
    int64_t count = 0;
  };
  EntryRange written_entries(int g, int r) const;

  // Global slots (i64 [seq_lens[r] / ratio] on the model's device) of every request-local entry
  // 0, 1, ... of request r in cache group g after this step. Built on the host from the block
  // table (downloaded once per step and group on CUDA: [R][blocks] i32) and uploaded once per
  // step and group (then sliced per request).
  Tensor request_entry_slots(int g, int r) const;

 private:
  mutable std::map<int, Tensor> entry_slots_;  // group -> i64 [sum over r of entries] (device)
  mutable std::map<int, std::vector<int64_t>> entry_offsets_;  // group -> [R + 1]
};

}  // namespace dsa::model::v4
