#include "dsa/tune/families.h"

#include "dsa/tune/moe_gemm_tunable.h"
#include "dsa/tune/sparse_mla_tunable.h"

namespace dsa::tune {

const std::vector<TunableFamily>& tunable_families() {
  static const std::vector<TunableFamily> families = {
      {"sparse_mla_decode",
       "sparse MLA decode (per attention layer type of the model): heads per CTA x KV split count",
       make_sparse_mla_tunables,
       ""},
      {"moe_expert_gemm",
       "MoE grouped expert GEMM (gate/up with fused SwiGLU, down): row tile per token bucket",
       make_moe_gemm_tunables,
       ""},
  };
  return families;
}

std::vector<TunableOp*> TunableOps::pointers() const {
  std::vector<TunableOp*> p;
  for (const auto& o : ops) p.push_back(o.get());
  return p;
}

TunableOps make_tunable_ops(const PlanModel& model, const EngineLimits& limits, int device) {
  TunableOps out;
  for (const auto& f : tunable_families()) {
    if (!f.make) {
      out.notes.push_back(f.name + ": " + f.note);
      continue;
    }
    for (auto& op : f.make(model, limits, device)) out.ops.push_back(std::move(op));
  }
  return out;
}

}  // namespace dsa::tune
