// CausalLM::kv_usage of the models that own an engine::KvManager: pages in use per cache group.
#pragma once
#include <vector>

#include "dsa/engine/kv_manager.h"
#include "dsa/model/causal_lm.h"

namespace dsa::model {

inline std::vector<KvGroupUsage> engine_kv_usage(const engine::KvManager& kv) {
  std::vector<KvGroupUsage> out;
  for (size_t g = 0; g < kv.groups().size(); ++g) {
    const int gi = static_cast<int>(g);
    out.push_back({kv.groups()[g].name, kv.num_pages(gi) - kv.num_free_pages(gi), kv.num_pages(gi)});
  }
  return out;
}

}  // namespace dsa::model
