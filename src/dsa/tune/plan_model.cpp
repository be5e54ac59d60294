#include "dsa/tune/plan_model.h"

#include "dsa/core/error.h"

namespace dsa::tune {

void PlanModel::validate() const {
  DSA_CHECK(!attention.empty(), "model {}: no attention layer types", name);
  for (const auto& a : attention) {
    auto kind = attn::layer_kind_name(a.kind);
    DSA_CHECK(a.num_heads > 0, "model {}: {} layers: num_heads must be > 0, got {}", name, kind, a.num_heads);
    DSA_CHECK(a.head_size > 0, "model {}: {} layers: head_size must be > 0, got {}", name, kind, a.head_size);
    DSA_CHECK(a.topk >= 0, "model {}: {} layers: topk must be >= 0, got {}", name, kind, a.topk);
  }
}

}  // namespace dsa::tune
