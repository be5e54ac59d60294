#include "dsa/tune/synthetic_op.h"

#include <chrono>

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa::tune {

std::vector<Tactic> SyntheticOp::tactics(const Dims&) const {
  std::vector<Tactic> t{{kDefaultTactic, "default (slow, always works)"}};
  for (int i = 0; i < cfg_.num_tactics; ++i) t.push_back({i, fmt::format("variant {}", i)});
  return t;
}

int SyntheticOp::ideal(int64_t tokens) const {
  int log2 = 0;
  while ((int64_t{1} << (log2 + 1)) <= tokens) ++log2;
  return log2 % cfg_.num_tactics;
}

int SyntheticOp::cost_units(int tactic, int64_t tokens) const {
  if (tactic == kDefaultTactic) return cfg_.num_tactics + 2;
  int id = ideal(tokens);
  if (tactic == id) return 1;
  return 2 + ((tactic - id) % cfg_.num_tactics + cfg_.num_tactics) % cfg_.num_tactics;
}

int SyntheticOp::expected_best(int64_t tokens) const {
  int best = kDefaultTactic;
  for (int t = 0; t < cfg_.num_tactics; ++t)
    if (t != cfg_.failing_tactic && cost_units(t, tokens) < cost_units(best, tokens)) best = t;
  return best;
}

void SyntheticOp::prepare(const Dims& dims) {
  DSA_CHECK(!dims.empty() && dims[0] >= 1, "synthetic op: bad dims");
  prepared_ = dims[0];
  output_ = -1;
}

void SyntheticOp::run(int tactic, const Dims& dims) {
  DSA_CHECK(prepared_ == dims[0], "synthetic op: run({}) without prepare", dims[0]);
  DSA_CHECK(tactic == kDefaultTactic || (tactic >= 0 && tactic < cfg_.num_tactics),
            "synthetic op: tactic {} does not exist", tactic);
  ++runs_;
  if (tactic == cfg_.failing_tactic) fail("synthetic op: tactic {} cannot run (deliberate failure)", tactic);
  auto until = std::chrono::steady_clock::now() +
               std::chrono::duration<double, std::micro>(cost_units(tactic, dims[0]) * cfg_.unit_us);
  while (std::chrono::steady_clock::now() < until) {
  }
  // The same sum in a tactic-specific order: ascending, descending, or closed form.
  int64_t T = dims[0], s = 0;
  switch ((tactic + 1) % 3) {
    case 0: for (int64_t i = 1; i <= T; ++i) s += i; break;
    case 1: for (int64_t i = T; i >= 1; --i) s += i; break;
    default: s = T * (T + 1) / 2; break;
  }
  if (tactic == cfg_.wrong_tactic) s += 1;
  output_ = s;
}

}  // namespace dsa::tune
