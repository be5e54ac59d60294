// What one forward step of the DeepSeek-V4 model hands to its blocks: the config, the KV manager
// and its metadata for this batch (block tables, slots), the per-request states, and host copies
// of the per-request token ranges. Built by DeepseekV4Model::forward.
#pragma once
#include <vector>

#include "dsa/engine/kv_manager.h"
#include "dsa/model/config.h"
#include "dsa/model/deepseek_v4/request_state.h"

namespace dsa::model::v4 {

struct Step {
  const ModelConfig* config = nullptr;
  engine::KvManager* kv = nullptr;
  const engine::BatchMetadata* meta = nullptr;
  std::vector<V4RequestState*> states;  // [R], row order of meta
  std::vector<int64_t> query_start;     // [R + 1] host copy of meta->query_start
  std::vector<int64_t> seq_lens;        // [R] host copy: tokens of request r after this step
  int64_t tokens() const { return query_start.back(); }
  int requests() const { return static_cast<int>(states.size()); }
  const engine::GroupMetadata& group(int layer, attn::CacheRole role) const {
    return meta->groups.at(kv->pool(layer, role).group);
  }
};

}  // namespace dsa::model::v4
