#include "dsa/engine/rejection_sampling.h"

#include <algorithm>

#include "dsa/core/error.h"
#include "dsa/ops/sampling/philox.h"

namespace dsa::engine {

float spec_uniform(uint64_t seed, uint64_t counter, SpecDraw what) {
  return ops::philox_uniform(seed, counter, (uint64_t{1} << 63) | static_cast<uint64_t>(what));
}

int32_t draw_from(std::span<const float> probs, float u) {
  double total = 0;
  int32_t last = -1;
  for (size_t i = 0; i < probs.size(); ++i)
    if (probs[i] > 0) {
      total += probs[i];
      last = static_cast<int32_t>(i);
    }
  if (last < 0) return -1;
  const double target = static_cast<double>(u) * total;
  double cum = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    cum += probs[i];
    if (cum > target) return static_cast<int32_t>(i);
  }
  return last;
}

RejectionVerdict rejection_verdict(std::span<const float> p, std::span<const float> q, int32_t draft, float u_accept,
                                   float u_residual) {
  DSA_CHECK(p.size() == q.size() && draft >= 0 && static_cast<size_t>(draft) < p.size(),
            "rejection sampling: draft {} with target / draft rows of {} / {} ids", draft, p.size(), q.size());
  const auto d = static_cast<size_t>(draft);
  if (static_cast<double>(u_accept) * q[d] < static_cast<double>(p[d])) return {true, draft};
  std::vector<float> residual(p.size());
  bool any = false;
  for (size_t i = 0; i < p.size(); ++i) {
    residual[i] = std::max(0.f, p[i] - q[i]);
    any |= residual[i] > 0;
  }
  return {false, draw_from(any ? std::span<const float>(residual) : p, u_residual)};
}

}  // namespace dsa::engine
