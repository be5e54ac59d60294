// The tuner: profiles every valid tactic of an op at one shape bucket and picks the fastest.
// A failing tactic (throws, CUDA error) counts as infinitely slow and is never chosen; when
// every tactic fails the bucket has no entry (nothing is cached) and the error says why.
#pragma once
#include <string>
#include <vector>

#include "dsa/tune/timing.h"
#include "dsa/tune/tuning_table.h"

namespace dsa::tune {

struct TuneOptions {
  TimingOptions timing;
  // A non-default tactic must beat the default by this fraction to be chosen: timing noise
  // then never flips a bucket to a tactic that is not really faster.
  double min_gain = 0.02;
};

struct BucketResult {
  std::string family, signature, key;
  Dims dims;                          // bucketed
  std::vector<TacticTiming> timings;  // one per tactic tried, default first
  bool ok = false;                    // a tactic was chosen
  TunedEntry entry;                   // the choice, when ok
  std::string error;                  // when !ok: prepare failed, or every tactic failed
};

// The tactics the tuner tries at `dims`: the op's list, default first (added if missing),
// duplicates removed.
std::vector<Tactic> tactics_to_try(const TunableOp& op, const Dims& dims);

// Prepares the op at `bucketed` dims, times every tactic, releases the op.
BucketResult tune_bucket(TunableOp& op, const Dims& bucketed, const TuneOptions& opt = {});

}  // namespace dsa::tune
