// The warm-up plan: every tunable op (kernel family instance) at every shape bucket the engine
// can hit, derived from the model and the engine limits, so that nothing is tuned or launched
// for the first time while serving. It includes mixed batches (several decode tokens plus one
// prefill chunk) as the scheduler builds them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/tune/tunable_op.h"

namespace dsa::tune {

struct EngineLimits {
  int64_t max_batched_tokens = 8192;  // tokens in one forward step
  int64_t max_seqs = 256;             // concurrent sequences
  void validate() const;
};

struct WarmupItem {
  size_t op = 0;      // index into the op list the plan was built for
  Dims dims;          // bucketed
  std::string label;  // "tokens=64" or "mixed: 7 decode + prefill chunk 8185"
  bool mixed = false;
};

struct WarmupPlan {
  EngineLimits limits;
  std::vector<int64_t> token_buckets;
  std::vector<WarmupItem> items;
  size_t unique_keys(const std::vector<TunableOp*>& ops) const;
};

// Mixed batches the scheduler can form: d decode tokens plus one prefill chunk filling the step
// up to max_batched_tokens, for d = 1 and d = max_seqs - 1 (when max_seqs >= 2 and room is left).
struct MixedBatch {
  int64_t decode_tokens = 0;
  int64_t prefill_tokens = 0;
};
std::vector<MixedBatch> mixed_batches(const EngineLimits& limits);

// Items for each op: every token bucket x the op's other dim buckets, then the mixed batches.
WarmupPlan build_warmup_plan(const std::vector<TunableOp*>& ops, const EngineLimits& limits);

}  // namespace dsa::tune
