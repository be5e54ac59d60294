#include "dsa/tune/warmup_plan.h"

#include <set>

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/tune/bucket.h"

namespace dsa::tune {

void EngineLimits::validate() const {
  DSA_CHECK(max_batched_tokens >= 1, "max batched tokens must be >= 1, got {}", max_batched_tokens);
  DSA_CHECK(max_seqs >= 1, "max sequences must be >= 1, got {}", max_seqs);
}

size_t WarmupPlan::unique_keys(const std::vector<TunableOp*>& ops) const {
  std::set<std::string> keys;
  for (const auto& it : items) keys.insert(ops.at(it.op)->name() + "/" + ops.at(it.op)->key(it.dims));
  return keys.size();
}

std::vector<MixedBatch> mixed_batches(const EngineLimits& limits) {
  limits.validate();
  std::vector<MixedBatch> out;
  for (int64_t d : {int64_t{1}, limits.max_seqs - 1}) {
    if (d < 1 || d >= limits.max_batched_tokens) continue;
    if (!out.empty() && out.back().decode_tokens == d) continue;
    out.push_back({d, limits.max_batched_tokens - d});
  }
  return out;
}

namespace {
// Cross product of the op's other dim bucket lists (one empty combination when it has none).
std::vector<Dims> other_combos(const TunableOp& op) {
  std::vector<Dims> combos{{}};
  for (const auto& values : op.other_dim_buckets()) {
    DSA_CHECK(!values.empty(), "tunable op {}: an other-dim bucket list is empty", op.name());
    std::vector<Dims> next;
    for (const auto& c : combos)
      for (int64_t v : values) {
        Dims d = c;
        d.push_back(v);
        next.push_back(d);
      }
    combos = std::move(next);
  }
  return combos;
}
}  // namespace

WarmupPlan build_warmup_plan(const std::vector<TunableOp*>& ops, const EngineLimits& limits) {
  limits.validate();
  WarmupPlan plan;
  plan.limits = limits;
  plan.token_buckets = token_buckets(limits.max_batched_tokens);
  const auto mixed = mixed_batches(limits);
  for (size_t i = 0; i < ops.size(); ++i) {
    const TunableOp& op = *ops[i];
    const size_t ndims = op.dim_names().size();
    auto combos = other_combos(op);
    DSA_CHECK(combos[0].size() + 1 == ndims, "tunable op {}: {} other-dim bucket lists for {} dims", op.name(),
              combos[0].size(), ndims);
    for (const auto& c : combos) {
      for (int64_t t : plan.token_buckets) {
        Dims d{t};
        d.insert(d.end(), c.begin(), c.end());
        plan.items.push_back({i, op.bucket(d, limits.max_batched_tokens), op.key(op.bucket(d, limits.max_batched_tokens)), false});
      }
      for (const auto& m : mixed) {
        Dims d{m.decode_tokens + m.prefill_tokens};
        d.insert(d.end(), c.begin(), c.end());
        Dims b = op.bucket(d, limits.max_batched_tokens);
        plan.items.push_back({i, b,
                              fmt::format("mixed: {} decode + prefill chunk {} ({})", m.decode_tokens,
                                          m.prefill_tokens, op.key(b)),
                              true});
      }
    }
  }
  return plan;
}

}  // namespace dsa::tune
